-- scripts/examples/finetune_gguf.lua - fine-tune a GGUF language model
-- (llama.cpp's files, quantized or not) with LoRA on a text file.
--
-- It shows:
--   * llm.load: the model's weights stay as the file stores them (q4_0 ...);
--   * m:lora: small trainable adapters beside the frozen weights;
--   * an ordinary training loop: with_grad_tape, backward, AdamW;
--   * lora:save: an adapter llama.cpp applies (llama-cli -m MODEL --lora FILE);
--   * m:generate, greedy, before and after.
--
--   gglua scripts/examples/finetune_gguf.lua MODEL.gguf TEXT.txt [ADAPTER.gguf] [steps] [block]

local model_path, text_path = assert(arg[1], "usage: MODEL.gguf TEXT.txt"), assert(arg[2], "usage: MODEL.gguf TEXT.txt")
local adapter_path = arg[3] or "adapter.gguf"
local steps, block = tonumber(arg[4]) or 60, tonumber(arg[5]) or 32
tensor.manual_seed(1)
math.randomseed(1)

local m = llm.load(model_path)
print(m)
local f = assert(io.open(text_path))
local text = f:read("*a")
f:close()
local ids = m:tokenize(text)                     -- 1-based token ids, BOS first
local prompt = {unpack(ids, 1, 4)}               -- the text's first tokens
print("before: " .. m:generate(prompt, {max_tokens = 16, temperature = 0}))

local lora = m:lora({r = 8, alpha = 16, targets = {"attn_q", "attn_v", "ffn_down"}})
print(lora)
local opt = optim.adamw(lora:parameters(), {lr = 3e-3, weight_decay = 0})
m:train()
for step = 1, steps do
  local s = math.random(1, math.max(1, #ids - block))   -- a window of the text
  local x, y = {}, {}
  for i = s, math.min(s + block, #ids) - 1 do
    x[#x + 1], y[#y + 1] = ids[i], ids[i + 1]            -- predict each next token
  end
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.cross_entropy(m:logits(x), y) end)
  backward(loss)
  opt:step()
  if step == 1 or step % 10 == 0 then
    print(string.format("step %3d  loss %.4f", step, loss:item()))
  end
end
m:eval()

lora:save(adapter_path)
print("saved " .. adapter_path)
print("after: " .. m:generate(prompt, {max_tokens = 16, temperature = 0}))
