-- Indexing and shape ops, with PyTorch's semantics and 1-based indices.
local function same(t, want, msg)
  local got = t:totable()
  local function eq(a, b)
    if type(a) ~= type(b) then return false end
    if type(a) ~= "table" then return a == b end
    if #a ~= #b then return false end
    for i = 1, #a do if not eq(a[i], b[i]) then return false end end
    return true
  end
  assert(eq(got, want), msg)
end

local x = tensor{{1, 2, 3}, {4, 5, 6}}

-- x[i] selects along dim 1, chains, and is a view: writes reach x.
same(x[2], {4, 5, 6}, "x[2]")
assert(x[2][3]:item() == 6)
assert(x[-1][-1]:item() == 6, "negative indices count from the end")
same(x:select(2, 1), {1, 4}, "select a column")
local row = x[1]
row:fill_(0)
same(x, {{0, 0, 0}, {4, 5, 6}}, "a selected row is a view")
x[1] = tensor{1, 2, 3}
same(x, {{1, 2, 3}, {4, 5, 6}}, "x[i] = tensor")
x[2] = 7
same(x, {{1, 2, 3}, {7, 7, 7}}, "x[i] = number")
x[2] = tensor{4, 5, 6}

-- Torch7's range tables: {} all, {a, b} a..b, a number selects.
same(x[{ {}, {2, 3} }], {{2, 3}, {5, 6}}, "columns 2..3")
same(x[{ 2, {1, 2} }], {4, 5}, "row 2, columns 1..2")
same(x[{ {}, {-1} }], {{3}, {6}}, "the last column, kept")
local y = x:clone()
y[{ {}, 2 }] = 0
same(y, {{1, 0, 3}, {4, 0, 6}}, "assign a column")

-- Out of range and bad keys are errors naming the index.
for _, bad in ipairs({
  function() return x[3] end, function() return x[0] end, function() return x[{ {}, {3, 2} }] end,
  function() return x[{ 1, 1, 1 }] end, function() return x[true] end, function() x[5] = 1 end,
}) do
  local ok, err = pcall(bad)
  assert(not ok and err:find("index"), err)
end
local ok, err = pcall(function() return x:no_such_method() end)
assert(not ok and err:find("no method or field named 'no_such_method'"), err)

