-- Run by tests/dist_test.go, once alone and once under mpirun -np 2: a small
-- MLP trained by SGD (momentum) then Adam, with gradient clipping, on a
-- sharded loader. Alone it sees the global batch of 8 rows; each of two
-- ranks sees 4 (batch = 8 / world size). Every rank prints its final
-- weights ("W ..."), the graph computes per steady step ("C n"), the
-- gradient norms clipping saw ("N ...", kept as tensors and read at the
-- end, after the steps' pass resets) and the losses; the test compares
-- them.
local job = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "job.lua")
local model, loader = job.start()
local norms = {}

local function train(opt, epochs)
  for _ = 1, epochs do
    for xb, yb in loader do
      opt:zero_grad()
      local loss = with_grad_tape(function() return nn.mse_loss(model(xb), yb) end)
      backward(loss)
      -- clipping after backward sees the averaged gradients (as DDP)
      norms[#norms + 1] = optim.clip_grad_norm(model:parameters(), 0.5)
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

job.print_weights(model)
local out = {}
for i, n in ipairs(norms) do out[i] = string.format("%.7g", n:item()) end
print("N " .. table.concat(out, " "))
