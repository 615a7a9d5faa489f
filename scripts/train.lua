-- scripts/train.lua - the gglua demo: a small MLP learns to tell two
-- interleaved spirals apart, on data it makes itself.
--
-- The weights live in the persistent pool on the device for the whole run;
-- each step uploads only its batch, and forward, backward and the Adam
-- update run as one ggml graph.
--
--   gglua scripts/train.lua [steps]

local steps = tonumber(arg and arg[1]) or 600
tensor.manual_seed(42)
math.randomseed(42)

-- Two spirals of n points each, with a little noise.
local function spirals(n)
  local x, y = {}, {}
  for c = 0, 1 do
    for i = 1, n do
      local r = i / n
      local th = 3.5 * math.pi * r + c * math.pi + (math.random() - 0.5) * 0.3
      x[#x + 1] = {r * math.cos(th), r * math.sin(th)}
      y[#y + 1] = c + 1 -- labels are 1-based
    end
  end
  return tensor(x), y
end

local x, labels = spirals(200)

-- A 2-64-64-2 MLP with PyTorch's default (uniform) initialisation.
local function linear(n_in, n_out)
  local bound = 1 / math.sqrt(n_in)
  local w = tensor.param((tensor.rand(n_out, n_in) * 2 - 1) * bound)
  local b = tensor.param((tensor.rand(1, n_out) * 2 - 1) * bound)
  return {w = w, b = b}
end
local l1, l2, l3 = linear(2, 64), linear(64, 64), linear(64, 2)
local params = {l1.w, l1.b, l2.w, l2.b, l3.w, l3.b}
for _, p in ipairs(params) do to_gpu(p, "persistent") end

local function forward(input)
  local h = (input:matmul(l1.w:t()) + l1.b):tanh()
  h = (h:matmul(l2.w:t()) + l2.b):tanh()
  return h:matmul(l3.w:t()) + l3.b
end

local opt = optim.adam(params, {lr = 0.01})
print(string.format("training a 2-64-64-2 MLP on %d points for %d steps (device %s)", #labels, steps, device.current()))

local start = residency.stats()
for step = 1, steps do
  opt:zero_grad()
  local loss = with_grad_tape(function()
    return nn.cross_entropy(forward(x), labels)
  end)
  backward(loss)
  opt:step()
  if step == 1 or step % 100 == 0 then
    local s = residency.stats()
    print(string.format("step %4d  loss %.4f  persistent pool %d B  h2d %d B", step, loss:item(), s.p_buffer_bytes, s.h2d_bytes - start.h2d_bytes))
  end
end

-- Accuracy on the training points.
local logits = forward(x):totable()
local right = 0
for i, row in ipairs(logits) do
  local guess = row[1] > row[2] and 1 or 2
  if guess == labels[i] then right = right + 1 end
end
print(string.format("accuracy: %.1f%% (%d of %d)", 100 * right / #labels, right, #labels))