-- Shape ops.
assert(table.concat(x:unsqueeze(1):shape(), "x") == "1x2x3")
assert(table.concat(x:unsqueeze(-1):shape(), "x") == "2x3x1")
assert(table.concat(tensor.zeros(2, 1, 3):squeeze():shape(), "x") == "2x3")
assert(table.concat(tensor.zeros(2, 1, 3):squeeze(2):shape(), "x") == "2x3")
assert(table.concat(tensor.zeros(2, 3, 4):flatten():shape(), "x") == "24")
assert(table.concat(tensor.zeros(2, 3, 4):flatten(2):shape(), "x") == "2x12")
assert(table.concat(tensor.zeros(6):unflatten(1, {2, 3}):shape(), "x") == "2x3")
same(tensor{{1}, {2}}:expand(2, 3), {{1, 1, 1}, {2, 2, 2}}, "expand")
same(x:flip(2), {{3, 2, 1}, {6, 5, 4}}, "flip")
same(x:flip({1, 2}), {{6, 5, 4}, {3, 2, 1}}, "flip both")
same(tensor.stack({tensor{1, 2}, tensor{3, 4}}), {{1, 2}, {3, 4}}, "stack")
same(tensor.stack({tensor{1, 2}, tensor{3, 4}}, 2), {{1, 3}, {2, 4}}, "stack on dim 2")
local parts = tensor{1, 2, 3, 4, 5}:chunk(2)
assert(#parts == 2)
same(parts[2], {4, 5}, "chunk")
parts = x:split({1, 2}, 2)
same(parts[2], {{2, 3}, {5, 6}}, "split by sizes")
parts = tensor{1, 2, 3, 4, 5}:split(2)
assert(#parts == 3)
same(parts[3], {5}, "split by size")
same(tensor{1, 2}:tile(2), {1, 2, 1, 2}, "tile")
same(x:index_select(2, {3, 1}), {{3, 1}, {6, 4}}, "index_select on dim 2")

-- Gradients flow through indexing.
local w = tensor.param(tensor{{1, 2}, {3, 4}})
local g = with_grad_tape(function()
  local loss = (w[2] * tensor{10, 20}):sum() + w[{ {}, 1 }]:sum()
  loss:backward()
end)
same(w.grad, {{1, 0}, {11, 20}}, "gradient of x[i] and a range")

-- size(): the shape (printing as one), size(d) with negative dims, as PyTorch.
local z = tensor.zeros(2, 3, 4)
assert(tostring(z:size()) == "[2, 3, 4]" and z:size()[3] == 4)
assert(z:size(-1) == 4 and z:size(1) == 2 and z:size(-3) == 2)
for _, d in ipairs({0, 4, -4}) do
  local ok, err = pcall(function() return z:size(d) end)
  assert(not ok and err:find("size"), tostring(err))
end

-- expand_as, view_as, new_zeros/new_ones/new_full and #x, as PyTorch's:
-- the shape (or dtype) comes from a tensor; an expanded tensor's gradient
-- sums over the copies; #x is the size of dim 1.
do
  local x = tensor{{1, 2, 3}}
  local e = x:expand_as(tensor.zeros(4, 3))
  assert(e:size(1) == 4 and e:size(2) == 3 and e[4][3]:item() == 3)
  assert(x:view_as(tensor.zeros(3, 1)):size(1) == 3 and #tensor.zeros(5, 2) == 5 and #x == 1)
  local i = tensor{1, 2}:int()
  assert(i:new_zeros(2, 3):dtype() == "i32" and x:new_ones({2}):totable()[2] == 1)
  assert(x:new_full({2, 2}, 7):sum():item() == 28 and x:new_zeros(3, {dtype = "bf16"}):dtype() == "bf16")
  local p = tensor.param(tensor{1, 2, 3})
  local l = with_grad_tape(function() return (p:expand_as(tensor.zeros(4, 3)) * 2):sum() end)
  backward(l)
  assert(table.concat(p.grad:totable(), ",") == "8,8,8")
  for _, c in ipairs{
    {function() return #tensor.scalar_tensor(1) end, "#: a 0%-d tensor has no length"},
    {function() return x:new_full({2}) end, "x:new_full: expected a size and a fill value"},
    {function() return x:expand_as(tensor.zeros(2, 2)) end, "cannot expand"},
    {function() return x:view_as(tensor.zeros(2, 2)) end, "view"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]), tostring(err))
  end
end

-- roll as torch.roll (values from torch 1.13 on this x), flattened without
-- dims; its gradient rolls back.
do
  local x = tensor{{1, 2}, {3, 4}, {5, 6}, {7, 8}}
  local function s(t)
    local r = {}
    for _, row in ipairs(t:totable()) do r[#r + 1] = table.concat(row, ",") end
    return table.concat(r, ";")
  end
  assert(s(x:roll(1)) == "8,1;2,3;4,5;6,7", s(x:roll(1)))
  assert(s(x:roll(1, 1)) == "7,8;1,2;3,4;5,6" and s(x:roll(-1, 1)) == "3,4;5,6;7,8;1,2")
  assert(s(x:roll({2, 1}, {1, 2})) == "6,5;8,7;2,1;4,3" and s(x:roll(7, 2)) == "2,1;4,3;6,5;8,7")
  assert(s(x:roll(0, 1)) == s(x) and s(x:roll(4, -2)) == s(x))
  local p = tensor.param(x:clone())
  local w = tensor.arange(8):reshape(4, 2)
  backward(with_grad_tape(function() return (p:roll(1, 1) * w):sum() end))
  assert(s(p.grad) == s(w:roll(-1, 1)), s(p.grad))
  for _, c in ipairs{
    {function() return x:roll({1, 2}) end, "roll: 2 shifts without dims"},
    {function() return x:roll({1, 2}, 1) end, "roll: 2 shifts for 1 dims"},
    {function() return x:roll(1, 3) end, "roll"},
    {function() return x:roll(1, 0) end, "dim 0 does not exist"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]), tostring(err))
  end
end

-- clamp_ and masked_fill_ write their results into x and return x; a
-- parameter inside a tape is refused, as every in-place op.
do
  local x = tensor{1, -2, 3, -4}
  assert(rawequal(x:clamp_(-1, 2), x) and table.concat(x:totable(), ",") == "1,-1,2,-1")
  assert(rawequal(x:masked_fill_(x:lt(0), 9), x) and table.concat(x:totable(), ",") == "1,9,2,9")
  local p = tensor.param(tensor{1, 2})
  local ok, err = pcall(function() return with_grad_tape(function() return p:clamp_(0, 1):sum() end) end)
  assert(not ok and tostring(err):find("clamp_: copy_: in%-place change of a parameter inside with_grad_tape"), tostring(err))
end

-- Reductions over several dims, as PyTorch's (torch 1.13 on arange(24) as
-- 2x3x4: mean((1, 2))[0] = 5.5, sum((0, 2), keepdim) of shape 1x3x1,
-- sum((-1, 0))[1] = 92, sum(dim=[]) = 276); the gradient of a mean over 12
-- elements is 1/12 each; a dim listed twice is refused.
do
  local x = tensor.arange(24):reshape(2, 3, 4)
  assert(x:mean({2, 3}):totable()[1] == 5.5)
  local k = x:sum({1, 3}, true)
  assert(k:dim() == 3 and k:size(1) == 1 and k:size(2) == 3 and k:size(3) == 1)
  assert(x:sum({-1, 1}):totable()[2] == 92 and x:sum({}):item() == 276)
  assert(x:gt(-1):all({1, 2}):totable()[4] == 1 and x:gt(22):any({1, 2}):totable()[4] == 1)
  local p = tensor.param(x:clone())
  backward(with_grad_tape(function() return p:mean({2, 3}):sum() end))
  assert(math.abs(p.grad:totable()[2][3][4] - 1 / 12) < 1e-7)
  local ok, err = pcall(function() return x:sum({2, 2}) end)
  assert(not ok and tostring(err):find("sum: dim 2 appears more than once"), tostring(err))
  ok, err = pcall(function() return x:mean({4}) end)
  assert(not ok and tostring(err):find("mean: dim 4 is out of range for a 3%-d tensor"), tostring(err))
end

-- x[mask] = v, PyTorch's boolean-mask assignment, with a number, a
-- one-element tensor or a tensor of values in the mask's order (torch 1.13:
-- a[a > 2.5] = [10, 20, 30, 40] on [[1, 2, 3], [4, 5, 6]]); an i32 index
-- tensor is refused rather than read another way.
do
  local x = tensor{{1, -2}, {-3, 4}}
  x[x:lt(0)] = 0
  assert(table.concat(x:reshape(4):totable(), ",") == "1,0,0,4")
  x[x:gt(2)] = tensor{7}
  assert(table.concat(x:reshape(4):totable(), ",") == "1,0,0,7")
  local a = tensor{{1, 2, 3}, {4, 5, 6}}
  a[a:gt(2.5)] = tensor{10, 20, 30, 40}
  assert(table.concat(a:reshape(6):totable(), ",") == "1,2,10,20,30,40")
  -- Under a tape an in-place write carries no gradient: refused, where
  -- masked_scatter (out of place) gives the values theirs.
  local v = tensor.param(tensor{10, 20})
  local ok, err = pcall(with_grad_tape, function()
    local y = tensor{{1, 2}, {3, 4}}
    y[tensor{{0, 1}, {1, 0}}] = v
  end)
  assert(not ok and tostring(err):find("does not carry gradients"), tostring(err))
  backward(with_grad_tape(function()
    local y = tensor{{1, 2}, {3, 4}}:masked_scatter(tensor{{0, 1}, {1, 0}}, v)
    return (y * tensor{{1, 2}, {3, 4}}):sum()
  end))
  assert(table.concat(v.grad:totable(), ",") == "2,3", "the values' gradient, in the mask's order")
  for _, c in ipairs{
    {function() x[x:gt(0)] = tensor{1, 2, 3} end, "the mask selects 2 elements, the values %(shape 3%) are 3"},
    {function() x[tensor{1}:int()] = 5 end, "with an i32 tensor t of indices is not supported"},
    {function() x.foo = 1 end, "only x%[i%] = v, x%[{...}%] = v and x%[mask%] = v"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]), tostring(err))
  end
