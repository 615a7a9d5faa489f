-- scripts/xor.lua - the smallest problem a linear model cannot solve.
--   gglua scripts/xor.lua
tensor.manual_seed(1)
local x = tensor{{0, 0}, {0, 1}, {1, 0}, {1, 1}}
local y = tensor{{0}, {1}, {1}, {0}}
local model = nn.Sequential{nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1), nn.Sigmoid()}
local opt = optim.sgd(model:parameters(), {lr = 0.5, momentum = 0.9})
local loss
for _ = 1, 500 do
  opt:zero_grad()
  loss = with_grad_tape(function() return nn.bce_loss(model(x), y) end)
  backward(loss)
  opt:step()
end
local p = model(x):totable()
local right = 0
for i, row in ipairs(p) do
  local want = y:totable()[i][1]
  print(string.format("xor(%d, %d) = %.3f", x:totable()[i][1], x:totable()[i][2], row[1]))
  if (row[1] > 0.5 and 1 or 0) == want then right = right + 1 end
end
print(string.format("loss %.4f, %d of 4 right", loss:item(), right))
