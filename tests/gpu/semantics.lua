-- tests/gpu/semantics.lua - the PyTorch semantics the CPU tests pin down
-- (views, max/min/argmax ties and NaN, pow, gelu, log_softmax, cross_entropy
-- options, NaN through clamp and relu, relu's selecting gradient), computed on the CPU and on the GPU
-- and compared: NaN must meet NaN, indices must be equal.
--   gglua tests/gpu/semantics.lua cuda
local gpu = arg and arg[1] or "cuda"
local nan, inf = 0 / 0, math.huge
local z = 0 -- -z is -0 (Lua's constants would merge a literal -0.0 with 0)

local function run()
  local r = {}
  local function dev(t) return to_gpu(t) end
  -- views
  local x = dev(tensor{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}})
  x:narrow(1, 2, 1):fill_(7)
  x:view(9):add_(1)
  x:t():narrow(2, 3, 1):copy_(tensor{{-1}, {-2}, {-3}})
  r.views = x:totable()
  local w = to_gpu(tensor.param(tensor{{1, 2}, {3, 4}}), "persistent")
  no_grad(function() w:narrow(2, 2, 1):zero_() end)
  r.param_view = w:totable()
  local q = tensor.arange(120):reshape(2, 3, 4, 5)
  r.permute4 = (dev(q):permute(1, 2, 4, 3) * 1):totable()
  r.permute4b = (dev(q):permute(4, 3, 2, 1) + 0):totable()
  -- reductions
  local c = dev(tensor{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})
  local v, i = c:max(1)
  r.max1, r.max1i = v:totable(), i:totable()
  local t = dev(tensor{{3, 1, 3, 2}, {5, 5, 5, 0}, {1, nan, 7, nan}, {-inf, -inf, -inf, -inf}})
  v, i = t:max(2)
  r.maxt, r.maxti = v:totable(), i:totable()
  v, i = t:min(2)
  r.mint, r.minti = v:totable(), i:totable()
  r.argmax = t:argmax(2):totable()
  local p = tensor.param(tensor{{3, 1, 3}, {2, 9, 9}})
  local g = backward(with_grad_tape(function() return (to_gpu(p):max(2) * tensor{1, 2}):sum() + to_gpu(p):max() end))[p]
  r.maxgrad = g:totable()
  -- elementwise
  local b = dev(tensor{-2, -1.5, 0, 0.5, 2})
  r.pow3 = (b ^ 3):totable()
  r.pow17 = (b ^ 17):totable()
  r.pow0 = (b ^ 0):totable()
  r.rpow = ((-2) ^ dev(tensor{2, 3, 0.5})):totable()
  r.tpow = (dev(tensor{0, 2, -2, 4}) ^ dev(tensor{0, 0.5, 3, -1})):totable()
  r.gelu = b:gelu():totable()
  r.gelu_tanh = b:gelu("tanh"):totable()
  local n = dev(tensor{nan, -1, 2})
  r.clamp = n:clamp(0, 1):totable()
  r.relu = n:relu():totable()
  -- relu(-0) is -0, as PyTorch's: 1/relu gives -inf, inf, inf
  r.relu_zero_sign = (1 / dev(tensor{-z, z, -2}):relu()):totable()
  -- relu's gradient selects (PyTorch's threshold_backward of the result):
  -- an infinite or NaN gradient where relu gives 0 is 0, not inf·0
  local rx = tensor.param(tensor{nan, -1, 2, inf, -inf, 0, -z})
  local rg = tensor{nan, inf, 5, 3, -inf, nan, inf}
  r.relu_grad = backward(with_grad_tape(function() return (to_gpu(rx):relu() * to_gpu(rg)):sum() end))[rx]:totable()
  local gx = tensor.param(tensor{-30, -3, -1e-20, 0, 1e-20, 0.7, 4, 30})
  r.gelu_grad = backward(with_grad_tape(function() return to_gpu(gx):gelu():sum() end))[gx]:totable()
  -- nn and losses
  r.log_softmax = dev(tensor{{0, -200, 1e4}}):log_softmax(2):totable()
  local logits = tensor.param(tensor{{1, 2, -inf}, {0.5, -1, 3}, {2, 2, 2}})
  local ce = with_grad_tape(function()
    return nn.cross_entropy(to_gpu(logits), {2, 3, 1}, {label_smoothing = 0.1, weight = tensor{1, 2, 0.5}, ignore_index = 1})
  end)
  r.ce = ce:item()
  r.ce_grad = backward(ce)[logits]:totable()
  r.ce_none = nn.cross_entropy(dev(tensor{{1, 2}, {3, 4}}), {1, 2}, {reduction = "none"}):totable()
  return r
end

local function diff(a, b, path, worst)
  if type(a) == "table" then
    assert(type(b) == "table" and #a == #b, "shape differs at " .. path)
    for k, v in pairs(a) do worst = diff(v, b[k], path .. "." .. tostring(k), worst) end
    return worst
  end
  if a ~= a or b ~= b then
    assert(a ~= a and b ~= b, "NaN on one side only at " .. path .. ": " .. tostring(a) .. " vs " .. tostring(b))
    return worst
  end
  if a == b then return worst end
  assert(a - a == 0 and b - b == 0, "infinities differ at " .. path .. ": " .. tostring(a) .. " vs " .. tostring(b))
  local err = math.abs(a - b) / (1 + math.abs(b))
  if err > worst.err then worst.err, worst.path = err, path end
  return worst
end

device.use("cpu")
local cpu = run()
device.use(gpu)
print("semantics on " .. device.current())
local g = run()
local worst = diff(g, cpu, "", {err = 0, path = ""})
print(string.format("largest difference %.2e at %s", worst.err, worst.path))
assert(worst.err < 1e-4, "GPU and CPU disagree")
for _, k in ipairs{"max1i", "maxti", "minti", "argmax"} do
  assert(diff(g[k], cpu[k], k, {err = 0}).err == 0, k .. " differ")
end
print("gpu semantics match cpu")
