-- Tensor ops from Lua: 1-based dims and indices, values and errors.

local x = tensor{{1, 5, 3}, {4, 2, 6}}
local v, i = x:max(2)
assert(v:totable()[1] == 5 and v:totable()[2] == 6)
assert(i:totable()[1] == 2 and i:totable()[2] == 3, "argmax positions are 1-based")
local mn, mi = x:min(1)
assert(mn:totable()[2] == 2 and mi:totable()[2] == 2)
assert(x:max():item() == 6 and x:min():item() == 1)
assert(x:argmax(2):totable()[1] == 2)
assert(x:argmax():item() == 6, "flat 1-based position")

local n = x:narrow(2, 2, 2):totable()
assert(n[1][1] == 5 and n[2][2] == 6, "narrow(dim, start, length), 1-based start")
local c = tensor.cat({tensor{1, 2}, tensor{3}}, 1):totable()
assert(#c == 3 and c[3] == 3)
local rows = x:index_select(1, {2, 2, 1}):totable()
assert(rows[1][3] == 6 and rows[3][1] == 1)

assert(tensor.arange(5):numel() == 5 and tensor.arange(1, 2, 0.25):totable()[4] == 1.75)
assert(tensor.eye(3):totable()[2][2] == 1 and tensor.eye(3):totable()[2][3] == 0)
assert(tensor.full({2, 2}, 7):sum():item() == 28)
local h = tensor.ones(2, 2, {dtype = "f16", requires_grad = true})
assert(h:dtype() == "f16" and h:requires_grad())
assert(math.abs(tensor{1.0001}:item() - 1.0001) < 1e-6)
assert(tensor({0.1}, {dtype = "bf16"}):item() ~= 0.1, "bf16 rounds")

local g = tensor{0, 1}:gelu():totable()
assert(g[1] == 0 and math.abs(g[2] - 0.8412) < 1e-3)
local s = tensor{{1, 2}, {3, 4}}:log_softmax(2):exp():sum(2):totable()
assert(math.abs(s[1] - 1) < 1e-5)

-- In-place ops, refused where the tape needs the tensor.
local a = tensor{1, 2, 3}
a:add_(1):mul_(2)
assert(a:totable()[3] == 8)
a:zero_()
assert(a:sum():item() == 0)
a:fill_(2):copy_(tensor{9, 8, 7})
assert(a:totable()[1] == 9)
local p = tensor.param(tensor{1, 2})
local ok, err = pcall(function()
  with_grad_tape(function() p:add_(1) end)
end)
assert(not ok and err:find("add_") and err:find("with_grad_tape"), err)
ok, err = pcall(function()
  with_grad_tape(function()
    local q = p * 2
    q:zero_()
  end)
end)
assert(not ok and err:find("the tape needs"), err)

-- Dims out of range are errors that say so.
ok, err = pcall(x.sum, x, 3)
assert(not ok and err:find("dim"), err)
ok, err = pcall(x.narrow, x, 2, 3, 2)
assert(not ok and err:find("narrow"), err)
ok, err = pcall(x.reshape, x, 4, 2)
assert(not ok and err:find("reshape"), err)
