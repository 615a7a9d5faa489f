-- tests/dist/unused_params.lua: parameters some steps leave out of the
-- loss, trained with Adam under dist.data_parallel. q is in the loss at step
-- 1 only, on every rank: afterwards no rank gives it a gradient, so it has
-- none and Adam leaves it, as in one process. r is in rank 0's loss only:
-- every rank gets the average (rank 0's gradient over the world size).
dist.init()
local p = tensor.param(to_gpu(tensor{1, -2}, "persistent"))
local q = tensor.param(to_gpu(tensor{0.5, 4}, "persistent"))
local r = tensor.param(to_gpu(tensor{3, 1}, "persistent"))
dist.data_parallel({p, q, r})
local opt = optim.adam({p, q, r}, {lr = 0.1})
local function show(t) return t and table.concat(t:totable(), " ") or "nil" end
for step = 1, 3 do
  opt:zero_grad()
  backward(with_grad_tape(function()
    local l = (p * p):sum()
    if step == 1 then l = l + (q * q):sum() end
    if dist.rank() == 0 then l = l + (r * r):sum() end
    return l
  end))
  print("QGRAD" .. step .. " " .. show(q.grad))
  print("RGRAD" .. step .. " " .. show(r.grad))
  opt:step()
end
print("P " .. show(p))
print("Q " .. show(q))
print("R " .. show(r))
