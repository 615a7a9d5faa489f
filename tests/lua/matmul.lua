-- matmul's 1-d rules and batches, bmm, dot and outer (values checked
-- against PyTorch in core's TestMatmulAsTorch; here the Lua surface).
local v, m = tensor{1, 2, 3}, tensor{{1, 0}, {0, 1}, {1, 1}}
assert(v:matmul(v):item() == 14, "vector @ vector is a dot product")
assert(v:dot(v):item() == 14)
local vm = v:matmul(m):totable()
assert(#vm == 2 and vm[1] == 4 and vm[2] == 5, "vector @ matrix drops the vector's dim")
local mv = m:t():matmul(v):totable()
assert(#mv == 2 and mv[1] == 4 and mv[2] == 5, "matrix @ vector")
local o = tensor{1, 2}:outer(tensor{3, 4, 5})
assert(table.concat(o:shape(), "x") == "2x3" and o:totable()[2][3] == 10)
local a, b = tensor.ones(2, 3, 2, 4), tensor.ones(3, 4, 5)
assert(table.concat(a:matmul(b):shape(), "x") == "2x3x2x5", "batch dims broadcast")
assert(a:matmul(b):totable()[1][1][1][1] == 4)
assert(table.concat(tensor.ones(2, 2, 3):bmm(tensor.ones(2, 3, 4)):shape(), "x") == "2x2x4")
local ok, err = pcall(function() return tensor.ones(2, 3):bmm(tensor.ones(3, 2)) end)
assert(not ok and err:find("bmm"), err)
ok, err = pcall(function() return tensor.ones(2, 2, 3):matmul(tensor.ones(3, 3, 2)) end)
assert(not ok and err:find("matmul"), err)

-- tensor.einsum as torch.einsum (core's tests check 16 equations against
-- torch 1.13): a product, attention's scores, implicit output, a list of
-- operands, a gradient, a refusal.
do
  local a, b = tensor{{1, 2}, {3, 4}}, tensor{{5, 6}, {7, 8}}
  local function same(x, y) return (x - y):abs():max():item() < 1e-6 end
  assert(same(tensor.einsum("ij,jk->ik", a, b), a:matmul(b)))
  assert(same(tensor.einsum("ij,jk", {a, b}), a:matmul(b)), "implicit output, operands as a list")
  assert(same(tensor.einsum("ij->ji", a), a:t()))
  assert(tensor.einsum("ij,ij->", a, b):item() == 70)
  local q, k = tensor.randn(2, 3, 4, 8), tensor.randn(2, 3, 5, 8)
  assert(same(tensor.einsum("bhqd,bhkd->bhqk", q, k), q:matmul(k:transpose(3, 4))))
  local p = tensor.param(tensor{1, 2, 3})
  backward(with_grad_tape(function() return tensor.einsum("i,j->ij", p, tensor{1, 10}):sum() end))
  assert(same(p.grad, tensor{11, 11, 11}))
  local ok, err = pcall(tensor.einsum, "ii->i", a)
  assert(not ok and tostring(err):find("a diagonal"), tostring(err))
end
