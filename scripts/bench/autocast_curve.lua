-- scripts/bench/autocast_curve.lua - does autocast train as f32 does, to
-- bf16's noise? The MLP of gpu_mlp.lua (1024-WIDTHx4-10, Adam lr 1e-4) from
-- one set of weights, on a random teacher's labels, trained STEPS steps in
-- f32 and under autocast: the two loss curves (every tenth step) and the
-- largest relative gap between them. bf16's noise, to read it against:
-- the gap between f32 and f32 from the same weights rounded once to bf16
-- (a third run), and torch_autocast_curve.py's gap between PyTorch's
-- autocast and f32 curves for the same setup.
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
  if mode == "rounded" then
    for _, p in ipairs(model:parameters()) do p:detach():copy_(p:to("bf16"):to("f32")) end
  end
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

local f32, ac, rounded = train("f32"), train("autocast"), train("rounded")
-- gap is the largest |a - f32| relative to the step's f32 loss (large
-- once both are near 0, where rounding decides) and to the first loss.
local function gap(a)
  local rel, at, first = 0, 1, 0
  for s = 1, steps do
    local g = math.abs(a[s] - f32[s]) / f32[s]
    if g > rel then rel, at = g, s end
    first = math.max(first, math.abs(a[s] - f32[s]) / f32[1])
  end
  return rel, at, first
end
for s = 1, steps do
  if s == 1 or s % 10 == 0 then
    print(string.format("step %4d  f32 %.5f  autocast %.5f  f32 from rounded weights %.5f", s, f32[s], ac[s], rounded[s]))
  end
end
local rel, at, first = gap(ac)
local nrel, nat, nfirst = gap(rounded)
print(string.format("gglua curve batch=%d steps=%d width=%d: largest gap %.4f of the loss (step %d), %.5f of the first loss; " ..
  "noise (f32 from bf16-rounded weights) %.4f (step %d), %.5f; final f32 %.5f autocast %.5f",
  batch, steps, width, rel, at, first, nrel, nat, nfirst, f32[steps], ac[steps]))