end

-- repeat_interleave as PyTorch's with a number of repeats (torch 1.13 on
-- [[1, 2], [3, 4]]); the gradient sums each element's copies.
do
  local x = tensor{{1, 2}, {3, 4}}
  local function s(t)
    local r = {}
    for i, row in ipairs(t:totable()) do r[i] = type(row) == "table" and table.concat(row, ",") or row end
    return table.concat(r, ";")
  end
  assert(s(x:repeat_interleave(2)) == "1;1;2;2;3;3;4;4")
  assert(s(x:repeat_interleave(3, 2)) == "1,1,1,2,2,2;3,3,3,4,4,4" and s(x:repeat_interleave(2, 1)) == "1,2;1,2;3,4;3,4")
  local p = tensor.param(x:clone())
  backward(with_grad_tape(function() return (p:repeat_interleave(3, 2) * tensor.arange(12):reshape(2, 6)):sum() end))
  assert(s(p.grad) == "3,12;21,30", s(p.grad))
  -- A tensor of counts (torch 1.13's values): one for each slice, or one for all.
  assert(s(x:repeat_interleave(tensor{0, 3}, 2)) == "2,2,2;4,4,4")
  assert(s(x:repeat_interleave(tensor{2, 1, 0, 1})) == "1;1;2;4")
  assert(s(x:repeat_interleave(tensor{2}, 1)) == "1,2;1,2;3,4;3,4")
  local q = tensor.param(x:clone())
  backward(with_grad_tape(function() return (q:repeat_interleave(tensor{0, 3}:int(), 2) * tensor.arange(6):reshape(2, 3)):sum() end))
  assert(s(q.grad) == "0,3;0,12", s(q.grad))
  assert(table.concat(x:repeat_interleave(tensor{0, 0}, 1):size(), "x") == "0x2") -- every count 0: empty, as PyTorch's
  for _, c in ipairs{
    {function() return x:repeat_interleave(tensor{1, 2}) end, "expected a 1%-d tensor of 4 counts"},
    {function() return x:repeat_interleave(tensor{1, -1}, 1) end, "repeats%[2%] is %-1"},
    {function() return x:repeat_interleave("2") end, "repeats must be a number or a 1%-d tensor"},
    {function() return x:repeat_interleave(2, 3) end, "repeat_interleave"},
    {function() return x:repeat_interleave(-1) end, "repeats must be from 0"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]), tostring(err))
  end
