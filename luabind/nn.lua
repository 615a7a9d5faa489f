-- nn: modules in the style of torch.nn, written in Lua on top of the tensor
-- API. Loaded by luabind into the global nn (which already holds the
-- losses). A module is a table whose class provides forward; calling the
-- module calls forward. Parameters are tensor.param leaves, so optimizers
-- and to_gpu keep their identity.
local nn = nn

local Module = {}
Module.__index = Module

-- class makes a module class; its instances are callable.
local function class(name, parent)
  local c = setmetatable({}, {__index = parent or Module})
  c.__index = c
  c.__call = function(self, ...) return self:forward(...) end
  c.__tostring = function(self) return self:describe() end
  c.__name = name
  return c
end

local function new(c, fields)
  fields._names = fields._names or {}   -- parameter names in order
  fields._children = fields._children or {}
  fields.training = true
  return setmetatable(fields, c)
end

local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 3) end
end

local function uniform(shape1, shape2, bound)
  return tensor.param((tensor.rand(shape1, shape2) * 2 - 1) * bound)
end

function Module:describe() return getmetatable(self).__name .. "()" end

-- named_parameters lists {name, tensor} pairs, children's names dotted.
function Module:named_parameters(prefix, out)
  out = out or {}
  prefix = prefix or ""
  for _, n in ipairs(self._names) do
    out[#out + 1] = {prefix .. n, self[n]}
  end
  for _, c in ipairs(self._children) do
    c.module:named_parameters(prefix .. c.name .. ".", out)
  end
  return out
end

function Module:parameters()
  local ps = {}
  for _, np in ipairs(self:named_parameters()) do ps[#ps + 1] = np[2] end
  return ps
end

function Module:to_gpu(scope)
  for _, p in ipairs(self:parameters()) do to_gpu(p, scope or "persistent") end
  return self
end

function Module:train(on)
  self.training = (on ~= false)
  for _, c in ipairs(self._children) do c.module:train(on) end
  return self
end

function Module:eval() return self:train(false) end

function Module:zero_grad() tensor.zero_grad(self:parameters()) end

function Module:state_dict()
  local sd = {}
  for _, np in ipairs(self:named_parameters()) do sd[np[1]] = np[2] end
  return sd
end

-- load_state_dict copies values into the module's own parameters (in
-- place, wherever they live); missing or unexpected names are errors.
function Module:load_state_dict(sd)
  check(type(sd) == "table", "load_state_dict", "expected a table, got %s", type(sd))
  local seen = {}
  for _, np in ipairs(self:named_parameters()) do
    local name, p = np[1], np[2]
    local v = sd[name]
    check(v ~= nil, "load_state_dict", "missing parameter %s", name)
    no_grad(function() p:copy_(v) end)
    seen[name] = true
  end
  for k in pairs(sd) do
    check(seen[k], "load_state_dict", "unexpected parameter %s", tostring(k))
  end
  return self
end

-- Linear: y = x wᵀ + b, initialised as torch.nn.Linear (uniform ±1/sqrt(in)).
nn.Linear = class("Linear")
function nn.Linear.new(n_in, n_out, bias)
  check(type(n_in) == "number" and type(n_out) == "number" and n_in >= 1 and n_out >= 1,
    "nn.Linear", "expected positive sizes (in, out), got %s and %s", tostring(n_in), tostring(n_out))
  local bound = 1 / math.sqrt(n_in)
  local m = new(nn.Linear, {n_in = n_in, n_out = n_out, weight = uniform(n_out, n_in, bound)})
  m._names = {"weight"}
  if bias ~= false then
    m.bias = tensor.param((tensor.rand(n_out) * 2 - 1) * bound)
    m._names[2] = "bias"
  end
  return m
end
function nn.Linear:forward(x)
  local y = x:linear(self.weight)
  if self.bias then y = y + self.bias end
  return y
end
function nn.Linear:describe() return string.format("Linear(%d -> %d)", self.n_in, self.n_out) end

-- Embedding: rows of a weight table picked by 1-based indices.
nn.Embedding = class("Embedding")
function nn.Embedding.new(num, dim)
  check(type(num) == "number" and type(dim) == "number", "nn.Embedding", "expected sizes (num, dim)")
  local m = new(nn.Embedding, {num = num, dim = dim, weight = tensor.param(tensor.randn(num, dim))})
  m._names = {"weight"}
  return m
end
function nn.Embedding:forward(idx)
  if type(idx) ~= "table" and idx:dim() == 2 then
    local b, s = idx:size(1), idx:size(2)
    return self.weight:index_select(1, idx:reshape(b * s)):reshape(b, s, self.dim)
  end
  return self.weight:index_select(1, idx)
end
function nn.Embedding:describe() return string.format("Embedding(%d, %d)", self.num, self.dim) end

-- LayerNorm over the last dim, with a learnt scale and shift.
nn.LayerNorm = class("LayerNorm")
function nn.LayerNorm.new(dim, eps)
  local m = new(nn.LayerNorm, {dim = dim, eps = eps or 1e-5,
    weight = tensor.param(tensor.ones(dim)), bias = tensor.param(tensor.zeros(dim))})
  m._names = {"weight", "bias"}
  return m
end
function nn.LayerNorm:forward(x) return x:layer_norm(self.weight, self.bias, self.eps) end

-- Dropout: active in train(), the identity in eval().
nn.Dropout = class("Dropout")
function nn.Dropout.new(p)
  p = p or 0.5
  check(type(p) == "number" and p >= 0 and p < 1, "nn.Dropout", "p must be in [0, 1), got %s", tostring(p))
  return new(nn.Dropout, {p = p})
end
function nn.Dropout:forward(x) return x:dropout(self.p, self.training) end

-- Activations.
local function activation(name, method)
  local c = class(name)
  c.new = function(...) return new(c, {args = {...}}) end
  c.forward = function(self, x) return x[method](x, unpack(self.args)) end
  nn[name] = c
end
activation("ReLU", "relu")
activation("Sigmoid", "sigmoid")
activation("Tanh", "tanh")
-- GELU() is exact (erf), PyTorch's default; GELU("tanh") (or
-- GELU{approximate="tanh"}) the tanh approximation.
nn.GELU = class("GELU")
function nn.GELU.new(approximate)
  if type(approximate) == "table" then
    for k in pairs(approximate) do
      check(k == "approximate", "nn.GELU", "unknown option %s (expected approximate)", tostring(k))
    end
    approximate = approximate.approximate
  end
  approximate = approximate or "none"
  check(approximate == "none" or approximate == "tanh", "nn.GELU",
    "approximate must be \"none\" or \"tanh\", got %s", tostring(approximate))
  return new(nn.GELU, {approximate = approximate})
