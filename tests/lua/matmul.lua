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
