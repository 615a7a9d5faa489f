-- scripts/bench/autocast_curve.lua - does autocast train as f32 does, to
-- bf16's noise? The MLP of gpu_mlp.lua (1024-WIDTHx4-10, Adam lr 1e-4) from
-- one set of weights, on a random teacher's labels, trained STEPS steps in
-- f32, under autocast, and in f32 from the same weights rounded once to
-- bf16 (bf16's noise), for each of SEEDS seeds: the largest gap between
-- autocast's curve and f32's, and between the noise run's and f32's, as a
-- fraction of the first loss (a fraction of each step's loss grows without
-- meaning once both are near 0). torch_autocast_curve.py prints PyTorch's
-- gaps for the same setup.
--   gglua [--device cuda] scripts/bench/autocast_curve.lua [BATCH] [STEPS] [WIDTH] [SEEDS]
local batch = tonumber(arg and arg[1]) or 1024
local steps = tonumber(arg and arg[2]) or 200
local width = tonumber(arg and arg[3]) or 4096
local seeds = tonumber(arg and arg[4]) or 1
local sizes = {1024, width, width, width, width, 10}
local mlp = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "bench_mlp.lua") -- the benchmark MLP

local function train(mode, seed)
  tensor.manual_seed(seed)
  local model = mlp(sizes)
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

-- gap is the largest |a - f32| over the steps, as a fraction of the first
-- loss, and its step.
local function gap(a, f32)
  local g, at = 0, 1
  for s = 1, steps do
    local d = math.abs(a[s] - f32[s]) / f32[1]
    if d > g then g, at = d, s end
  end
  return g, at
end

local ac_gaps, noise_gaps = {}, {}
for seed = 0, seeds - 1 do
  local f32, ac, rounded = train("f32", seed), train("autocast", seed), train("rounded", seed)
  local g, at = gap(ac, f32)
  local n, nat = gap(rounded, f32)
  ac_gaps[#ac_gaps + 1], noise_gaps[#noise_gaps + 1] = g, n
  print(string.format("seed %d: autocast gap %.5f (step %d: %.5f against f32's %.5f), noise %.5f (step %d); final f32 %.5f autocast %.5f",
    seed, g, at, ac[at], f32[at], n, nat, f32[steps], ac[steps]))
end
-- median and largest of v (the lower median for an even count, as Python's
-- median_low).
local function spread(v)
  table.sort(v)
  return v[math.floor((#v + 1) / 2)], v[#v]
end
local am, ax = spread(ac_gaps)
local nm, nx = spread(noise_gaps)
print(string.format("gglua curve batch=%d steps=%d width=%d seeds=%d: autocast gap median %.5f max %.5f; noise median %.5f max %.5f (of the first loss)",
  batch, steps, width, seeds, am, ax, nm, nx))
