-- Run by tests/dist_test.go under mpirun -np 2: a data-parallel backward
-- leaves its gradients' sums for the next compute. Rank 0 reads the weights
-- after the last step (to save them, say: its read runs the sums); rank 1
-- just ends. Its script's end must run the sums too, or rank 0 waits in its
-- all-reduce for ever.
dist.init()
tensor.manual_seed(1)
local model = dist.data_parallel(nn.Linear(3, 2))
local opt = optim.sgd(model:parameters(), {lr = 0.1})
local x = tensor{{1, 2, 3}, {0, -1, 2}} * (dist.rank() + 1)
for _ = 1, 2 do
  opt:zero_grad()
  local loss = with_grad_tape(function() return model(x):pow(2):mean() end)
  backward(loss)
  opt:step()
end
if dist.rank() == 0 then
  print(string.format("W %.6f", model.weight:sum():item()))
end
print("done")
