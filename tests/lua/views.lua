-- Views share storage with their base (PyTorch's rule), dims are 1-based,
-- dim 0 is an error, and clone is a differentiable copy.

local function same(t, want, msg)
  local got = t:totable()
  local function walk(a, b, path)
    if type(b) == "table" then
      assert(type(a) == "table" and #a == #b, msg .. ": shape at " .. path)
      for i = 1, #b do walk(a[i], b[i], path .. "[" .. i .. "]") end
    else
      assert(a == b, msg .. ": " .. path .. " is " .. tostring(a) .. ", want " .. tostring(b))
    end
  end
  walk(got, want, "t")
end

for _, where in ipairs{"host", "pass", "persistent"} do
  local function make(v)
    local t = tensor(v)
    if where == "host" then return t end
    return to_gpu(t, where)
  end
  -- the issue's two examples
  local x = make{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
  x:narrow(1, 2, 1):fill_(7)
  same(x, {{1, 2, 3}, {7, 7, 7}, {7, 8, 9}}, where .. " narrow:fill_")
  x:view(9):add_(1)
  same(x, {{2, 3, 4}, {8, 8, 8}, {8, 9, 10}}, where .. " view:add_")
  -- a transpose is a view too; it sees later changes of its base
  local t = x:t()
  x:fill_(0)
  same(t, {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, where .. " t after fill_")
  t:narrow(2, 1, 1):copy_(tensor{{1}, {2}, {3}})
  same(x, {{1, 2, 3}, {0, 0, 0}, {0, 0, 0}}, where .. " through a transpose")
  local p = make{{{1, 2}, {3, 4}}}:permute(3, 1, 2)
  same(p, {{{1, 3}}, {{2, 4}}}, where .. " permute")
end

-- A parameter changes through a view under no_grad, and not inside the tape.
local w = to_gpu(tensor.param(tensor{{1, 2}, {3, 4}}), "persistent")
with_grad_tape(function()
  local ok, err = pcall(function() w:narrow(1, 1, 1):zero_() end)
  assert(not ok and err:find("in%-place change"), err)
  no_grad(function() w:narrow(1, 1, 1):zero_() end)
end)
same(w, {{0, 0}, {3, 4}}, "parameter through a view")

-- view refuses a strided tensor; reshape copies it.
local m = tensor{{1, 2}, {3, 4}}
local ok, err = pcall(function() return m:t():view(4) end)
assert(not ok and err:find("view") and err:find("reshape"), err)
same(m:t():reshape(4), {1, 3, 2, 4}, "reshape of a transpose")

-- Dim 0 is an error everywhere; negative dims count from the end.
for _, call in ipairs{
  function() return m:sum(0) end, function() return m:transpose(0, 1) end,
  function() return m:softmax(0) end, function() return m:max(0) end,
  function() return m:narrow(0, 1, 1) end, function() return m:argmax(0) end,
  function() return m:mean(0) end, function() return tensor.cat({m, m}, 0) end,
} do
  local ok, err = pcall(call)
  assert(not ok and err:find("dim 0"), tostring(err))
end
same(m:sum(-1), {3, 7}, "dim -1 is the last")
ok, err = pcall(function() return m:sum(3) end)
assert(not ok and err:find("dim 3 out of range"), err)
ok, err = pcall(function() return m:narrow(2, 2, 2) end)
assert(not ok and err:find("start 2 and length 2") and err:find("dim 2"), err)

-- clone is a differentiable copy: d/dp sum(clone(p) * p) = 2p.
local q = tensor.param(tensor{1, 2, 3})
local grads = backward(with_grad_tape(function() return (q:clone() * q):sum() end))
same(grads[q], {2, 4, 6}, "clone gradient")

-- max/min/argmax along a dim that is not one of the last two (issue #1),
-- the first of ties, NaN wins.
local c = tensor{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}
local v, i = c:max(1)
same(v, {{5, 6}, {7, 8}}, "max(1) values")
same(i, {{2, 2}, {2, 2}}, "max(1) indices")
same(tensor{3, 1, 3}:argmax(), {1}, "argmax picks the first tie")
local mn, mi = tensor{{2, 0, 0}}:min(2)
same(mi, {2}, "min picks the first tie")
local nanmax = tensor{1, 0/0, 3}:max()
assert(nanmax:item() ~= nanmax:item(), "max propagates NaN")

-- An in-place change after the forward is caught at backward.
local r = tensor.param(tensor{1, 2})
local l = with_grad_tape(function() return (r * r):sum() end)
r:add_(10)
ok, err = pcall(backward, l)
assert(not ok and err:find("changed in place"), err)

-- Positions and sizes are integers: fractions, NaN and huge values are
-- errors, never truncated or wrapped (issue [11] #2).
local four = tensor.ones(4)
for _, args in ipairs{{1, 1.5, 2}, {1, 0/0, 3}, {1, 2^63 - 1024, 1025}, {1, 1, 2^53 + 2}, {1, -2^63, 4}, {1, 1, 0/0}} do
  local ok, err = pcall(four.narrow, four, args[1], args[2], args[3])
  assert(not ok and err:find("narrow"), tostring(err))
end
local ok2, err2 = pcall(four.size, four, 1.5)
assert(not ok2 and err2:find("integer"), err2)
ok2, err2 = pcall(four.dropout, four, 0/0)
assert(not ok2 and err2:find("dropout"), err2)
ok2, err2 = pcall(four.layer_norm, four, nil, nil, 0/0)
assert(not ok2 and err2:find("eps"), err2)

-- A read queued between two in-place updates of one tensor sees the first
-- (PyTorch: 4 6), whatever the second writes and wherever the tensor lives;
-- a reshape's copy likewise (PyTorch: 6).
for _, scope in ipairs({"persistent", "pass"}) do
  for _, second in ipairs({
    function(v) v:copy_(tensor{0, 0}) end,
    function(v) v:fill_(0) end,
    function(v) v:add_(100) end,
  }) do
    local v = to_gpu(tensor{1, 2}, scope)
    v:add_(1)
    local r = v * 2
    second(v)
    local got = r:totable()
    assert(got[1] == 4 and got[2] == 6, scope .. ": a queued read saw a later write: " .. got[1] .. " " .. got[2])
  end
end
local xs = to_gpu(tensor.ones(6, 2), "persistent")
xs:fill_(-6)
local ys = xs:t():reshape(4, 1, 3) -- a copy: xs:t() steps within its rows
xs:mul_(-1)
assert(ys:totable()[1][1][1] == -6, "a queued reshape saw a later write: " .. ys:totable()[1][1][1])
assert(xs:totable()[1][1] == 6)

-- reshape is a view wherever PyTorch's is, also of a transpose (it writes
-- through to x); view refuses where reshape would copy.
local xt = tensor{{1, 2, 3}, {4, 5, 6}}
xt:t():reshape(3, 2):fill_(0)
assert(xt:sum():item() == 0, "reshape of a transpose did not write through")
local xv = tensor{{1, 2, 3}, {4, 5, 6}}
local okv, errv = pcall(function() return xv:t():reshape(3, 2):view(6) end)
assert(not okv and errv:find("view"), tostring(errv))
