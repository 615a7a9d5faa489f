-- nn.init: torch.nn.init's initialisers. Each fills its tensor in place
-- (under no_grad, so a parameter keeps its identity and the tape is left
-- alone) from the seeded generator (tensor.rand, tensor.randn;
-- tensor.manual_seed makes them repeat) and returns it. Options come
-- positionally, in PyTorch's order, or as one table of PyTorch's names:
--
--   nn.init.kaiming_uniform_(w, math.sqrt(5))          -- a
--   nn.init.kaiming_normal_(w, {mode = "fan_out", nonlinearity = "relu"})
--   nn.init.xavier_uniform_(w, nn.init.calculate_gain("tanh"))
--
-- Fans follow PyTorch: for a weight [out, in, k...] fan_in = in * k...,
-- fan_out = out * k... (at least 2 dims). The values differ from PyTorch's
-- (another generator); the bounds and deviations are PyTorch's.
local nn = nn
local init = {}
nn.init = init

local function check(cond, fn, fmt, ...)
  if not cond then error("nn.init." .. fn .. ": " .. string.format(fmt, ...), 3) end
end

local tensor_mt
local function check_tensor(fn, t)
  tensor_mt = tensor_mt or getmetatable(tensor.zeros(1))
  check(type(t) == "userdata" and getmetatable(t) == tensor_mt, fn, "expected a tensor, got %s", type(t))
end

