-- Run by tests/dist_test.go, once alone and once under mpirun -np 2: a small
-- MLP trained by SGD (momentum) then Adam, with gradient clipping, on a
-- sharded loader. Alone it sees the global batch of 8 rows; each of two
-- ranks sees 4 (batch = 8 / world size). Every rank prints its final
-- weights ("W ..."), the graph computes per steady step ("C n") and the
-- losses; the test compares them.
dist.init()
local world, rank = dist.world_size(), dist.rank()

tensor.manual_seed(7)
local x = tensor.randn(16, 4)
local y = tensor.randn(16, 2)

-- A different initialisation on every rank: data_parallel must hand every
-- rank rank 0's weights (rank 0's are the ones a single process makes).
tensor.manual_seed(1 + rank)
local model = nn.Sequential{nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)}
model:to_gpu("persistent")
model = dist.data_parallel(model)

local loader = data.loader(x, y, {batch = 8 / world, shuffle = true, shard = true, seed = 3})
assert(#loader == 2, "batches per epoch: " .. #loader)

local function train(opt, epochs)
  for _ = 1, epochs do
    for xb, yb in loader do
      opt:zero_grad()
      local loss = with_grad_tape(function() return nn.mse_loss(model(xb), yb) end)
      backward(loss)
      -- clipping after backward sees the averaged gradients (as DDP)
      optim.clip_grad_norm(model:parameters(), 0.5)
      opt:step()
      print(string.format("L %.7f", loss:item()))
    end
  end
end

train(optim.sgd(model:parameters(), {lr = 0.1, momentum = 0.9}), 2)
-- Graph computes per steady step: the 4 Adam steps, from a synced start to
-- a synced end (the last step's update runs in the closing sync).
sync()
local before = residency.stats().graph_computes
train(optim.adam(model:parameters(), {lr = 0.01}), 2)
sync()
print(string.format("C %g", (residency.stats().graph_computes - before) / 4))

local out = {}
for _, p in ipairs(model:parameters()) do
  for _, v in ipairs(p:reshape(p:numel()):totable()) do out[#out + 1] = string.format("%.7g", v) end
end
print("W " .. table.concat(out, " "))
