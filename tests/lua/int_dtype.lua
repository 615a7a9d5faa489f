-- The i32 dtype: indices and labels held exactly past 2^24 (where an f32
-- rounds: torch.tensor([16777217.]) is 16777216), read exactly by every
-- index reader, refused as an arithmetic operand with a clear error.
local big = 16777217 -- 2^24 + 1, the first integer an f32 cannot hold
local x = tensor({big, 2147483647, -5}, {dtype = "i32"})
assert(x:dtype() == "i32" and x:device() == "host")
local v = x:totable()
assert(v[1] == big and v[2] == 2147483647 and v[3] == -5, v[1])
assert(x[1]:item() == big, "a view of an i32 reads exactly")
assert(x:narrow(1, 2, 2):totable()[1] == 2147483647)
assert(tostring(x):find("16777217", 1, true), tostring(x))
assert(tensor{big}:totable()[1] == 16777216, "f32 rounds, as PyTorch's float32")
assert(x:float():totable()[1] == 16777216 and x:float():dtype() == "f32", "float() rounds to nearest")
assert(x:clone():totable()[1] == big and x:clone():dtype() == "i32")
assert(x:int():totable()[1] == big, "int() of an i32 tensor is itself")

-- int(): truncation toward zero, as PyTorch's .int(); NaN and inf refused.
local t = tensor{2.7, -2.7, 3, -0.5}:int()
assert(t:dtype() == "i32")
local tv = t:totable()
assert(tv[1] == 2 and tv[2] == -2 and tv[3] == 3 and tv[4] == 0, tv[2])
assert(tensor{1.5}:to("i32"):totable()[1] == 1)
for _, bad in ipairs({0 / 0, 1 / 0, 3e9}) do
  local ok, err = pcall(function() return tensor{bad}:int() end)
  assert(not ok and err:find("int"), tostring(err))
end

-- Constructors.
assert(tensor.zeros(3, {dtype = "i32"}):dtype() == "i32")
assert(tensor.ones(2, 2, {dtype = "i32"}):totable()[2][2] == 1)
assert(tensor.full({2}, 2147483647, {dtype = "i32"}):totable()[2] == 2147483647)
assert(tensor.arange(big, big + 3, {dtype = "i32"}):totable()[3] == big + 2)
local r = tensor.randint(0, 2147483647, {64}, {dtype = "i32"})
local past = false
for _, n in ipairs(r:totable()) do
  assert(n == math.floor(n) and n >= 0 and n < 2147483647)
  past = past or n > 16777216
end
assert(past, "randint with i32 draws past 2^24")
local perm = tensor.randperm(5, {dtype = "i32"})
local sum = 0
for _, n in ipairs(perm:totable()) do sum = sum + n end
assert(perm:dtype() == "i32" and sum == 15)
for _, bad in ipairs({
  function() return tensor({1.5}, {dtype = "i32"}) end,
  function() return tensor({2147483648}, {dtype = "i32"}) end,
  function() return tensor.rand(3, {dtype = "i32"}) end,
}) do
  local ok, err = pcall(bad)
  assert(not ok and err:find("integer"), tostring(err))
end

-- Index readers read i32 exactly: an index past 2^24 is named as given
-- (an f32 would have rounded 16777219 to 16777220).
local m = tensor{{1, 2}, {3, 4}, {5, 6}}
local rows = m:index_select(1, tensor({3, 1}, {dtype = "i32"})):totable()
assert(rows[1][1] == 5 and rows[2][2] == 2)
local ok, err = pcall(function() return m:index_select(1, tensor({16777219}, {dtype = "i32"})) end)
assert(not ok and err:find("16777219", 1, true), tostring(err))
assert(m:gather(2, tensor({{2}, {1}, {2}}, {dtype = "i32"})):totable()[3][1] == 6)
local logits = tensor{{1, 2, 3}, {3, 2, 1}}
local lf = nn.cross_entropy(logits, tensor{3, 1}):item()
local li = nn.cross_entropy(logits, tensor({3, 1}, {dtype = "i32"})):item()
assert(lf == li, "labels as i32 or f32 give the same loss")
assert(nn.Embedding(4, 2)(tensor({4, 1}, {dtype = "i32"})):shape()[1] == 2)
local labels = tensor({10, 20, 30}, {dtype = "i32"})
local shuffled = labels:index_select(1, tensor{3, 1, 2})
assert(shuffled:dtype() == "i32" and shuffled:totable()[1] == 30, "index_select of i32 stays i32")

-- Not an operand: arithmetic, in-place changes and gradients are refused.
for _, bad in ipairs({
  function() return x + 1 end,
  function() return x:sum() end,
  function() return x:eq(tensor{1, 2, 3}) end,
  function() return tensor{1, 2, 3}:lt(x) end,
}) do
  ok, err = pcall(bad)
  assert(not ok and err:find("i32") and err:find("float()", 1, true), tostring(err))
  assert(not err:find("expand"), "the error names the op, not a helper: " .. err)
end
ok, err = pcall(function() x:fill_(1) end)
assert(not ok and err:find("i32"), tostring(err))
assert(x:totable()[1] == big, "a refused write changed nothing")
ok, err = pcall(function() return tensor.param(tensor({1}, {dtype = "i32"})) end)
assert(not ok and err:find("gradient"), tostring(err))

-- Devices and loaders keep i32.
local d = to_gpu(x)
assert(d:dtype() == "i32" and d:totable()[1] == big and d:device() ~= "host")
assert(to_cpu(d):totable()[2] == 2147483647)
ok, err = pcall(to_gpu, x, {dtype = "f32"})
assert(not ok and err:find("i32"), tostring(err))
local loader = data.loader(tensor{{1}, {2}, {3}, {4}}, tensor({big, big + 1, big + 2, big + 3}, {dtype = "i32"}), {batch = 2})
for bx, by in loader do
  assert(by:dtype() == "i32" and by:totable()[1] - bx:totable()[1][1] == big - 1, "rows stay paired and exact")
end

-- *_like keep the input's dtype (as PyTorch's) and take i32 values exactly.
local li = tensor({1, 2}, {dtype = "i32"})
assert(tensor.full_like(li, big):totable()[2] == big and tensor.full_like(li, big):dtype() == "i32")
assert(tensor.full_like(li, big, {dtype = "i32"}):totable()[1] == big)
assert(tensor.zeros_like(li):dtype() == "i32" and tensor.ones_like(li):totable()[2] == 1)
assert(tensor.zeros_like(tensor{1.5}:half()):dtype() == "f16")
assert(tensor.zeros_like(li, {dtype = "f32"}):dtype() == "f32")
ok, err = pcall(tensor.rand_like, li)
assert(not ok and err:find("integer"), tostring(err))

-- An optimizer refuses an i32 tensor (it has no gradient) and leaves it be.
local lab = tensor({1, 2}, {dtype = "i32"})
ok, err = pcall(optim.sgd, {lab}, {lr = 0.1})
assert(not ok and err:find("i32"), tostring(err))
assert(not lab:requires_grad() and lab:device() == "host")
local opt = optim.sgd({tensor.param(tensor{1.0})}, {lr = 0.1})
ok, err = pcall(function() opt:add_param_group{params = {lab}} end)
assert(not ok and err:find("i32"), tostring(err))
assert(not lab:requires_grad())