end

-- nn.pad as F.pad (torch 1.13's values and gradients on arange(12) as
-- 1x3x4, the cotangent arange over the padded result).
do
  local function s(t) return table.concat(t:reshape(t:numel()):totable(), ",") end
  for _, c in ipairs{
    {{1, 2}, "constant", "0,0,1,2,3,0,0,0,4,5,6,7,0,0,0,8,9,10,11,0,0", nil},
    {{1, 2}, "reflect", "1,0,1,2,3,2,1,5,4,5,6,7,6,5,9,8,9,10,11,10,9", "1,8,8,4,8,29,22,11,15,50,36,18"},
    {{2, 1, 1, 0}, "replicate", "0,0,0,1,2,3,3,0,0,0,1,2,3,3,4,4,4,5,6,7,7,8,8,8,9,10,11,11", "27,13,15,36,45,17,18,39,66,24,25,53"},
    {{1, 1}, "circular", "3,0,1,2,3,0,7,4,5,6,7,4,11,8,9,10,11,8", "6,2,3,4,18,8,9,16,30,14,15,28"},
    {{-1, 1, 0, 0}, "constant", "1,2,3,9,5,6,7,9,9,10,11,9", "0,0,1,2,0,4,5,6,0,8,9,10", 9},
  } do
    local x = tensor.param(tensor.arange(12):reshape(1, 3, 4))
    local y
    backward(with_grad_tape(function()
      y = nn.pad(x, c[1], c[2], c[5])
      return (y * tensor.arange(y:numel()):reshape(unpack(y:size()))):sum()
    end))
    assert(s(y) == c[3], c[2] .. ": " .. s(y))
    if c[4] then assert(s(x.grad) == c[4], c[2] .. " gradient: " .. s(x.grad)) end
  end
  local x = tensor.arange(12):reshape(1, 3, 4)
  assert(s(nn.pad(x, {1, 0}, {mode = "constant", value = -1})) == s(nn.pad(x, {1, 0}, "constant", -1)))
  for _, c in ipairs{
    {function() return nn.pad(x, {4, 0}, "reflect") end, "reflect padding of 4 and 0 along dim 3 of size 4: at most 3"},
    {function() return nn.pad(x, {1}) end, "pad must list {before, after} pairs"},
    {function() return nn.pad(x, {1, 1}, "wrap") end, "mode must be"},
    {function() return nn.pad(x, {-1, 0}, "replicate") end, "negative padding is only for mode \"constant\""},
    {function() return nn.pad(x, {1, 1}, "reflect", 3) end, "value is only for mode \"constant\""},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2], 1, true), tostring(err))
  end
