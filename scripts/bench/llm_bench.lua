-- scripts/bench/llm_bench.lua - a GGUF model's speed as llama.cpp's
-- llama-bench measures it: pp, a prompt of P tokens in one forward pass;
-- tg, G tokens generated one at a time (greedy, each read back and chosen
-- on the host, the key/value cache on the device); then a LoRA step.
--
--   gglua [--device cuda] scripts/bench/llm_bench.lua MODEL.gguf [P=512] [G=128] [reps=3] [lora_T=0] [lora_B=1] [bf16]
--
-- The prompt is llama_bench_mini's (shared/llama-ref): token (i*7919+13)
-- mod vocab. lora_T > 0 also times LoRA steps (r=8 on attn_q and attn_v,
-- AdamW) on a batch of lora_B sequences of lora_T tokens (PEFT's
-- peft_lora_bench.py B T: lora_B=8, lora_T=512); bf16 runs their forward
-- under autocast (PEFT's base and activations are bf16). Prints lines of the form
--   gglua pp512=NNN tok/s tg128=NNN tok/s (best of 3) ...
local path = assert(arg[1], "usage: llm_bench.lua MODEL.gguf [P] [G] [reps] [lora_T] [lora_B] [bf16]")
local P, G = tonumber(arg[2]) or 512, tonumber(arg[3]) or 128
local reps, loraT, loraB = tonumber(arg[4]) or 3, tonumber(arg[5]) or 0, tonumber(arg[6]) or 1
local bf16 = arg[7] == "bf16"

local t0 = device.clock()
local m = llm.load(path)
print(string.format("%s, loaded in %.1f s on %s", tostring(m), device.clock() - t0, device.current()))
local ids = {}
for i = 0, P - 1 do ids[i + 1] = (i * 7919 + 13) % m.vocab + 1 end

local best_pp, best_tg, made = 0, 0, 0
for r = 0, reps do -- r = 0 warms up
  t0 = device.clock()
  local y = m:logits(ids)
  y[P][1]:item() -- the last position's first logit: waits for the pass
  local pp = P / (device.clock() - t0)
  t0 = device.clock()
  local _, gen = m:generate({ids[1]}, {max_tokens = G, temperature = 0})
  local tg = #gen / (device.clock() - t0)
  if r > 0 then best_pp, best_tg, made = math.max(best_pp, pp), math.max(best_tg, tg), #gen end
end
local s = residency.stats()
print(string.format("gglua pp%d=%.0f tok/s tg%d=%.1f tok/s (best of %d; %d tokens generated) persistent %.0f MiB, pass peak %.0f MiB",
  P, best_pp, G, best_tg, reps, made, s.p_buffer_bytes / 2^20, s.peak_bytes / 2^20))

if loraT > 0 then
  local lora = m:lora({r = 8, alpha = 16, targets = {"attn_q", "attn_v"}})
  local opt = optim.adamw(lora:parameters(), {lr = 1e-4, weight_decay = 0})
  m:train()
  local x, y = {}, {} -- sequence b starts b tokens into the prompt
  for b = 1, loraB do
    x[b] = {}
    for i = 1, loraT do
      x[b][i], y[#y + 1] = ids[(i + b - 2) % P + 1], ids[(i + b - 1) % P + 1]
    end
  end
  if loraB == 1 then x = x[1] end
  local best = math.huge
  for step = 0, reps + 1 do
    t0 = device.clock()
    opt:zero_grad()
    local loss = with_grad_tape(function()
      local function forward() return nn.cross_entropy(m:logits(x):reshape(loraB * loraT, m.vocab), y) end
      if bf16 then return autocast(forward) end
      return forward()
    end)
    backward(loss)
    opt:step()
    loss:item()
    if step > 1 then best = math.min(best, device.clock() - t0) end -- two warm-up steps
  end
  s = residency.stats()
  print(string.format("gglua LoRA r=8 q,v B=%d T=%d%s: %.0f tok/s (%.1f ms a step), pass peak %.0f MiB, all held %.0f MiB",
    loraB, loraT, bf16 and " bf16" or "", loraB * loraT / best, best * 1e3, s.peak_bytes / 2^20, s.total_buffer_bytes / 2^20))
end
