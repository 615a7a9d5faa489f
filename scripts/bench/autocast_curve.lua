-- scripts/bench/autocast_curve.lua - does autocast train as f32 does, to
-- bf16's noise? The MLP of gpu_mlp.lua (1024-WIDTHx4-10, Adam lr 1e-4) from
-- one set of weights, on a random teacher's labels, trained STEPS steps in
-- f32 and under autocast: the two loss curves (every tenth step) and the
-- largest relative gap between them. torch_autocast_curve.py prints
-- PyTorch's gap for the same setup: that is bf16's noise.
--   gglua [--device cuda] scripts/bench/autocast_curve.lua [BATCH] [STEPS] [WIDTH]
local batch = tonumber(arg and arg[1]) or 1024
local steps = tonumber(arg and arg[2]) or 200
local width = tonumber(arg and arg[3]) or 4096
local sizes = {1024, width, width, width, width, 10}

local function train(mode)
  tensor.manual_seed(0)
  local layers = {}
  for i = 1, #sizes - 1 do
    layers[#layers + 1] = nn.Linear(sizes[i], sizes[i + 1])
    if i < #sizes - 1 then layers[#layers + 1] = nn.ReLU() end
  end
  local model = nn.Sequential(layers)
  model:to_gpu("persistent")
  local x = to_gpu(tensor.randn(batch, sizes[1]), "persistent")
  local y = to_gpu(x:matmul(tensor.randn(sizes[1], 10)):argmax(2), "persistent")
  local opt = optim.adam(model:parameters(), {lr = 1e-4})
  local losses = {}
  for s = 1, steps do
    opt:zero_grad()
    local loss = with_grad_tape(function()
      if mode == "autocast" then return autocast(function() return nn.cross_entropy(model(x), y) end) end
      return nn.cross_entropy(model(x), y)
    end)
    backward(loss)
    opt:step()
    losses[s] = loss:item()
  end
  return losses
end

-- The gaps: relative to the step's f32 loss (large once both are near 0,
-- where rounding decides), and relative to the first loss.
local f32, ac = train("f32"), train("autocast")
local gap, at, abs = 0, 1, 0
for s = 1, steps do
  local g = math.abs(ac[s] - f32[s]) / f32[s]
  if g > gap then gap, at = g, s end
  abs = math.max(abs, math.abs(ac[s] - f32[s]) / f32[1])
  if s == 1 or s % 10 == 0 then print(string.format("step %4d  f32 %.5f  autocast %.5f", s, f32[s], ac[s])) end
end
print(string.format("gglua curve batch=%d steps=%d width=%d: largest gap %.4f of the loss (step %d), %.5f of the first loss; final f32 %.5f autocast %.5f",
  batch, steps, width, gap, at, abs, f32[steps], ac[steps]))
