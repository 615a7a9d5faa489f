-- The activations torch.nn has beyond ReLU, GELU and SiLU, as functionals
-- (nn.leaky_relu(x, 0.1), PyTorch's F.*) and modules (nn.LeakyReLU(0.1)),
-- on the tensor API. Each follows PyTorch's values, its defaults and
-- positional arguments, and its gradients where the formula has a corner:
-- leaky_relu and prelu take the slope at 0, elu and selu alpha there,
-- hardtanh has no gradient at its bounds, hardswish -0.5 at -3 and 1 at 3;
-- and where a NaN goes (the identity's branch for elu, hardtanh and
-- hardswish, the slope's for leaky_relu and prelu).
-- Branches a where does not take read their inputs clamped or replaced by
-- another where (exp of what is never used would overflow, and a NaN
-- there would reach the gradient: 0 times an infinite or NaN one is NaN).
-- PyTorch's inplace=true is refused: these always make a new tensor.
local nn = nn

-- check raises an error at the line of the script that called the
-- function calling check.
local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 4) end
end

-- check_arg is check one call deeper: for args, below.
local function check_arg(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 5) end
end

-- args reads PyTorch's positional arguments after x, or an options table
-- in their place (defaults: names and values in order). Its errors name
-- the line of the script that called the functional or the module.
local function args(fn, given, names, defaults)
  local check = check_arg
  local out = {}
  if type(given[1]) == "table" and getmetatable(given[1]) == nil then
    check(#given == 1, fn, "an options table must be the last argument")
    for k in pairs(given[1]) do
      local ok = k == "inplace"
      for _, n in ipairs(names) do ok = ok or k == n end
      check(ok, fn, "unknown option %s (expected %s)", tostring(k), table.concat(names, ", "))
    end
    check(not given[1].inplace, fn, "inplace=true is not supported (the result is a new tensor)")
    for i, n in ipairs(names) do
      local v = given[1][n]
      if v == nil then v = defaults[i] end
      out[i] = v
    end
    return out
  end
  check(#given <= #names + 1, fn, "%d arguments after the input, at most %d", #given, #names + 1)
  for i = 1, #names do
    local v = given[i]
    if v == nil then v = defaults[i] end
    check(type(v) == "number", fn, "%s must be a number, got %s", names[i], type(v))
    out[i] = v
  end
  check(not given[#names + 1], fn, "inplace=true is not supported (the result is a new tensor)")
  return out
end

local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

-- (PyTorch's elu takes NaN down the identity's branch: its gradient is
-- the incoming one.)
local function elu(x, alpha)
  local neg = x:le(0)
  return tensor.where(neg, tensor.where(neg, x, 0):expm1() * alpha, x)
end

local function softplus(x, beta, threshold)
  local bx = x * beta
  return tensor.where(bx:gt(threshold), x, bx:clamp(nil, threshold):exp():log1p() / beta)
end

-- Each functional: its PyTorch argument names and defaults, and the formula.
local functionals = {
  leaky_relu = {{"negative_slope"}, {0.01}, function(x, a) return tensor.where(x:gt(0), x, x * a) end},
  elu = {{"alpha"}, {1.0}, elu},
  selu = {{}, {}, function(x) return elu(x, SELU_ALPHA) * SELU_SCALE end},
  softplus = {{"beta", "threshold"}, {1, 20}, softplus},
  mish = {{}, {}, function(x) return x * softplus(x, 1, 20):tanh() end},
  hardtanh = {{"min_val", "max_val"}, {-1, 1}, function(x, lo, hi)
    return tensor.where((x:le(lo) + x:ge(hi)):gt(0), x:clamp(lo, hi):detach(), x)
  end},
  hardswish = {{}, {}, function(x) -- (-inf * 0 is NaN there too, as in PyTorch)
    local mid = tensor.where(x:lt(3), x, 0):clamp(-3, 3)
    return tensor.where(x:lt(3), tensor.where(x:lt(-3), x * 0, mid * (mid + 3) / 6), x)
  end},
}

for name, f in pairs(functionals) do
  local names, defaults, formula = f[1], f[2], f[3]
  local fn = "nn." .. name
  nn[name] = function(x, ...)
    check(type(x) == "userdata", fn, "expected a tensor, got %s", type(x))
    local a = args(fn, {...}, names, defaults)
    if name == "hardtanh" then check(a[1] <= a[2], fn, "min_val %g is above max_val %g", a[1], a[2]) end
    return formula(x, unpack(a, 1, #names))
  end
end

-- prelu(x, weight): leaky_relu with a learnt slope, one (weight of 1) or
-- one per channel (dim 2 of x, as PyTorch's).
function nn.prelu(x, weight)
  local fn = "nn.prelu"
  check(type(x) == "userdata" and type(weight) == "userdata", fn, "expected tensors (input, weight)")
  check(weight:dim() == 1, fn, "weight must be 1-d, got %d dims", weight:dim())
  local c = weight:size(1)
  local w = weight
  if c > 1 then
    check(x:dim() >= 2 and x:size(2) == c, fn, "weight of %d slopes needs an input of %d channels (dim 2), got shape %s",
      c, c, table.concat(x:size(), "x"))
    local shape = {}
    for i = 1, x:dim() do shape[i] = i == 2 and c or 1 end
    w = weight:reshape(unpack(shape))
  end
  return tensor.where(x:gt(0), x, tensor.where(x:gt(0), 0, x) * w)
end

-- The modules: each keeps its arguments, PyTorch's names as fields.
local modules = {LeakyReLU = "leaky_relu", ELU = "elu", SELU = "selu", Softplus = "softplus", Mish = "mish",
  Hardtanh = "hardtanh", Hardswish = "hardswish"}
for class_name, name in pairs(modules) do
  local f = functionals[name]
  local c = nn.Module:extend(class_name)
  nn[class_name] = c
  function c:init(...)
    self.args = args("nn." .. class_name, {...}, f[1], f[2])
    for i, n in ipairs(f[1]) do self[n] = self.args[i] end
  end
  function c:forward(x) return nn[name](x, unpack(self.args, 1, #f[1])) end
  function c:describe()
    local parts = {}
    for i, n in ipairs(f[1]) do parts[i] = n .. "=" .. tostring(self.args[i]) end
    return class_name .. "(" .. table.concat(parts, ", ") .. ")"
  end
end

-- nn.PReLU(num_parameters=1, init=0.25): the slopes are a parameter,
-- "weight", as PyTorch's.
nn.PReLU = nn.Module:extend("PReLU")
function nn.PReLU:init(...)
  local a = args("nn.PReLU", {...}, {"num_parameters", "init"}, {1, 0.25})
  check(a[1] >= 1 and a[1] % 1 == 0, "nn.PReLU", "num_parameters must be a positive integer, got %s", tostring(a[1]))
  self.num_parameters = a[1]
  self.weight = tensor.param(tensor.full({a[1]}, a[2]))
end
function nn.PReLU:forward(x) return nn.prelu(x, self.weight) end
function nn.PReLU:describe() return string.format("PReLU(num_parameters=%d)", self.num_parameters) end