end

-- nn.interpolate and nn.Upsample as torch 1.13's (values on arange(6) as
-- 1x1x2x3; the gradient of a nearest (2, 1) scale with the cotangent
-- arange(12) is [3, 5, 7, 15, 17, 19]; core/testdata/torch_interpolate.json
-- holds 14 more cases of every mode).
do
  local function s(t) return table.concat(t:reshape(t:numel()):totable(), ",") end
  local function near(t, want)
    local got = t:reshape(t:numel()):totable()
    assert(#got == #want, #got .. " values")
    for i, w in ipairs(want) do assert(math.abs(got[i] - w) < 1e-6, i .. ": " .. got[i] .. " vs " .. w) end
  end
  local x = tensor.arange(6):reshape(1, 1, 2, 3)
  local want = "0,0,1,1,2,2,0,0,1,1,2,2,3,3,4,4,5,5,3,3,4,4,5,5"
  assert(s(nn.interpolate(x, {scale_factor = 2})) == want and s(nn.interpolate(x, {size = {4, 6}})) == want)
  assert(s(nn.Upsample{scale_factor = 2}(x)) == want and tostring(nn.Upsample{scale_factor = 2}) == "Upsample(scale_factor=2, mode=nearest)")
  assert(s(nn.interpolate(tensor.arange(3):reshape(1, 1, 3), {scale_factor = 3})) == "0,0,0,1,1,1,2,2,2")
  assert(s(nn.interpolate(x, {scale_factor = 1.5})) == "0,0,1,2,0,0,1,2,3,3,4,5", "nearest at a fractional factor")
  near(nn.interpolate(x, {scale_factor = 2, mode = "bilinear"}), {0, 0.25, 0.75, 1.25, 1.75, 2, 0.75, 1, 1.5, 2, 2.5, 2.75,
    2.25, 2.5, 3, 3.5, 4, 4.25, 3, 3.25, 3.75, 4.25, 4.75, 5})
  local up = nn.Upsample{size = {3, 5}, mode = "bilinear", align_corners = true}
  near(up(x), {0, 0.5, 1, 1.5, 2, 1.5, 2, 2.5, 3, 3.5, 3, 3.5, 4, 4.5, 5})
  assert(tostring(up) == "Upsample(size=(3, 5), mode=bilinear)", tostring(up))
  near(nn.interpolate(tensor.arange(4):reshape(1, 1, 4), {size = 3, mode = "linear"}), {0.1666666865348816, 1.5, 2.8333334922790527})
  local p = tensor.param(x:clone())
  backward(with_grad_tape(function() return (nn.interpolate(p, {scale_factor = {2, 1}}) * tensor.arange(12):reshape(1, 1, 4, 3)):sum() end))
  assert(s(p.grad) == "3,5,7,15,17,19", s(p.grad))
  for _, c in ipairs{
    {function() return nn.interpolate(x, {scale_factor = 2, mode = "bicubic"}) end, "mode \"bicubic\" is not supported"},
    {function() return nn.interpolate(x, {scale_factor = 2, mode = "linear"}) end, "mode linear needs a 3-d input"},
    {function() return nn.interpolate(x, {scale_factor = 2, align_corners = true}) end, "align_corners is for the interpolating modes"},
    {function() return nn.interpolate(x, {size = 4, scale_factor = 2}) end, "give exactly one of size and scale_factor"},
    {function() return nn.interpolate(x, {size = 4, antialias = true}) end, "antialias=true is not supported"},
    {function() return nn.Upsample{scale = 2} end, "unknown option scale"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2], 1, true), tostring(err))
  end
end
