-- Elementwise math, comparisons and masks from Lua (issue 12). Masks are
-- float tensors of 0 and 1; nonzero (NaN included) reads as true.

local function same(t, want, msg)
  assert(#t == #want, msg .. ": length " .. #t)
  for i = 1, #want do
    local a, b = t[i], want[i]
    local ok = (a ~= a and b ~= b) or a == b or math.abs(a - b) < 1e-5 * (1 + math.abs(b))
    assert(ok, msg .. ": element " .. i .. " is " .. tostring(a) .. ", want " .. tostring(b))
  end
end

local inf, nan = 1 / 0, 0 / 0

-- Unary math.
same(tensor{0, math.pi / 2}:sin():totable(), {0, 1}, "sin")
same(tensor{0, math.pi}:cos():totable(), {1, -1}, "cos")
same(tensor{0.5}:tan():totable(), {math.tan(0.5)}, "tan")
same(tensor{-1.5, 1.5}:floor():totable(), {-2, 1}, "floor")
same(tensor{-1.5, 1.5}:ceil():totable(), {-1, 2}, "ceil")
same(tensor{0.5, 1.5, 2.5, -2.5, -2.7, inf}:round():totable(), {0, 2, 2, -2, -3, inf}, "round halves to even")
same(tensor{-2.7, 2.7}:trunc():totable(), {-2, 2}, "trunc")
same(tensor{-3, 0, 2, nan}:sign():totable(), {-1, 0, 1, 0}, "sign (0 at NaN, as PyTorch 1.13)")
same(tensor{1e-8, -1}:log1p():totable(), {1e-8, -inf}, "log1p is exact for small x")
same(tensor{4, 0}:rsqrt():totable(), {0.5, inf}, "rsqrt")
same(tensor{4, -0.5}:reciprocal():totable(), {0.25, -2}, "reciprocal")
same(tensor{-3}:square():totable(), {9}, "square")

-- Gradients: floor/round/sign have none; sin's is cos.
local w = tensor.param(tensor{0.3, 1.7})
local loss = with_grad_tape(function() return w:sin():sum() + w:round():sum() + w:floor():sum() end)
backward(loss)
same(w.grad:totable(), {math.cos(0.3), math.cos(1.7)}, "d/dw (sin + round + floor)")

-- Comparisons: a tensor or a number, broadcasting, NaN unequal to all.
local a = tensor{1, 2, nan}
same(a:gt(1):totable(), {0, 1, 0}, "gt number")
same(a:ge(tensor{1, 3, nan}):totable(), {1, 0, 0}, "ge tensor")
same(a:eq(a):totable(), {1, 1, 0}, "eq: NaN is not itself")
same(a:ne(a):totable(), {0, 0, 1}, "ne: NaN is")
same(tensor.lt(a, 2):totable(), {1, 0, 0}, "tensor.lt")
same(tensor{{1}, {3}}:le(tensor{2, 3}):reshape(4):totable(), {1, 1, 0, 1}, "le broadcast")
assert(not tensor.param(tensor{1}):gt(0):requires_grad(), "a comparison never requires grad")

-- Masks.
local m = tensor{0, 1, nan, inf, -inf}
same(m:isnan():totable(), {0, 0, 1, 0, 0}, "isnan")
same(m:isinf():totable(), {0, 0, 0, 1, 1}, "isinf")
same(m:isfinite():totable(), {1, 1, 0, 0, 0}, "isfinite")
same(m:logical_not():totable(), {1, 0, 0, 0, 0}, "logical_not: NaN is true")
same(tensor{0, 0, 1, 1}:logical_and(tensor{0, 1, 0, 2}):totable(), {0, 0, 0, 1}, "logical_and")
same(tensor{0, 0, 1, 1}:logical_or(tensor{0, 1, 0, 2}):totable(), {0, 1, 1, 1}, "logical_or")
same(tensor{0, 0, 1, 1}:logical_xor(tensor{0, 1, 0, 2}):totable(), {0, 1, 1, 0}, "logical_xor")
local z = tensor{{0, 1}, {0, 0}}
assert(z:any():item() == 1 and z:all():item() == 0, "any/all")
assert(#z:any():shape() == 1 and z:any():shape()[1] == 1, "any() is shape [1]")
same(z:any(2):totable(), {1, 0}, "any along a 1-based dim")
same(z:all(1, true):reshape(2):totable(), {0, 0}, "all with keepdim")

-- where, masked_fill: the gradient goes to what was picked.
local p = tensor.param(tensor{1, 2, 3})
local q = tensor.param(tensor{10, 20, 30})
local cond = tensor{1, 0, 1}
local l2 = with_grad_tape(function() return tensor.where(cond, p, q * 2):sum() end)
assert(l2:item() == 1 + 40 + 3)
backward(l2)
same(p.grad:totable(), {1, 0, 1}, "where: gradient to a where cond")
same(q.grad:totable(), {0, 2, 0}, "where: gradient to b elsewhere")
same(tensor.where(cond, 0, tensor{5, 6, 7}):totable(), {0, 6, 0}, "where with a number")
same(tensor{1, 2, 3}:masked_fill(tensor{0, 1, 0}, -inf):totable(), {1, -inf, 3}, "masked_fill")
local x = tensor{1, 2, 3}
same(x:masked_fill(x:gt(1), 0):totable(), {1, 0, 0}, "masked_fill by a comparison")

-- tril/triu on the last two dims; zeroed infinities are 0.
local sq = tensor{{1, inf}, {3, 4}}
same(sq:tril():reshape(4):totable(), {1, 0, 3, 4}, "tril")
same(sq:triu(1):reshape(4):totable(), {0, inf, 0, 0}, "triu(1)")
same(sq:tril(-1):reshape(4):totable(), {0, 0, 3, 0}, "tril(-1)")

-- maximum/minimum: NaN propagates; a tie splits the gradient.
same(tensor.maximum(tensor{1, 5, nan}, tensor{2, 2, 0}):totable(), {2, 5, nan}, "maximum")
same(tensor{1, 5}:minimum(tensor{2, 2}):totable(), {1, 2}, "minimum")
local u = tensor.param(tensor{1, 2})
local v = tensor.param(tensor{1, 1})
backward(with_grad_tape(function() return tensor.maximum(u, v):sum() end))
same(u.grad:totable(), {0.5, 1}, "maximum: tie halves, larger whole")
same(v.grad:totable(), {0.5, 0}, "maximum: the smaller gets none")

-- Mistakes are errors that say what is wrong.
local ok, err = pcall(function() return tensor{1, 2}:tril() end)
assert(not ok and err:find("tril: expected a tensor of at least 2 dims"), err)
ok, err = pcall(function() return tensor{1, 2}:gt(tensor{1, 2, 3}) end)
assert(not ok and err:find("gt"), err)
ok, err = pcall(function() return tensor{{1}}:triu(0.5) end)
assert(not ok and err:find("expected an integer"), err)
ok, err = pcall(function() return tensor{1}:masked_fill(tensor{1}, "x") end)
assert(not ok and err:find("masked_fill: argument 3: expected a number"), err)
ok, err = pcall(function() return tensor.where(1, 2, 3) end)
assert(not ok and err:find("where: argument 1: expected a tensor"), err)
assert(math.abs(tensor{0.5}:erf():item() - 0.5204998778) < 1e-7 and tensor{1e-4}:erf():item() > 0)
