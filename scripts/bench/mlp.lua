-- scripts/bench/mlp.lua - training throughput of the reference MLPs through
-- the public Lua API: forward + backward + Adam (lr 1e-3) on synthetic data
-- with a fixed seed, timed after warm-up.
--
--   gglua --threads N scripts/bench/mlp.lua [config] [seconds]
--
-- config a: 784-256-10 ReLU, batch 128, cross-entropy
--        b: 784-1024-1024-10 ReLU, batch 256, cross-entropy
--        c: 2-16-1 ReLU, batch 32, MSE
-- Prints: config, steps/s, graph computes/step, nodes/step, pass-pool bytes/step.

local configs = {
  a = {sizes = {784, 256, 10}, batch = 128, loss = "ce"},
  b = {sizes = {784, 1024, 1024, 10}, batch = 256, loss = "ce"},
  c = {sizes = {2, 16, 1}, batch = 32, loss = "mse"},
}
local name = arg and arg[1] or "a"
local seconds = tonumber(arg and arg[2]) or 3
local cfg = assert(configs[name], "unknown config " .. tostring(name))

tensor.manual_seed(0)
local layers = {}
for i = 1, #cfg.sizes - 1 do
  layers[#layers + 1] = nn.Linear(cfg.sizes[i], cfg.sizes[i + 1])
  if i < #cfg.sizes - 1 then layers[#layers + 1] = nn.ReLU() end
end
local model = nn.Sequential(layers):to_gpu("persistent")
local opt = optim.adam(model:parameters(), {lr = 1e-3})

local x = tensor.randn(cfg.batch, cfg.sizes[1])
local target
if cfg.loss == "ce" then
  target = {}
  for i = 1, cfg.batch do target[i] = (i % cfg.sizes[#cfg.sizes]) + 1 end
else
  target = tensor.randn(cfg.batch, 1)
end
local loss_fn = cfg.loss == "ce" and nn.cross_entropy or nn.mse_loss

local function step()
  opt:zero_grad()
  local loss = with_grad_tape(function() return loss_fn(model(x), target) end)
  backward(loss)
  opt:step()
  return loss:item()
end

for _ = 1, 20 do step() end -- warm-up: allocations, first graphs
local s0, t0, n = residency.stats(), device.clock(), 0
repeat
  step()
  n = n + 1
until device.clock() - t0 >= seconds
local dt, s1 = device.clock() - t0, residency.stats()
print(string.format("%s %.1f steps/s  %.2f computes/step  %.0f nodes/step  %.0f pass bytes/step  peak RSS %.0f MiB",
  name, n / dt, (s1.graph_computes - s0.graph_computes) / n, (s1.nodes_computed - s0.nodes_computed) / n,
  (s1.pass_bytes_placed - s0.pass_bytes_placed) / n, (s1.peak_rss_bytes or 0) / 2^20))
