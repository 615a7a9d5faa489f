-- scripts/regression.lua - linear regression by minibatch SGD:
-- y = 3 x1 - 2 x2 + 0.5 + noise, recovered from 512 samples.
--   gglua scripts/regression.lua
tensor.manual_seed(7)
local n = 512
local x = tensor.randn(n, 2)
local noise = tensor.randn(n, 1) * 0.05
local y = x:matmul(tensor{{3}, {-2}}) + 0.5 + noise

local model = nn.Linear(2, 1)
local opt = optim.sgd(model:parameters(), {lr = 0.05, momentum = 0.9})
for epoch = 1, 20 do
  local total, batches = 0, 0
  for xb, yb in data.loader(x, y, {batch = 64, shuffle = true}) do
    opt:zero_grad()
    local loss = with_grad_tape(function() return nn.mse_loss(model(xb), yb) end)
    backward(loss)
    opt:step()
    total, batches = total + loss:item(), batches + 1
  end
  if epoch % 5 == 0 then print(string.format("epoch %2d  mse %.5f", epoch, total / batches)) end
end
local w, b = model.weight:totable()[1], model.bias:item()
print(string.format("learnt y = %.3f x1 %+.3f x2 %+.3f   (true: 3 x1 - 2 x2 + 0.5)", w[1], w[2], b))
