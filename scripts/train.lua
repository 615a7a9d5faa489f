-- scripts/train.lua - the gglua demo: an MLP learns to tell two interleaved
-- spirals apart, on data it makes itself.
--
-- The weights live in the persistent pool on the device for the whole run;
-- a step uploads only its batch, and forward, backward and the Adam update
-- run as one ggml graph. At the end the model is saved as a GGUF
-- checkpoint, reloaded into a fresh model, and that model's accuracy is
-- reported.
--
--   gglua scripts/train.lua [steps] [checkpoint.gguf]

local steps = tonumber(arg and arg[1]) or 600
local ckpt = (arg and arg[2]) or ((os.getenv("TMPDIR") or "/tmp") .. "/gglua-train.gguf")
tensor.manual_seed(42)
math.randomseed(42)

-- Two spirals of n points each, with a little noise; labels are 1-based.
local function spirals(n)
  local x, y = {}, {}
  for c = 0, 1 do
    for i = 1, n do
      local r = i / n
      local th = 3.5 * math.pi * r + c * math.pi + (math.random() - 0.5) * 0.3
      x[#x + 1] = {r * math.cos(th), r * math.sin(th)}
      y[#y + 1] = c + 1
    end
  end
  return tensor(x), y
end

local function mlp()
  return nn.Sequential{nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)}
end

local function accuracy(model, x, labels)
  local _, guess = model(x):max(2)
  local right = 0
  for i, g in ipairs(guess:totable()) do
    if g == labels[i] then right = right + 1 end
  end
  return right / #labels
end

local x, labels = spirals(200)
local model = mlp():to_gpu("persistent")
local opt = optim.adam(model:parameters(), {lr = 0.01})
local sched = optim.lr_scheduler.cosine(opt, {t_max = steps, eta_min = 1e-3})
print(string.format("training %s\non %d points for %d steps (device %s)", tostring(model), #labels, steps, device.current()))

local before = residency.stats()
local first_loss, last_loss
local bar = progress(steps)
for step in bar do
  opt:zero_grad()
  local loss = with_grad_tape(function()
    return nn.cross_entropy(model(x), labels)
  end)
  backward(loss)
  opt:step()
  sched:step()
  last_loss = loss:item() -- the step's one graph compute happens here
  first_loss = first_loss or last_loss
  bar:set{loss = last_loss}
end
local after = residency.stats()
print(string.format("loss %.4f -> %.4f; persistent pool %d B; %.0f B uploaded per step (the batch)",
  first_loss, last_loss, after.p_buffer_bytes, (after.h2d_bytes - before.h2d_bytes) / steps))

tensor.save(ckpt, model:state_dict())
local restored = mlp():load_state_dict(tensor.load(ckpt))
print(string.format("checkpoint %s reloaded: accuracy %.1f%%", ckpt, 100 * accuracy(restored, x, labels)))
