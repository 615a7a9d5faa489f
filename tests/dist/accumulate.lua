-- Run by tests/dist_test.go, once alone and once under mpirun -np 2:
-- gradient accumulation with dist.no_sync. Every step takes the global
-- batch of 8 rows (alone) or a rank's 4 (two ranks) in two micro-batches,
-- the first's backward inside dist.no_sync (no sum), the second's outside
-- (one sum of what both accumulated); the loss is halved per micro-batch,
-- so every step's gradient is the mean over the 8 rows either way. Every
-- rank prints its final weights ("W ...").
local job = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "job.lua")
local model, loader = job.start()
local opt = optim.sgd(model:parameters(), {lr = 0.1, momentum = 0.9})

local function micro(xb, yb)
  local loss = with_grad_tape(function() return nn.mse_loss(model(xb), yb) * 0.5 end)
  backward(loss)
end
for _ = 1, 3 do
  for xb, yb in loader do
    local half = xb:size(1) / 2
    opt:zero_grad()
    dist.no_sync(function() micro(xb:narrow(1, 1, half), yb:narrow(1, 1, half)) end)
    micro(xb:narrow(1, half + 1, half), yb:narrow(1, half + 1, half))
    opt:step()
  end
end

job.print_weights(model)