end
function nn.GELU:forward(x) return x:gelu(self.approximate) end
function nn.GELU:describe()
  return self.approximate == "tanh" and "GELU(approximate='tanh')" or "GELU()"
end
activation("SiLU", "silu")
activation("Softmax", "softmax")
activation("LogSoftmax", "log_softmax")

-- Sequential{m1, m2, ...}: children named "1", "2", ...
nn.Sequential = class("Sequential")
function nn.Sequential.new(mods)
  check(type(mods) == "table", "nn.Sequential", "expected a table of modules")
  local m = new(nn.Sequential, {})
  for i, c in ipairs(mods) do
    check(type(c) == "table" and c.forward, "nn.Sequential", "element %d is not a module", i)
    m._children[i] = {name = tostring(i), module = c}
    m[i] = c
  end
  return m
end
function nn.Sequential:forward(x)
  for _, c in ipairs(self._children) do x = c.module(x) end
  return x
end
function nn.Sequential:describe()
  local parts = {}
  for _, c in ipairs(self._children) do parts[#parts + 1] = "  (" .. c.name .. "): " .. c.module:describe() end
  return "Sequential(\n" .. table.concat(parts, "\n") .. "\n)"
end

-- Constructors are called as nn.Linear(2, 3) as well as nn.Linear.new(2, 3).
for _, name in ipairs{"Linear", "Embedding", "LayerNorm", "Dropout", "Sequential", "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Softmax", "LogSoftmax"} do
  local c = nn[name]
  setmetatable(c, {__index = Module, __call = function(_, ...) return c.new(...) end})
end
nn.Module = Module
