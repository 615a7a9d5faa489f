-- Autograd as a script sees it: operators, the tape, backward, optimizers.

local x = tensor{{1, 2}, {3, 4}}
local y = (x + 1) * 2 - x / 2
assert(y:totable()[2][2] == (4 + 1) * 2 - 2, "operators with numbers on either side")
assert((1 - x):totable()[1][2] == -1)
assert((2 / x):totable()[2][2] == 0.5)
assert((x ^ 2):totable()[2][1] == 9)
assert((-x):totable()[1][1] == -1)
assert((x + tensor{10, 20}):totable()[2][2] == 24, "broadcasting")
assert(x:matmul(tensor{{1}, {1}}):totable()[2][1] == 7)
assert(x:t():totable()[1][2] == 3)
assert(x:sum():item() == 10 and x:mean():item() == 2.5)
assert(x:sum(1):totable()[2] == 6, "sum along a 1-based dim")
local sm = tensor{{0, 0}}:softmax():totable()
assert(math.abs(sm[1][1] - 0.5) < 1e-6)

-- The tape: gradients of a leaf parameter.
local w = tensor.param(tensor{1, -2, 3})
local loss = with_grad_tape(function() return (w * w):sum() end)
local grads = backward(loss)
local g = w.grad:totable()
assert(g[1] == 2 and g[2] == -4 and g[3] == 6, "d/dw sum(w^2) = 2w")
assert(grads[w] ~= nil, "backward returns param -> grad")
assert(loss:item() == 14)

-- Outside a tape nothing is recorded: backward explains itself.
local ok, err = pcall(backward, (w * w):sum())
assert(not ok and err:find("with_grad_tape"), err)
ok, err = pcall(function()
  with_grad_tape(function() backward(w * 2) end)
end)
assert(not ok and err:find("one element"), err)

-- Shape errors name the op and the shapes, at the script's line.
ok, err = pcall(function() return tensor{1, 2, 3} + tensor{1, 2} end)
assert(not ok and err:find("add") and err:find("3 and 2"), err)
ok, err = pcall(function() return tensor{{1, 2}}:matmul(tensor{{1, 2}}) end)
assert(not ok and err:find("matmul"), err)
ok, err = pcall(nn.cross_entropy, tensor{{1, 2}}, {3})
assert(not ok and err:find("out of range"), err)

-- An optimizer keeps its parameters resident and trains them.
local p = tensor.param(tensor{5, -5})
local opt = optim.sgd({p}, {lr = 0.25})
assert(p:scope() == "persistent")
for _ = 1, 20 do
  opt:zero_grad()
  local l = with_grad_tape(function() return (p * p):sum() end)
  backward(l)
  opt:step()
end
assert(math.abs(p:totable()[1]) < 1e-3, "sgd minimised w^2")
ok, err = pcall(optim.adam, {p}, {learning_rate = 1})
assert(not ok and err:find("unknown option learning_rate"), err)

-- After an error the tape and the pools still work.
local q = tensor.param(tensor{1, 2})
local l2 = with_grad_tape(function() return (q * 3):sum() end)
backward(l2)
assert(q.grad:totable()[2] == 3)

-- detect_anomaly: a NaN gradient stops (or skips) the step.
local bad = tensor.param(tensor{4, -1})
local o2 = optim.sgd({bad}, {lr = 0.1})
detect_anomaly("stop")
backward(with_grad_tape(function() return bad:sqrt():sum() end))
local ok2, err2 = pcall(o2.step, o2)
assert(not ok2 and err2:find("anomaly"), err2)
assert(bad:totable()[1] == 4, "no update")
detect_anomaly("off")
ok2, err2 = pcall(detect_anomaly, "loud")
assert(not ok2, "bad modes are errors")

-- A host parameter's gradient accumulates over tapes, as PyTorch's does
-- (it lives in the pass pool, which each tape resets).
local hb = tensor.param(tensor{0.5, 4})
with_grad_tape(function() (hb * 2):sum():backward() end)
with_grad_tape(function() (hb * 3):sum():backward() end)
local hg = hb.grad:totable()
assert(hg[1] == 5 and hg[2] == 5, "2 + 3")
with_grad_tape(function() (hb * hb):sum():backward() end)
hg = hb.grad:totable()
assert(hg[1] == 6 and hg[2] == 13, "+ 2b")