-- options reads fn's options after the tensor: one table of names, or
-- positional values in PyTorch's order; defaults fill what is missing.
local function options(fn, names, defaults, ...)
  local out = {}
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" then
    local known = {}
    for _, n in ipairs(names) do known[n] = true end
    for k in pairs(first) do
      check(known[k], fn, "unknown option %s (expected %s)", tostring(k), table.concat(names, ", "))
    end
    for _, n in ipairs(names) do out[n] = first[n] end
  else
    check(select("#", ...) <= #names, fn, "expected at most %d options after the tensor, got %d", #names, select("#", ...))
    for i, n in ipairs(names) do out[n] = (select(i, ...)) end
  end
  for i, n in ipairs(names) do
    if out[n] == nil then out[n] = defaults[i] end
  end
  return out
end

local function number(fn, name, v)
  check(type(v) == "number" and v == v, fn, "%s must be a number, got %s", name, tostring(v))
  return v
end

-- fill copies values (a host tensor of t's shape) into t.
local function fill(t, values)
  no_grad(function() t:copy_(values) end)
  return t
end

function init.uniform_(t, ...)
  check_tensor("uniform_", t)
  local o = options("uniform_", {"a", "b"}, {0, 1}, ...)
  local a, b = number("uniform_", "a", o.a), number("uniform_", "b", o.b)
  check(a <= b, "uniform_", "expected a <= b, got %s and %s", tostring(a), tostring(b))
  return fill(t, tensor.rand(t:shape()) * (b - a) + a)
end

function init.normal_(t, ...)
  check_tensor("normal_", t)
  local o = options("normal_", {"mean", "std"}, {0, 1}, ...)
  local mean, std = number("normal_", "mean", o.mean), number("normal_", "std", o.std)
  check(std >= 0, "normal_", "std must be >= 0, got %s", tostring(std))
  return fill(t, tensor.randn(t:shape()) * std + mean)
end

function init.constant_(t, val)
  check_tensor("constant_", t)
  number("constant_", "val", val)
  no_grad(function() t:fill_(val) end)
  return t
end

function init.zeros_(t)
  check_tensor("zeros_", t)
  no_grad(function() t:zero_() end)
  return t
end

function init.ones_(t) check_tensor("ones_", t) return init.constant_(t, 1) end

-- calculate_gain(nonlinearity [, param]) is PyTorch's recommended gain.
function init.calculate_gain(nonlinearity, param)
  local linear = {linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
    conv_transpose2d = true, conv_transpose3d = true, sigmoid = true}
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = param
    if slope == nil then slope = 0.01 end
    check(type(slope) == "number", "calculate_gain", "negative_slope %s is not a valid number", tostring(param))
    return math.sqrt(2 / (1 + slope * slope))
  end
  check(false, "calculate_gain", "unsupported nonlinearity %s", tostring(nonlinearity))
end

-- fans is PyTorch's _calculate_fan_in_and_fan_out.
local function fans(fn, t)
  local shape = t:shape()
  check(#shape >= 2, fn, "fan in and fan out can not be computed for a tensor with fewer than 2 dims (shape has %d)", #shape)
  local receptive = 1
  for i = 3, #shape do receptive = receptive * shape[i] end
  return shape[2] * receptive, shape[1] * receptive
end
init.fans = function(t)
  check_tensor("fans", t)
  return fans("fans", t)
end

function init.xavier_uniform_(t, ...)
  check_tensor("xavier_uniform_", t)
  local o = options("xavier_uniform_", {"gain"}, {1}, ...)
  local fan_in, fan_out = fans("xavier_uniform_", t)
  local bound = math.sqrt(3) * number("xavier_uniform_", "gain", o.gain) * math.sqrt(2 / (fan_in + fan_out))
  return fill(t, (tensor.rand(t:shape()) * 2 - 1) * bound)
end

function init.xavier_normal_(t, ...)
  check_tensor("xavier_normal_", t)
  local o = options("xavier_normal_", {"gain"}, {1}, ...)
  local fan_in, fan_out = fans("xavier_normal_", t)
  local std = number("xavier_normal_", "gain", o.gain) * math.sqrt(2 / (fan_in + fan_out))
  return fill(t, tensor.randn(t:shape()) * std)
end

-- kaiming_std is gain / sqrt(fan) for kaiming_*_(t, a, mode, nonlinearity).
local function kaiming_std(fn, t, ...)
  check_tensor(fn, t)
  local o = options(fn, {"a", "mode", "nonlinearity"}, {0, "fan_in", "leaky_relu"}, ...)
  check(o.mode == "fan_in" or o.mode == "fan_out", fn, "mode must be \"fan_in\" or \"fan_out\", got %s", tostring(o.mode))
  local fan_in, fan_out = fans(fn, t)
  local fan = o.mode == "fan_in" and fan_in or fan_out
  return init.calculate_gain(o.nonlinearity, number(fn, "a", o.a)) / math.sqrt(fan)
end

function init.kaiming_uniform_(t, ...)
  local bound = math.sqrt(3) * kaiming_std("kaiming_uniform_", t, ...)
  return fill(t, (tensor.rand(t:shape()) * 2 - 1) * bound)
end

function init.kaiming_normal_(t, ...)
  local std = kaiming_std("kaiming_normal_", t, ...)
  return fill(t, tensor.randn(t:shape()) * std)
end

-- orthogonal_(t [, gain=1]): t viewed as [rows, numel/rows] gets the Q of
-- a Gaussian matrix's QR with R's diagonal positive (PyTorch's, which
-- fixes the signs the same way), times gain. The QR runs in Lua, by
-- modified Gram-Schmidt in double precision: a matrix with more than
-- 2^24 multiply-adds (e.g. beyond 256 x 256) is refused.
function init.orthogonal_(t, ...)
  check_tensor("orthogonal_", t)
  local o = options("orthogonal_", {"gain"}, {1}, ...)
  local gain = number("orthogonal_", "gain", o.gain)
  local shape = t:shape()
  check(#shape >= 2, "orthogonal_", "only tensors with 2 or more dims are supported (shape has %d)", #shape)
  local rows = shape[1]
  local cols = t:numel() / rows
  local n, m = math.max(rows, cols), math.min(rows, cols) -- a is n x m, n >= m
  check(n * m * m <= 2 ^ 24, "orthogonal_", "a %d x %d matrix is too large for the QR in Lua (at most 2^24 multiply-adds, e.g. 256 x 256)", rows, cols)
  local g = tensor.randn(rows, cols):totable()
  -- Columns of a (n x m): a[j][i] is row i of column j.
  local a = {}
  for j = 1, m do
    local col = {}
    for i = 1, n do
      if rows >= cols then col[i] = g[i][j] else col[i] = g[j][i] end
    end
    a[j] = col
  end
  for j = 1, m do
    local v = a[j]
    for k = 1, j - 1 do
      local q = a[k]
      local dot = 0
      for i = 1, n do dot = dot + q[i] * v[i] end
      for i = 1, n do v[i] = v[i] - dot * q[i] end
    end
    local norm = 0
    for i = 1, n do norm = norm + v[i] * v[i] end
    norm = math.sqrt(norm)
    check(norm > 0, "orthogonal_", "the random matrix is rank deficient")
    for i = 1, n do v[i] = v[i] / norm end
  end
  local out = {}
  for r = 1, rows do
    local row = {}
    for c = 1, cols do
      if rows >= cols then row[c] = a[c][r] * gain else row[c] = a[r][c] * gain end
    end
    out[r] = row
  end
  return fill(t, tensor(out):reshape(shape))
end
