-- Empty tensors (a size of 0), as PyTorch has them. The values are torch
-- 1.13's for the same calls (sums 0, means NaN, products 1, products of
-- matrices over a dim of size 0 zeros, gradients of inputs that an empty
-- output reads zeros).
local function shape(t) return table.concat(t:size(), "x") end
local function same(t, want, msg)
  local got = t:numel() > 0 and t:view(-1):totable() or {}
  assert(#got == #want, msg .. ": " .. #got .. " values, expected " .. #want)
  for i = 1, #want do
    assert(got[i] == want[i] or (got[i] ~= got[i] and want[i] ~= want[i]), msg .. ": value " .. i .. " is " .. got[i])
  end
end
local function fails(f, pattern)
  local ok, err = pcall(f)
  assert(not ok and tostring(err):find(pattern, 1, true), tostring(err))
end
local nan = 0 / 0

local z = tensor.zeros(0, 3)
assert(shape(z) == "0x3" and z:numel() == 0 and #z == 0)
assert(shape(tensor({})) == "0" and shape(tensor({{}, {}})) == "2x0")
assert(shape(tensor.randn(2, 0)) == "2x0" and shape(tensor.ones(0)) == "0")

-- ops whose result is empty compute nothing
assert(shape(z + 1) == "0x3" and shape(z * tensor.ones(1, 3)) == "0x3" and shape(z:exp()) == "0x3")
fails(function() return z + tensor.ones(2, 3) end, "broadcast")
assert(shape(z:t()) == "3x0" and shape(z:view(-1)) == "0" and shape(z:reshape(3, 0)) == "3x0")
assert(shape(z:unsqueeze(1)) == "1x0x3" and shape(tensor.ones(1, 3):expand(0, 3)) == "0x3")
assert(shape(tensor.ones(3, 4):narrow(1, 4, 0)) == "0x4" and shape(z:clone()) == "0x3")
assert(shape(tensor.stack({z, z})) == "2x0x3" and shape(z:softmax(2)) == "0x3")
assert(shape(z:sum(2)) == "0" and shape(z:max(2)) == "0")
assert(shape(nn.Linear(4, 5)(tensor.zeros(0, 4))) == "0x5")
assert(shape(to_gpu(z)) == "0x3")

-- ops whose result has elements though an input has none
same(z:sum(), {0}, "sum"); same(z:mean(), {nan}, "mean"); same(z:prod(), {1}, "prod")
same(z:sum(1), {0, 0, 0}, "sum(1)"); same(z:mean(1), {nan, nan, nan}, "mean(1)")
same(z:prod(1), {1, 1, 1}, "prod(1)")
same(tensor.zeros(2, 0):matmul(tensor.zeros(0, 3)), {0, 0, 0, 0, 0, 0}, "matmul over a dim of 0")
same(tensor.cat({z, tensor.ones(2, 3)}), {1, 1, 1, 1, 1, 1}, "cat")
same(tensor.cat({tensor({}), tensor.ones(2, 3)}), {1, 1, 1, 1, 1, 1}, "cat beside a 1-d empty tensor")
assert(shape(tensor.cat({z, z})) == "0x3")
same(nn.cross_entropy(tensor.zeros(0, 5), {}), {nan}, "cross_entropy of no rows")
same(nn.mse_loss(tensor.zeros(0), tensor.zeros(0)), {nan}, "mse_loss of nothing")

-- reductions, sorts, selections and scatters of a 0x3 tensor: torch 1.13's shapes and values
local torch = {
  {"std", "1", {nan}}, {"std(1)", "3", {nan, nan, nan}}, {"std(2)", "0", {}},
  {"var", "1", {nan}}, {"var(1)", "3", {nan, nan, nan}}, {"all", "1", {1}}, {"all(1)", "3", {1, 1, 1}},
  {"any", "1", {0}}, {"any(1)", "3", {0, 0, 0}}, {"norm", "1", {0}},
  {"cumsum(1)", "0x3", {}}, {"log_softmax(1)", "0x3", {}}, {"sort(1)", "0x3", {}}, {"argsort(2)", "0x3", {}},
  {"logsumexp(1)", "3", {-math.huge, -math.huge, -math.huge}}, {"logsumexp(2)", "0", {}},
  {"max(2)", "0", {}}, {"argmax(2)", "0", {}},
}
for _, c in ipairs(torch) do
  local name, d = c[1]:match("^(%a+_?%a*)%(?(%d?)%)?$")
  local r = d ~= "" and z[name](z, tonumber(d)) or z[name](z)
  if type(r) == "table" then r = r[1] end
  assert(shape(r) == c[2], c[1] .. ": shape " .. shape(r)); same(r:float(), c[3], c[1])
end
local top, at = z:topk(1, 2); assert(shape(top) == "0x1" and shape(at) == "0x1")
assert(shape(z:masked_select(z:gt(0))) == "0" and shape(tensor.randn(2, 2):masked_select(tensor.zeros(2, 2):gt(1))) == "0")
assert(shape(z:gather(2, tensor.zeros(0, 2))) == "0x2" and shape(tensor.where(z:gt(0), z, z)) == "0x3")
same(tensor.zeros(3, 2):index_add(1, {}, tensor.zeros(0, 2)), {0, 0, 0, 0, 0, 0}, "index_add of nothing")
same(tensor.zeros(3):scatter_add(1, tensor.zeros(0), tensor.zeros(0)), {0, 0, 0}, "scatter_add of nothing")
same(tensor.einsum("ij,jk->ik", tensor.zeros(2, 0), tensor.zeros(0, 3)), {0, 0, 0, 0, 0, 0}, "einsum over a dim of 0")
same(tensor.zeros(0):dot(tensor.zeros(0)), {0}, "dot of nothing")
local y = tensor.randn(2, 3); local y0 = y:clone(); y[y:gt(100)] = tensor({})
same(y:sub(y0):abs(), {0, 0, 0, 0, 0, 0}, "x[mask] = {} where the mask selects nothing")

-- what PyTorch refuses, refused
fails(function() return z:item() end, "0 elements")
fails(function() return z:max() end, "no elements, so no maximum")
fails(function() return z:max(1) end, "dim 1 of shape 0x3 has size 0")
fails(function() return z:argmax() end, "no elements, so no maximum")
fails(function() return tensor.multinomial(tensor.zeros(0), 1) end, "no categories")
fails(function() return z:min(1) end, "has size 0")
fails(function() return z:argmax(1) end, "has size 0")
fails(function() return z:exp() * tensor.ones(2, 3) end, "broadcast")

-- gradients
local w = tensor.randn(2, 3); w:requires_grad(true)
backward(with_grad_tape(function() return tensor.zeros(0, 2):matmul(w):sum() end))
same(w.grad, {0, 0, 0, 0, 0, 0}, "a weight's gradient over no rows")
local lin = nn.Linear(4, 5)
backward(with_grad_tape(function() return lin(tensor.zeros(0, 4)):sum() end))
assert(lin.weight.grad:abs():sum():item() == 0); same(lin.bias.grad, {0, 0, 0, 0, 0}, "a bias's gradient over no rows")
local x = tensor.randn(3, 4); x:requires_grad(true)
backward(with_grad_tape(function() return x:narrow(1, 2, 0):sum() + x:index_select(2, {}):sum() end))
same(x.grad, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "an input read by empty outputs only")
local a, b = tensor.zeros(0, 3), tensor.ones(2, 3)
a:requires_grad(true); b:requires_grad(true)
backward(with_grad_tape(function() return (tensor.cat({a, b}) * 2):sum() end))
assert(shape(a.grad) == "0x3"); same(b.grad, {2, 2, 2, 2, 2, 2}, "cat's gradient")
optim.sgd({a, b}, {lr = 0.5}):step()
same(b, {0, 0, 0, 0, 0, 0}, "a step beside an empty parameter"); assert(shape(a) == "0x3")
local e = tensor.zeros(0, 3); e:requires_grad(true)
backward(with_grad_tape(function() return e:sum() end))
assert(shape(e.grad) == "0x3")

-- modules over a batch of no samples: empty outputs, zero gradients
local conv = nn.Conv2d(1, 2, 3)
assert(shape(conv(tensor.zeros(0, 1, 5, 5))) == "0x2x3x3")
backward(with_grad_tape(function() return conv(tensor.zeros(0, 1, 5, 5)):sum() end))
same(conv.bias.grad, {0, 0}, "a convolution's bias over no images")
assert(shape(nn.MaxPool2d(2)(tensor.zeros(0, 1, 4, 4))) == "0x1x2x2")
assert(shape(nn.LayerNorm(3)(tensor.zeros(0, 3))) == "0x3" and shape(nn.Embedding(5, 2)(tensor({}))) == "0x2")
assert(shape(nn.LSTM(3, 4)(tensor.zeros(5, 0, 3))) == "5x0x4")
assert(shape(nn.BatchNorm1d(3)(tensor.zeros(0, 3))) == "0x3") -- no values: nothing to refuse (torch 1.13)
fails(function() return nn.BatchNorm1d(3)(tensor.zeros(1, 3)) end, "more than 1 value per channel")
for _, name in ipairs({"sgd", "adam", "adamw", "adadelta", "rmsprop"}) do
  local p, q = tensor.param(tensor.zeros(0, 3)), tensor.param(tensor.ones(2))
  local o = optim[name]({p, q}, {lr = 0.1})
  backward(with_grad_tape(function() return p:sum() + q:sum() end)); o:step()
  assert(shape(p) == "0x3" and q:sum():item() < 2, name)
end
local p0 = tensor.param(tensor.zeros(0, 3))
backward(with_grad_tape(function() return p0:sum() end))
same(optim.clip_grad_norm({p0}, 1), {0}, "clip_grad_norm of an empty gradient")

-- the rest of the library on empty tensors (torch 1.13's shapes)
local b = tensor.ones(2, 3)
tensor.cat({tensor.zeros(0, 3), b}):add_(1); tensor.cat({b}):add_(1); tensor.stack({b}):add_(1)
same(b, {1, 1, 1, 1, 1, 1}, "cat and stack copy, never alias their input")
local top, at = tensor.ones(3):topk(0); assert(shape(top) == "0" and shape(at) == "0")
assert(shape(tensor.ones(2):repeat_interleave(0)) == "0" and shape(tensor.zeros(0, 3):repeat_interleave(2, 2)) == "0x6")
assert(shape(tensor.ones(2, 3):tile({0, 1})) == "0x3" and shape(tensor.arange(0)) == "0" and shape(tensor.arange(2, 2)) == "0")
assert(shape(tensor.randperm(0)) == "0" and shape(nn.one_hot(tensor({}), 4)) == "0x4")
fails(function() return nn.one_hot(tensor({})) end, "cannot infer num_classes")
local pieces = z:split(2, 1); assert(#pieces == 1 and shape(pieces[1]) == "0x3")
assert(#z:chunk(2, 1) == 2 and #tensor.ones(3):split({0, 2, 1}) == 3)
assert(shape(nn.GroupNorm(2, 4)(tensor.zeros(0, 4, 3))) == "0x4x3" and shape(z:index_add(1, {}, z)) == "0x3")
assert(shape(nn.BatchNorm2d(3)(tensor.zeros(2, 3, 0, 4))) == "2x3x0x4")
local dev = to_gpu(tensor.ones(2, 3)); dev:narrow(2, 2, 0):zero_(); dev:narrow(2, 2, 0):add_(1)
same(dev, {1, 1, 1, 1, 1, 1}, "in-place ops on an empty view write nothing")
assert(to_gpu(tensor.zeros(0, {dtype = "i32"})):dtype() == "i32")
assert(tostring(to_cpu(tensor.zeros(0, 3))):sub(1, 2) == "[]")

assert(shape(tensor.ones(2, 3):tile({2^28, 0})) == "536870912x0") -- nothing built first
assert(shape(tensor.ones(1, 1, 1, 2):tile({0, 1, 1, 1})) == "0x1x1x2")
assert(tensor{1, 2}:int():tile({0}):dtype() == "i32" and tensor{1, 2}:int():repeat_interleave(0):dtype() == "i32")
assert(tensor.cat({tensor.zeros(0, {dtype = "i32"}), tensor.zeros(0, {dtype = "i32"})}):dtype() == "i32")
fails(function() return tensor.arange(0, -0.5) end, "inconsistent with the step")
fails(function() return tensor.arange(0, 0, 0) end, "step must be nonzero")

-- printing
local s = tostring(tensor.zeros(100000, 0)) -- PyTorch's tensor([], size=(100000, 0)): no rows printed
assert(s:sub(1, 3) == "[]\n" and s:find("100000x0", 1, true) and #s < 100, s)
