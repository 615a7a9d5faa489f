-- tests/gpu/llm.lua - a GGUF language model on the CPU and on the GPU
-- (device.use): its logits, greedy generation and LoRA training agree.
-- The GPU reads K-quants' rows and the quantized weights' gradient through
-- gglua's dequantize kernel; its quantized products round activations as
-- ggml-cuda's (q8_1) do, the CPU's as ggml's CPU (q8_0/q8_K) does, and its
-- f32 products are TF32: hence the tolerances.
--   gglua --device cuda tests/gpu/llm.lua DIR [device]
-- DIR holds f32.gguf and its q8_0, q4_0 and q4_k_m quantizations (a small
-- random llama: llm.WriteRandom and llama.cpp's quantizer).
local dir = assert(arg[1], "usage: tests/gpu/llm.lua DIR [device]")
local gpu = arg[2] or "cuda"

local function run(path)
  tensor.manual_seed(3)
  local m = llm.load(path)
  local ids = m:tokenize("the cat sat on the mat and the dog sat on")
  local logits = m:logits(ids):totable()
  local _, gen = m:generate(ids, {max_tokens = 24, temperature = 0})
  local lora = m:lora({r = 4, alpha = 8, targets = {"attn_q", "attn_v", "ffn_gate", "ffn_down"}})
  local opt = optim.adamw(lora:parameters(), {lr = 1e-2, weight_decay = 0})
  local x, y = {}, {}
  for i = 1, #ids - 1 do x[i], y[i] = ids[i], ids[i + 1] end
  local losses = {}
  for s = 1, 6 do
    opt:zero_grad()
    local loss = with_grad_tape(function() return nn.cross_entropy(m:logits(x), y) end)
    backward(loss)
    opt:step()
    losses[s] = loss:item()
  end
  return logits, gen, losses
end

local function largest(a, b)
  local diff, scale = 0, 0
  for i, row in ipairs(a) do
    for j, v in ipairs(row) do
      diff = math.max(diff, math.abs(v - b[i][j]))
      scale = math.max(scale, math.abs(b[i][j]))
    end
  end
  return diff, scale
end

local failed = 0
for _, name in ipairs{"f32", "q8_0", "q4_0", "q4_k_m"} do
  local path = dir .. "/" .. name .. ".gguf"
  device.use("cpu")
  local cl, cg, closs = run(path)
  device.use(gpu)
  local gl, gg, gloss = run(path)
  local diff, scale = largest(gl, cl)
  local same = 0
  while same < #cg and gg[same + 1] == cg[same + 1] do same = same + 1 end
  local lossdiff = 0
  for s = 1, #closs do lossdiff = math.max(lossdiff, math.abs(gloss[s] - closs[s]) / (1 + closs[s])) end
  local tol = name == "f32" and 1e-3 or 5e-2
  local ok = diff <= tol * scale and lossdiff <= 2e-2 and gloss[#gloss] < gloss[1]
  print(string.format("%-7s logits: largest difference %.2e (largest %.2f); greedy: %d of %d tokens the same; " ..
    "LoRA losses %.4f -> %.4f (CPU %.4f -> %.4f, largest difference %.1e) %s",
    name, diff, scale, same, #cg, gloss[1], gloss[#gloss], closs[1], closs[#closs], lossdiff, ok and "ok" or "FAIL"))
  if not ok then failed = failed + 1 end
end
assert(failed == 0, failed .. " model(s) disagree between the CPU and " .. gpu)
print("llm: CPU and " .. gpu .. " agree")
