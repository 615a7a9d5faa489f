-- tests/dist/failed_backward.lua: rank 1's backward fails at step 2 (a
-- saved input changed in place) and the script catches it with pcall and
-- goes on. Its sums are then out of step with rank 0's: rank 1's later
-- backward, its dist calls (which would pair with rank 0's pending sums)
-- and its script's end must fail, so that the job ends with that error
-- instead of mixing two steps' gradients and then hanging.
dist.init()
local r = dist.rank()
tensor.manual_seed(7)
local x, y = tensor.randn(4, 3), tensor.randn(4, 2)
local W1 = tensor.param(to_gpu(tensor.randn(3, 4), "persistent"))
local W2 = tensor.param(to_gpu(tensor.randn(4, 2), "persistent"))
dist.data_parallel({W1, W2})
local opt = optim.sgd({W1, W2}, {lr = 0.1})
for step = 1, 3 do
  opt:zero_grad()
  local a
  local loss = with_grad_tape(function()
    a = to_gpu(x)
    return nn.mse_loss(a:matmul(W1):tanh():matmul(W2), y)
  end)
  if step == 2 and r == 1 then a:add_(1) end
  local ok, err = pcall(backward, loss)
  print("STEP" .. step .. " " .. tostring(ok) .. " " .. tostring(err))
  if ok then opt:step() end
end
local ok, err = pcall(dist.all_reduce, tensor{1, 2}, "sum")
print("ALLREDUCE " .. tostring(ok) .. " " .. tostring(err))
