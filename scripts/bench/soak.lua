-- scripts/bench/soak.lua - a long training run that must stay flat: the
-- reference MLP (784-256-10, batch 128, Adam) for N steps; both pools, the
-- cache and the process's resident memory are sampled every tenth of the run
-- and must not grow once warm: the pools not at all, the resident memory by
-- at most 5% (the mean of the last three samples over the mean of the first
-- three: single samples swing a few percent with Go's garbage collections).
--
--   gglua scripts/bench/soak.lua [steps]
local steps = tonumber(arg and arg[1]) or 10000
tensor.manual_seed(0)
local model = nn.Sequential{nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)}:to_gpu("persistent")
local opt = optim.adam(model:parameters(), {lr = 1e-3})
local x = tensor.randn(128, 784)
local labels = {}
for i = 1, 128 do labels[i] = (i % 10) + 1 end

local function step()
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.cross_entropy(model(x), labels) end)
  backward(loss)
  opt:step()
  return loss:item()
end

for _ = 1, 50 do step() end
collectgarbage()
local first = residency.stats()
local t0 = device.clock()
local rss = {}
print(string.format("%8s %12s %12s %12s %10s %8s", "step", "pass B", "persistent B", "cached B", "RSS MiB", "loss"))
for i = 1, steps do
  local loss = step()
  if i % math.max(1, math.floor(steps / 10)) == 0 then
    collectgarbage()
    local s = residency.stats()
    print(string.format("%8d %12d %12d %12d %10.1f %8.4f", i, s.buffer_bytes, s.p_buffer_bytes, s.cached_bytes, s.rss_bytes / 2^20, loss))
    assert(s.p_buffer_bytes == first.p_buffer_bytes and s.p_n_buffers == first.p_n_buffers, "the persistent pool grew")
    assert(s.buffer_bytes + s.cached_bytes <= first.buffer_bytes + first.cached_bytes, "the pass pool grew")
    rss[#rss + 1] = s.rss_bytes
  end
end
local dt = device.clock() - t0
local function mean(a, b)
  local sum = 0
  for i = a, b do sum = sum + rss[i] end
  return sum / (b - a + 1)
end
local growth = mean(#rss - 2, #rss) / mean(1, 3) - 1
print(string.format("%d steps in %.1f s (%.0f steps/s); pools flat; RSS %+.1f%% (last three samples over first three)",
  steps, dt, steps / dt, 100 * growth))
assert(growth < 0.05, "RSS grew by more than 5%")
