-- scripts/bench/cnn.lua - training throughput of pytorch/examples' MNIST
-- network through the public Lua API: conv 1->32 3x3, ReLU, conv 32->64
-- 3x3, ReLU, max-pool 2, dropout 0.25, flatten, Linear 9216->128, ReLU,
-- dropout 0.5, Linear 128->10, log_softmax and nll_loss, Adadelta (lr 1),
-- on a synthetic batch of 28x28 pictures with a fixed seed, timed after
-- warm-up. scripts/bench/torch_cnn.py is the PyTorch peer.
--
--   gglua --threads N scripts/bench/cnn.lua [batch] [seconds]
--
-- Prints: batch, steps/s, nodes/step, peak RSS.

local batch = tonumber(arg and arg[1]) or 64
local seconds = tonumber(arg and arg[2]) or 3

tensor.manual_seed(0)
local model = nn.Sequential{
  nn.Conv2d(1, 32, 3, 1), nn.ReLU(),
  nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
  nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
  nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
  nn.Linear(128, 10), nn.LogSoftmax(2),
}
local opt = optim.adadelta(model:parameters(), {lr = 1})
local x = tensor.randn(batch, 1, 28, 28)
local target = {}
for i = 1, batch do target[i] = (i % 10) + 1 end

local function step()
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.nll_loss(model(x), target) end)
  backward(loss)
  opt:step()
  return loss:item()
end

for _ = 1, 3 do step() end -- warm-up: allocations, first graphs
local s0, t0, n = residency.stats(), device.clock(), 0
repeat
  step()
  n = n + 1
until device.clock() - t0 >= seconds
local dt, s1 = device.clock() - t0, residency.stats()
print(string.format("%d %.2f steps/s  %.0f nodes/step  peak RSS %.0f MiB",
  batch, n / dt, (s1.nodes_computed - s0.nodes_computed) / n, (s1.peak_rss_bytes or 0) / 2^20))
