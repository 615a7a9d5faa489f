-- tests/dist/unfreeze.lua: a backbone frozen when the model is wrapped,
-- unfrozen at step 3 (fine-tuning). Its gradient is not averaged until the
-- model is wrapped again (wrapping another model does not do), so the
-- backward refuses (on every rank alike, before any collective); wrapped again, training goes on with the ranks'
-- weights equal, each rank on its own rows.
dist.init()
local r = dist.rank()
tensor.manual_seed(7)
local m = nn.Sequential{nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)}
local backbone = m:parameters()[1]
backbone:requires_grad(false)
dist.data_parallel(m)
local opt = optim.sgd(m:parameters(), {lr = 0.5})
tensor.manual_seed(100 + r)
local x, y = tensor.randn(4, 3), tensor.randn(4, 1)
for step = 1, 5 do
  if step == 3 then
    backbone:requires_grad(true)
    dist.data_parallel(nn.Linear(2, 2)) -- another model wrapped: the backbone is still not averaged
  end
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.mse_loss(m(x), y) end)
  local ok, err = pcall(backward, loss)
  if not ok then
    print("REFUSED" .. step .. " " .. tostring(err))
    dist.data_parallel(m)
    opt:zero_grad()
    backward(with_grad_tape(function() return nn.mse_loss(m(x), y) end))
  end
  opt:step()
end
print(string.format("BACKBONE %.6f", backbone:sum():item()))
print(string.format("HEAD %.6f", m:parameters()[3]:sum():item()))
