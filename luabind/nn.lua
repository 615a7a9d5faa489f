-- nn: modules in the style of torch.nn, written in Lua on top of the tensor
-- API. Loaded by luabind into the global nn (which already holds the
-- losses). A module is a table whose class provides forward; calling the
-- module calls forward. Parameters are tensor.param leaves, so optimizers
-- and to_gpu keep their identity.
local nn = nn
local private = ... -- luabind's functions for nn alone (nn.go)

-- Writing a module. A class is made with extend; its init gets the
-- constructor's arguments, and every module or parameter assigned to a
-- field is registered, in the order first assigned:
--
--   local MLP = nn.Module:extend("MLP")
--   function MLP:init(n_in, n_hidden, n_out)
--     self.fc1 = nn.Linear(n_in, n_hidden)      -- a child, named "fc1"
--     self.fc2 = nn.Linear(n_hidden, n_out)
--     self.scale = tensor.param(tensor.ones(n_out)) -- a parameter, "scale"
--   end
--   function MLP:forward(x) return self.fc2(self.fc1(x):relu()) * self.scale end
--   local net = MLP(2, 16, 3)   -- or MLP.new(2, 16, 3); net(x) calls forward
--
-- As in PyTorch, named_parameters lists a module's own parameters (leaf
-- tensors that require grad, or tensor.param's frozen since) before its
-- children's, whose
-- names are dotted ("fc1.weight"); parameters, train/eval, state_dict,
-- load_state_dict, to_gpu, zero_grad, apply and tostring all walk the same
-- registry. Other fields (numbers, tables, tensors that are not parameters)
-- are kept but not registered. A subclass of a subclass works the same way
-- (nn.Linear:extend("MyLinear")); a class's init calls its parent's
-- explicitly when it wants it: nn.Linear.init(self, 2, 3).
local Module = {}
Module.__index = Module

-- nn loads before the tensor library: the tensor metatable is found on
-- first use.
local tensor_mt
local function is_tensor(v)
  if type(v) ~= "userdata" then return false end
  tensor_mt = tensor_mt or getmetatable(tensor.zeros(1))
  return getmetatable(v) == tensor_mt
end

-- A parameter is a leaf tensor that requires grad, or one tensor.param
-- made that was frozen since (requires_grad(false)): as PyTorch's, it stays
-- in parameters() and state_dict, and optimizers skip it.
local function is_param(v)
  return is_tensor(v) and private.is_param(v)
end

-- A module is an instance (a class has its own __index) with the methods.
local function is_module(v)
  return type(v) == "table" and rawget(v, "__index") == nil and getmetatable(v) ~= nil
    and type(v.named_parameters) == "function"
end

-- track is every class's __newindex: a field assigned for the first time
-- is remembered in order; what it holds is looked at when walked.
local function track(self, k, v)
  rawset(self, k, v)
  local order, seen = rawget(self, "_order"), rawget(self, "_seen")
  if v ~= nil and order and not seen[k] then
    seen[k] = true
    order[#order + 1] = k
  end
end

-- construct makes an instance and runs its init; an error raised inside
-- nn.lua (a constructor's check) is given the line that called the
-- constructor instead, which is where the mistake is.
local function construct(c, ...)
  local m = setmetatable({_order = {}, _seen = {}, training = true}, c)
  local ok, err = pcall(m.init, m, ...)
  if not ok then
    local inside = type(err) == "string" and err:match("^nn%.lua:%d+: (.*)$")
    error(inside or err, inside and 3 or 0)
  end
  return m
end

-- An error inside a module's forward names where in the model it
-- happened, as the module's name in PyTorch's state_dict keys, with its
-- class (`blocks.1.attn (SelfAttention): ...`): each module call the
-- error passes records the child it came through, and the outermost puts
-- the path in front of the message. Errors stay strings on the way (a Go
-- function between two modules, or a pcall that changes the message,
-- starts the path again).
local calling, failed = 0, {}

local function child_name(m, child)
  for _, c in ipairs(m:named_modules()) do
    if c[1] ~= "" and rawequal(c[2], child) then return c[1] end
  end
end

local function pack(...) return {n = select("#", ...), ...} end

local function call_module(self, ...)
  calling = calling + 1
  local r = pack(pcall(self.forward, self, ...))
  calling = calling - 1
  if r[1] then return unpack(r, 2, r.n) end
  local e = r[2]
  local name = failed.inner and rawequal(failed.msg, e) and child_name(self, failed.inner)
  if name then
    table.insert(failed.path, 1, name)
  else -- raised in this module's own forward
    failed.msg, failed.path, failed.class = e, {}, tostring(rawget(getmetatable(self) or {}, "__name"))
  end
  failed.inner = self
  if calling > 0 or type(e) ~= "string" then
    error(e, 0)
  end
  -- The outermost call: a position inside nn.lua tells the user nothing,
  -- the line that called the model does.
  local path, class, inside = failed.path, failed.class, e:match("^nn%.lua:%d+: (.*)$")
  failed = {}
  if #path > 0 then
    e = string.format("%s (%s): %s", table.concat(path, "."), class, inside or e)
  end
  error(inside and (#path > 0 and e or inside) or e, inside and 3 or 0)
end

-- class makes a module class: its instances are callable (forward) and
-- printable (describe); the class is called to construct one, as
-- c.new(...) is.
local function class(name, parent)
  parent = parent or Module
  local c = setmetatable({}, {__index = parent, __call = function(cls, ...) return cls.new(...) end})
  c.__index = c
  c.__newindex = track
  c.__call = call_module
  c.__tostring = function(self) return self:describe() end
  c.__name = name
  c.new = function(...) return construct(c, ...) end
  return c
end

-- new makes an instance from a table of fields; parameters and children
-- may also be listed by name (_names) or as {name=, module=} (_children).
local function new(c, fields)
  fields._names = fields._names or {}
  fields._children = fields._children or {}
  fields._order = fields._order or {}
  fields._seen = fields._seen or {}
  fields.training = true
  return setmetatable(fields, c)
end

local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 3) end
end

-- known refuses options outside names.
local function known(opts, fn, names)
  for k in pairs(opts) do
    local ok = false
    for _, n in ipairs(names) do ok = ok or k == n end
    check(ok, fn, "unknown option %s (expected %s)", tostring(k), table.concat(names, ", "))
  end
end

-- positional turns PyTorch's positional arguments after the required ones
-- (first, then the rest) into the options table names lists, in
-- PyTorch's order; an options table alone is returned as it is.
local function positional(fn, names, first, ...)
  local n = select("#", ...)
  if n == 0 and (first == nil or type(first) == "table") then return first or {} end
  local args = {first, ...}
  check(n + 1 <= #names, fn, "takes at most %d arguments after its sizes (%s), got %d", #names, table.concat(names, ", "), n + 1)
  local opts = {}
  for i = 1, n + 1 do
    check(type(args[i]) ~= "table", fn, "argument %d after the sizes is a table: give the options as one table, or every argument in PyTorch's order", i)
    opts[names[i]] = args[i]
  end
  return opts
end

local function uniform(shape1, shape2, bound)
  return tensor.param((tensor.rand(shape1, shape2) * 2 - 1) * bound)
end

-- extend makes a subclass: nn.Module:extend("Name").
function Module.extend(parent, name)
  check(type(parent) == "table" and rawget(parent, "__index") == parent, "extend",
    "call it on a class, as nn.Module:extend(\"Name\")")
  check(type(name) == "string", "extend", "expected a class name, got %s", type(name))
  return class(name, parent)
end

function Module:init() end

function Module:forward()
  error(tostring(getmetatable(self).__name) .. ": forward is not defined", 2)
end

-- members is a module's own parameters and its children, each a list of
-- {name, value} in the order first assigned (after any listed in
-- _names/_children). An instance made by hand, without the registry, is
-- walked by its fields' names, sorted.
local function members(self)
  local params, children, seen = {}, {}, {}
  local function add(k, v)
    -- A numbered member (a Sequential's layers, a ModuleList's) is named
    -- 0-based, as PyTorch names it: state_dict keys are shared with
    -- PyTorch's files. Lua's own indexing, seq[1], stays 1-based.
    local name = type(k) == "number" and tostring(k - 1) or tostring(k)
    if seen[name] or v == nil then return end
    if is_module(v) then
      seen[name] = true
      children[#children + 1] = {name, v}
    elseif is_param(v) then
      seen[name] = true
      params[#params + 1] = {name, v}
    end
  end
  for _, n in ipairs(rawget(self, "_names") or {}) do add(n, self[n]) end
  local order = rawget(self, "_order")
  if not order then
    order = {}
    for k in pairs(self) do
      if type(k) == "string" or type(k) == "number" then order[#order + 1] = k end
    end
    table.sort(order, function(a, b) return tostring(a) < tostring(b) end)
  end
  for _, k in ipairs(order) do add(k, rawget(self, k)) end
  for _, c in ipairs(rawget(self, "_children") or {}) do add(c.name, c.module) end
  return params, children
end

-- named_parameters lists {name, tensor} pairs, the module's own first, then
-- its children's with dotted names; a tensor reached twice is listed once
-- (memo false lists it under each name, as a state_dict does).
function Module:named_parameters(prefix, out, memo)
  out = out or {}
  prefix = prefix or ""
  if memo == nil then memo = {} end
  local params, children = members(self)
  for _, np in ipairs(params) do
    if not (memo and memo[np[2]]) then
      if memo then memo[np[2]] = true end
      out[#out + 1] = {prefix .. np[1], np[2]}
    end
  end
  for _, c in ipairs(children) do c[2]:named_parameters(prefix .. c[1] .. ".", out, memo) end
  return out
end

function Module:parameters()
  local ps = {}
  for _, np in ipairs(self:named_parameters()) do ps[#ps + 1] = np[2] end
  return ps
end

-- named_children lists {name, module} pairs; children the modules.
function Module:named_children()
  local _, children = members(self)
  return children
end

function Module:children()
  local out = {}
  for _, c in ipairs(self:named_children()) do out[#out + 1] = c[2] end
  return out
end

-- named_modules lists {name, module} for the module ("") and every
-- descendant, depth first; modules the modules.
function Module:named_modules(prefix, out)
  out = out or {}
  prefix = prefix or ""
  out[#out + 1] = {prefix, self}
  for _, c in ipairs(self:named_children()) do
    c[2]:named_modules(prefix == "" and c[1] or prefix .. "." .. c[1], out)
  end
  return out
end

function Module:modules()
  local out = {}
  for _, m in ipairs(self:named_modules()) do out[#out + 1] = m[2] end
  return out
end

-- apply calls fn on every descendant, then the module (as PyTorch).
function Module:apply(fn)
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

function Module:to_gpu(scope)
  for _, p in ipairs(self:parameters()) do to_gpu(p, scope or "persistent") end
  for _, m in ipairs(self:modules()) do
    for _, n in ipairs(rawget(m, "_buffers") or {}) do
      local b = rawget(m, n)
      if b ~= nil then rawset(m, n, to_gpu(b, scope or "persistent")) end
    end
  end
  return self
end

function Module:train(on)
  self.training = (on ~= false)
  for _, c in ipairs(self:children()) do c:train(on) end
  return self
end

function Module:eval() return self:train(false) end

function Module:zero_grad(set_to_none) tensor.zero_grad(self:parameters(), set_to_none) end

-- register_buffer keeps a tensor that is state but not a parameter (a
-- running mean): state_dict and load_state_dict carry it, to_gpu moves it,
-- optimizers never see it. It is the field name, as in PyTorch.
function Module:register_buffer(name, t)
  check(type(name) == "string", "register_buffer", "expected a name, got %s", type(name))
  check(t == nil or is_tensor(t), "register_buffer", "%s: expected a tensor, got %s", name, type(t))
  local names = rawget(self, "_buffers")
  if not names then
    names = {}
    rawset(self, "_buffers", names)
  end
  local known_name = false
  for _, n in ipairs(names) do known_name = known_name or n == name end
  if not known_name then names[#names + 1] = name end
  rawset(self, name, t)
  return t
end

-- named_buffers lists {name, tensor} pairs as named_parameters does.
function Module:named_buffers(prefix, out)
  out = out or {}
  prefix = prefix or ""
  for _, n in ipairs(rawget(self, "_buffers") or {}) do
    local b = rawget(self, n)
    if b ~= nil then out[#out + 1] = {prefix .. n, b} end
  end
  for _, c in ipairs(self:named_children()) do c[2]:named_buffers(prefix .. c[1] .. ".", out) end
  return out
end

-- state_dict maps names to the module's parameters and buffers (the
-- tensors themselves, not copies), as PyTorch's: a tied weight under each
-- of its names.
function Module:state_dict()
  local sd = {}
  for _, np in ipairs(self:named_parameters("", {}, false)) do sd[np[1]] = np[2] end
  for _, nb in ipairs(self:named_buffers()) do sd[nb[1]] = nb[2] end
  return sd
end

-- load_state_dict copies values into the module's own parameters and
-- buffers (in place, wherever they live). As PyTorch's: with strict (the
-- default) a missing or unexpected name is an error; strict=false (a
-- boolean, or {strict=false}) skips them and returns their names, after
-- the module, as missing, unexpected. Another table second is not read:
-- m:load_state_dict(tensor.load(path)) passes the file's metadata there.
-- after_load[class] syncs what a module keeps beside its buffers once
-- load_state_dict has copied them (BatchNorm's count of batches).
local after_load = {}

function Module:load_state_dict(sd, strict, ...)
  check(type(sd) == "table", "load_state_dict", "expected a table, got %s", type(sd))
  check(select("#", ...) == 0 and not (type(strict) == "table" and strict.assign ~= nil), "load_state_dict",
    "assign is not supported: the values are copied into the module's own parameters and buffers")
  if type(strict) == "table" and strict.strict ~= nil then
    for k in pairs(strict) do
      check(k == "strict", "load_state_dict", "unknown option %s (expected strict)", tostring(k))
    end
    strict = strict.strict
  elseif type(strict) == "table" then
    strict = nil
  end
  check(strict == nil or type(strict) == "boolean", "load_state_dict", "strict must be a boolean, got %s", type(strict))
  strict = strict ~= false
  local seen, missing, unexpected = {}, {}, {}
  local targets = self:named_parameters("", {}, false)
  for _, nb in ipairs(self:named_buffers()) do targets[#targets + 1] = nb end
  -- Buffers a module can do without (_optional_buffers), by full name.
  local optional = {}
  for _, nm in ipairs(self:named_modules()) do
    for b in pairs(nm[2]._optional_buffers or {}) do
      optional[nm[1] == "" and b or nm[1] .. "." .. b] = true
    end
  end
  for _, np in ipairs(targets) do
    local name, p = np[1], np[2]
    local v = sd[name]
    if v == nil and optional[name] then
      no_grad(function() p:fill_(0) end) -- as PyTorch fills a count its file lacks
    elseif v == nil then
      check(not strict, "load_state_dict", "missing parameter or buffer %s (strict=false skips it)", name)
      missing[#missing + 1] = name
    else
      local ok, err = pcall(no_grad, function() p:copy_(v) end)
      check(ok, "load_state_dict", "%s: %s", name, (tostring(err):gsub("^[^:]*:%d+: ", "")))
      seen[name] = true
    end
  end
  for k in pairs(sd) do
    if not seen[k] then
      check(not strict, "load_state_dict", "unexpected parameter or buffer %s (strict=false skips it)", tostring(k))
      unexpected[#unexpected + 1] = tostring(k)
    end
  end
  table.sort(unexpected)
  for _, m in ipairs(self:modules()) do
    local hook = after_load[getmetatable(m)]
    if hook then hook(m) end
  end
  return self, missing, unexpected
end

-- describe is what tostring shows: the class name, then each child's
-- description, indented, as PyTorch prints a module.
function Module:describe()
  local name = tostring(getmetatable(self).__name)
  local children = self:named_children()
  if #children == 0 then return name .. "()" end
  local parts = {}
  for _, c in ipairs(children) do
    local inner = c[2]:describe():gsub("\n", "\n  ")
    parts[#parts + 1] = "  (" .. c[1] .. "): " .. inner
  end
  return name .. "(\n" .. table.concat(parts, "\n") .. "\n)"
end

-- Linear: y = x wᵀ + b, initialised as torch.nn.Linear (uniform ±1/sqrt(in)).
nn.Linear = class("Linear")
-- nn.Linear(in, out [, bias=true | {bias=}]), as torch.nn.Linear.
function nn.Linear:init(n_in, n_out, bias)
  check(type(n_in) == "number" and type(n_out) == "number" and n_in >= 1 and n_out >= 1,
    "nn.Linear", "expected positive sizes (in, out), got %s and %s", tostring(n_in), tostring(n_out))
  if type(bias) == "table" then
    known(bias, "nn.Linear", {"bias"})
    bias = bias.bias
  end
  check(bias == nil or type(bias) == "boolean", "nn.Linear", "bias must be a boolean, got %s", type(bias))
  local bound = 1 / math.sqrt(n_in)
  self.n_in = n_in
  self.n_out = n_out
  self.weight = uniform(n_out, n_in, bound)
  if bias ~= false then self.bias = tensor.param((tensor.rand(n_out) * 2 - 1) * bound) end
end
function nn.Linear:forward(x)
  if is_tensor(self.bias) then return private.linear_bias(x, self.weight, self.bias) end
  local y = x:linear(self.weight)
  if self.bias then y = y + self.bias end -- a number
  return y
end
function nn.Linear:describe() return string.format("Linear(%d -> %d)", self.n_in, self.n_out) end

-- Embedding: rows of a weight table picked by 1-based indices.
nn.Embedding = class("Embedding")
-- nn.Embedding(num, dim [, padding_idx | {padding_idx=}]), as
-- torch.nn.Embedding; padding_idx is 1-based, as indices are (negative
-- counts from the end). Its row starts at zeros and gets no gradient.
function nn.Embedding:init(num, dim, opts)
  check(type(num) == "number" and type(dim) == "number", "nn.Embedding", "expected sizes (num, dim)")
  if type(opts) ~= "table" then opts = {padding_idx = opts} end
  known(opts, "nn.Embedding", {"padding_idx"})
  local pad = opts.padding_idx
  if pad ~= nil then
    check(type(pad) == "number" and pad == math.floor(pad) and pad ~= 0 and math.abs(pad) <= num, "nn.Embedding",
      "padding_idx must be an index in 1..%d (or -%d..-1 from the end), got %s", num, num, tostring(pad))
    if pad < 0 then pad = num + 1 + pad end
  end
  self.num = num
  self.dim = dim
  self.padding_idx = pad
  local w = tensor.randn(num, dim)
  if pad then w[pad] = tensor.zeros(dim) end
  self.weight = tensor.param(w)
end
function nn.Embedding:forward(idx)
  local flat, shape = idx, nil
  if type(idx) ~= "table" and idx:dim() == 2 then
    flat, shape = idx:reshape(idx:size(1) * idx:size(2)), {idx:size(1), idx:size(2), self.dim}
  end
  local out = self.weight:index_select(1, flat)
  if self.padding_idx then
    -- The padding rows' value, with no gradient: mask * out + (1 - mask) * out:detach().
    local n = type(flat) == "table" and #flat or flat:numel()
    local keep = {}
    local ids = type(flat) == "table" and flat or flat:totable()
    for i = 1, n do keep[i] = {ids[i] == self.padding_idx and 0 or 1} end
    local mask = tensor(keep)
    out = out * mask + out:detach() * (1 - mask)
  end
  if shape then out = out:reshape(shape[1], shape[2], shape[3]) end
  return out
end
function nn.Embedding:describe() return string.format("Embedding(%d, %d)", self.num, self.dim) end

-- LayerNorm over the last dim, with a learnt scale and shift.
nn.LayerNorm = class("LayerNorm")
-- nn.LayerNorm(normalized_shape [, eps, elementwise_affine, bias | {...}]),
-- as torch.nn.LayerNorm, over the last dim only.
function nn.LayerNorm:init(dim, ...)
  if type(dim) == "table" then
    check(#dim == 1, "nn.LayerNorm", "normalises over the last dim only: normalized_shape must be one size, got %d", #dim)
    dim = dim[1]
  end
  check(type(dim) == "number" and dim >= 1, "nn.LayerNorm", "expected a positive size, got %s", tostring(dim))
  local opts = positional("nn.LayerNorm", {"eps", "elementwise_affine", "bias"}, ...)
  known(opts, "nn.LayerNorm", {"eps", "elementwise_affine", "bias"})
  check(opts.eps == nil or (type(opts.eps) == "number" and opts.eps >= 0), "nn.LayerNorm", "eps must be a number >= 0, got %s", tostring(opts.eps))
  self.dim = dim
  self.eps = opts.eps or 1e-5
  if opts.elementwise_affine ~= false then
    self.weight = tensor.param(tensor.ones(dim))
    if opts.bias ~= false then self.bias = tensor.param(tensor.zeros(dim)) end
  end
end
function nn.LayerNorm:forward(x) return x:layer_norm(self.weight, self.bias, self.eps) end

-- Dropout: active in train(), the identity in eval().
nn.Dropout = class("Dropout")
function nn.Dropout:init(p)
  p = p or 0.5
  check(type(p) == "number" and p >= 0 and p <= 1, "nn.Dropout", "p must be in [0, 1], got %s", tostring(p))
  self.p = p
end
function nn.Dropout:forward(x) return x:dropout(self.p, self.training) end

-- Activations.
local function activation(name, method)
  local c = class(name)
  c.init = function(self, ...) self.args = {...} end
  c.forward = function(self, x) return x[method](x, unpack(self.args)) end
  nn[name] = c
end
activation("ReLU", "relu")
activation("Sigmoid", "sigmoid")
activation("Tanh", "tanh")
-- GELU() is exact (erf), PyTorch's default; GELU("tanh") (or
-- GELU{approximate="tanh"}) the tanh approximation.
nn.GELU = class("GELU")
function nn.GELU:init(approximate)
  if type(approximate) == "table" then
    for k in pairs(approximate) do
      check(k == "approximate", "nn.GELU", "unknown option %s (expected approximate)", tostring(k))
    end
    approximate = approximate.approximate
  end
  approximate = approximate or "none"
  check(approximate == "none" or approximate == "tanh", "nn.GELU",
    "approximate must be \"none\" or \"tanh\", got %s", tostring(approximate))
  self.approximate = approximate
end
function nn.GELU:forward(x) return x:gelu(self.approximate) end
function nn.GELU:describe()
  return self.approximate == "tanh" and "GELU(approximate='tanh')" or "GELU()"
end
activation("SiLU", "silu")
activation("Softmax", "softmax")
activation("LogSoftmax", "log_softmax")

-- modules_of reads a container's arguments: a list {m1, m2, ...}, the
-- modules themselves (m1, m2, ...), or nothing.
local function modules_of(fn, ...)
  local first = ...
  if first == nil then return {} end
  if is_module(first) then return {...} end
  check(type(first) == "table" and select("#", ...) == 1, fn, "expected a table of modules")
  return first
end

-- append_module adds m under the next index (its name "1", "2", ...).
local function append_module(self, fn, m)
  local i = #self + 1
  check(is_module(m), fn, "element %d is not a module (got %s)", i, type(m))
  self[i] = m
  return self
end

-- Sequential{m1, m2, ...} or Sequential(m1, m2, ...): children named "1",
-- "2", ...; seq[i] is the i-th, #seq their count, seq:add(m) appends.
nn.Sequential = class("Sequential")
function nn.Sequential:init(...)
  for _, c in ipairs(modules_of("nn.Sequential", ...)) do append_module(self, "nn.Sequential", c) end
end
function nn.Sequential:add(m) return append_module(self, "Sequential:add", m) end
-- A Linear with a bias followed by a ReLU, both nn's own (no subclass, no
-- forward or __call replaced on the class or the module, no arguments to
-- the ReLU), run as one op: relu(x wᵀ + b) in one pass where the backend
-- has gglua's kernel, x wᵀ + b never written (core's BiasRelu; the values
-- and gradients are the two modules'). fusable holds the classes and
-- functions as nn.lua made them (filled in below, once both exist), so a
-- change to nn.Linear or nn.ReLU after loading turns the fusion off.
-- When the module after the pair is such a Linear too, only its product
-- reads the result, which autocast may then keep in bf16 (core's
-- BiasReluForProduct: the product would round it so). Likewise a Linear,
-- an exact GELU and a Linear, each with its bias (a transformer's MLP),
-- run as core's MLP: under autocast one op whose GELU result, kept in
-- bf16, the backward makes again. Either only where x's width is the
-- first Linear's, so that an error names the module it happens in.
local fusable = {}
local function plain_linear(m)
  local f = fusable
  return getmetatable(m) == f.linear and m.forward == f.linear_forward and f.linear.__call == f.linear_call
end
local function takes(m, x)
  return is_tensor(x) and x:dim() >= 1 and x:size(x:dim()) == m.weight:size(2)
end
local function linear_then_relu(m, nxt, x)
  local f = fusable
  return plain_linear(m) and getmetatable(nxt) == f.relu and nxt.forward == f.relu_forward and
    f.relu.__call == f.relu_call and is_tensor(m.bias) and #nxt.args == 0 and takes(m, x)
end
local function mlp(m, act, m2, x)
  local f = fusable
  return plain_linear(m) and plain_linear(m2) and getmetatable(act) == f.gelu and act.forward == f.gelu_forward and
    f.gelu.__call == f.gelu_call and act.approximate == "none" and is_tensor(m.bias) and is_tensor(m2.bias) and takes(m, x)
end

function nn.Sequential:forward(x)
  local i = 1
  while i <= #self do
    if mlp(self[i], self[i + 1], self[i + 2], x) then
      x = private.mlp(x, self[i].weight, self[i].bias, self[i + 2].weight, self[i + 2].bias)
      i = i + 3
    elseif linear_then_relu(self[i], self[i + 1], x) then
      local fused = plain_linear(self[i + 2]) and private.linear_bias_relu_for_product or private.linear_bias_relu
      x = fused(x, self[i].weight, self[i].bias)
      i = i + 2
    else
      x = self[i](x)
      i = i + 1
    end
  end
  return x
end

-- ModuleList{m1, m2, ...}: modules held, registered, not called: list[i],
-- #list, ipairs(list), list:append(m), list:extend{m3, m4}.
nn.ModuleList = class("ModuleList")
function nn.ModuleList:init(...)
  for _, c in ipairs(modules_of("nn.ModuleList", ...)) do append_module(self, "nn.ModuleList", c) end
end
function nn.ModuleList:append(m) return append_module(self, "ModuleList:append", m) end
function nn.ModuleList:extend(mods)
  if rawget(self, "__index") == self then return Module.extend(self, mods) end -- a subclass
  check(type(mods) == "table", "ModuleList:extend", "expected a table of modules")
  for _, m in ipairs(mods) do append_module(self, "ModuleList:extend", m) end
  return self
end
function nn.ModuleList:forward()
  error("ModuleList: a ModuleList is not called; call its modules (list[i](x), ipairs(list))", 2)
end

-- ModuleDict{name = module, ...}: modules held and registered by name
-- (state_dict keys "name.weight"), not called: dict[name], dict:keys(),
-- dict:values(), dict:items() in the order added (a table's entries are
-- added in sorted order), dict:update{...}, dict:len(). A name may not be
-- one of the container's methods.
-- ParameterList{p1, p2, ...} and ParameterDict{name = p, ...} hold
-- parameters the same ways (a plain tensor is made a parameter, as
-- PyTorch's wrap tensors in Parameter): list[i] (named "0", "1", ...),
-- #list, list:append(p), list:extend{...}; dict[name], dict:keys(), ...
local function container(name, is_member, as_member, what)
  local c = class(name)
  local fn = "nn." .. name
  local function put(self, f, k, v)
    check(type(k) == "string", f, "names must be strings, got %s", type(k))
    check(c[k] == nil and Module[k] == nil and k:sub(1, 1) ~= "_" and k ~= "training", f, "%q is the name of a method or field of %s", k, name)
    check(is_member(v), f, "%s is not %s (got %s)", k, what, type(v))
    self[k] = as_member(v)
  end
  local function update(self, f, items)
    check(type(items) == "table" and not is_module(items) and not is_tensor(items), f, "expected a table of named members")
    local keys = {}
    for k in pairs(items) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do put(self, f, k, items[k]) end
    return self
  end
  function c:init(items)
    if items ~= nil then update(self, fn, items) end
  end
  function c:update(items) return update(self, name .. ":update", items) end
  function c:keys()
    local out = {}
    for _, k in ipairs(rawget(self, "_order")) do
      if type(k) == "string" and rawget(self, k) ~= nil and is_member(rawget(self, k)) then out[#out + 1] = k end
    end
    return out
  end
  function c:values()
    local out = {}
    for i, k in ipairs(self:keys()) do out[i] = rawget(self, k) end
    return out
  end
  function c:items()
    local out = {}
    for i, k in ipairs(self:keys()) do out[i] = {k, rawget(self, k)} end
    return out
  end
  function c:len() return #self:keys() end
  function c:forward() error(name .. ": a " .. name .. " is not called; use its members", 2) end
  return c
end
nn.ModuleDict = container("ModuleDict", is_module, function(m) return m end, "a module")
local function param_of(t) return is_param(t) and t or tensor.param(t) end
nn.ParameterDict = container("ParameterDict", is_tensor, param_of, "a tensor")

nn.ParameterList = class("ParameterList")
function nn.ParameterList:init(ps)
  if ps == nil then return end
  check(type(ps) == "table" and not is_tensor(ps), "nn.ParameterList", "expected a table of tensors")
  self:extend(ps)
end
function nn.ParameterList:append(p)
  check(is_tensor(p), "ParameterList:append", "element %d is not a tensor (got %s)", #self + 1, type(p))
  self[#self + 1] = param_of(p)
  return self
end
function nn.ParameterList:extend(ps)
  if rawget(self, "__index") == self then return Module.extend(self, ps) end -- a subclass
  check(type(ps) == "table", "ParameterList:extend", "expected a table of tensors")
  for _, p in ipairs(ps) do self:append(p) end
  return self
end
function nn.ParameterList:forward()
  error("ParameterList: a ParameterList is not called; use its parameters (list[i], ipairs(list))", 2)
end

-- Identity(...) returns its input (its arguments are ignored, as PyTorch's).
nn.Identity = class("Identity")
function nn.Identity:forward(x) return x end

-- Flatten(start_dim=2, end_dim=-1): x:flatten(start_dim, end_dim), which
-- keeps the batch dim by default.
nn.Flatten = class("Flatten")
function nn.Flatten:init(start_dim, end_dim)
  self.start_dim = start_dim or 2
  self.end_dim = end_dim or -1
end
function nn.Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end
function nn.Flatten:describe()
  return string.format("Flatten(start_dim=%d, end_dim=%d)", self.start_dim, self.end_dim)
end

-- Constructors are called as nn.Linear(2, 3) as well as nn.Linear.new(2, 3).
-- class() makes classes callable; this loop only completes a class made
-- some other way (it leaves one that is callable as it is).
for _, name in ipairs{"Linear", "Embedding", "LayerNorm", "Dropout", "Sequential", "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Softmax", "LogSoftmax"} do
  local c = nn[name]
  if not (getmetatable(c) or {}).__call then
    setmetatable(c, {__index = Module, __call = function(_, ...) return c.new(...) end})
  end
end
nn.Module = Module
fusable = {linear = nn.Linear, relu = nn.ReLU, gelu = nn.GELU, linear_forward = nn.Linear.forward, relu_forward = nn.ReLU.forward,
  gelu_forward = nn.GELU.forward, linear_call = nn.Linear.__call, relu_call = nn.ReLU.__call, gelu_call = nn.GELU.__call}

-- Convolution, pooling and normalisation modules (nn.conv2d and the other
-- functions are in luabind/nn_conv.go).

-- pair_of reads an integer or {h, w} as two integers.
local function pair_of(v, fn, what)
  if type(v) == "number" then return v, v end
  check(type(v) == "table" and #v == 2, fn, "%s must be an integer or a table of two integers, got %s", what, type(v))
  return v[1], v[2]
end


-- conv_module makes Conv1d, Conv2d and their transposed forms: weight
-- [out, in/groups, k...] (transposed: [in, out/groups, k...]) and bias
-- [out], both uniform in ±1/sqrt(fan_in) as torch.nn's init (kaiming_uniform
-- with a = sqrt(5); fan_in is the weight's second size times the kernel's).
local function conv_module(name, dims, fn, transposed)
  local c = class(name)
  local names = {"stride", "padding", "dilation", "groups", "bias"}
  if transposed then names = {"stride", "padding", "output_padding", "groups", "bias", "dilation"} end
  function c:init(n_in, n_out, k, ...)
    local cname = "nn." .. name
    local opts = positional(cname, names, ...)
    check(type(n_in) == "number" and type(n_out) == "number" and n_in >= 1 and n_out >= 1, cname,
      "expected positive channel counts (in, out), got %s and %s", tostring(n_in), tostring(n_out))
    known(opts, cname, names)
    local groups = opts.groups or 1
    check(type(groups) == "number" and groups >= 1 and n_in % groups == 0 and n_out % groups == 0, cname,
      "groups %s must divide both in_channels %d and out_channels %d", tostring(groups), n_in, n_out)
    local kh, kw = 1, k
    if dims == 2 then kh, kw = pair_of(k, cname, "kernel size") end
    check(type(kw) == "number" and kh >= 1 and kw >= 1, cname, "expected a positive kernel size")
    local rows, cols = n_out, n_in / groups
    if transposed then rows, cols = n_in, n_out / groups end
    local bound = 1 / math.sqrt(cols * kh * kw)
    local w
    if dims == 2 then
      w = tensor.rand(rows, cols, kh, kw)
    else
      w = tensor.rand(rows, cols, kw)
    end
    self.n_in, self.n_out, self.kernel, self.groups = n_in, n_out, k, groups
    self.opts = {stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = groups,
      output_padding = opts.output_padding}
    self.weight = tensor.param((w * 2 - 1) * bound)
    if opts.bias ~= false then self.bias = tensor.param((tensor.rand(n_out) * 2 - 1) * bound) end
  end
  -- with_output_size is self.opts with torch's _output_padding: the output
  -- padding that makes the output output_size (its last dims) for input x.
  local function with_output_size(self, x, output_size)
    local cname = "nn." .. name
    check(type(output_size) == "table" and #output_size >= dims, cname,
      "output_size must be a table of the output's last %d sizes, got %s", dims, tostring(output_size))
    local shape = x:shape()
    local opts, pad = {}, {}
    for key, v in pairs(self.opts) do opts[key] = v end
    local function at(v, i, default)
      if v == nil then return default end
      if type(v) == "number" then return v end
      return v[i]
    end
    local k = self.kernel
    for i = 1, dims do
      local ki = dims == 2 and at(k, i) or k
      local s, p, d = at(opts.stride, i, 1), at(opts.padding, i, 0), at(opts.dilation, i, 1)
      local want = output_size[#output_size - dims + i]
      local min = (shape[#shape - dims + i] - 1) * s - 2 * p + d * (ki - 1) + 1
      check(want >= min and want <= min + s - 1, cname, "output_size %d along dim %d is outside %d..%d, the sizes this input can give",
        want, i, min, min + s - 1)
      pad[i] = want - min
    end
    opts.output_padding = dims == 2 and pad or pad[1]
    return opts
  end
  c.forward = function(self, x, output_size)
    if output_size == nil then return nn[fn](x, self.weight, self.bias, self.opts) end
    check(transposed, "nn." .. name, "forward takes one input")
    return nn[fn](x, self.weight, self.bias, with_output_size(self, x, output_size))
  end
  c.describe = function(self)
    local k = self.kernel
    if type(k) == "table" then k = "(" .. k[1] .. ", " .. k[2] .. ")" end
    return string.format("%s(%d, %d, kernel_size=%s)", name, self.n_in, self.n_out, tostring(k))
  end
  nn[name] = c
end
conv_module("Conv1d", 1, "conv1d")
conv_module("Conv2d", 2, "conv2d")
conv_module("ConvTranspose1d", 1, "conv_transpose1d", true)
conv_module("ConvTranspose2d", 2, "conv_transpose2d", true)

-- MaxPool1d/2d(k [, {stride=k, padding=0, dilation=1, ceil_mode=false}])
-- and AvgPool1d/2d(k [, {stride=k, padding=0, ceil_mode=false,
-- count_include_pad=true, divisor_override=nil}]): PyTorch's options,
-- passed on to nn.max_pool2d and the others, which check them.
local pool_options = {
  max = {"stride", "padding", "dilation", "ceil_mode"},
  avg = {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"},
}
-- PyTorch's positional order of the same (return_indices is not supported).
local pool_positional = {
  max = {"stride", "padding", "dilation", "return_indices", "ceil_mode"},
  avg = {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"},
}
local function pool_module(name, fn, kind)
  local c = class(name)
  function c:init(k, ...)
    local opts = positional("nn." .. name, pool_positional[kind], ...)
    if opts.return_indices == false then opts.return_indices = nil end -- PyTorch's default
    known(opts, "nn." .. name, pool_options[kind])
    self.kernel = k
    self.opts = {}
    for _, key in ipairs(pool_options[kind]) do self.opts[key] = opts[key] end
  end
  c.forward = function(self, x) return nn[fn](x, self.kernel, self.opts) end
  c.describe = function(self) -- as PyTorch prints it (AvgPool1d's sizes as 1-tuples)
    local size = function(v)
      if type(v) == "table" then return "(" .. table.concat(v, ", ") .. ")" end
      return name == "AvgPool1d" and "(" .. tostring(v) .. ",)" or tostring(v)
    end
    local s = string.format("%s(kernel_size=%s, stride=%s, padding=%s", name, size(self.kernel),
      size(self.opts.stride or self.kernel), size(self.opts.padding or 0))
    if kind == "max" then
      s = s .. string.format(", dilation=%s, ceil_mode=%s", size(self.opts.dilation or 1), self.opts.ceil_mode and "True" or "False")
    end
    return s .. ")"
  end
  nn[name] = c
end
pool_module("MaxPool1d", "max_pool1d", "max")
pool_module("MaxPool2d", "max_pool2d", "max")
pool_module("AvgPool1d", "avg_pool1d", "avg")
pool_module("AvgPool2d", "avg_pool2d", "avg")

nn.AdaptiveAvgPool2d = class("AdaptiveAvgPool2d")
function nn.AdaptiveAvgPool2d:init(out) self.output_size = out end
function nn.AdaptiveAvgPool2d:forward(x) return nn.adaptive_avg_pool2d(x, self.output_size) end

-- BatchNorm1d(C) on (N, C) or (N, C, L), BatchNorm2d(C) on (N, C, H, W):
-- train() normalises by the batch and updates running_mean and
-- running_var (buffers, not parameters), eval() normalises by those.
local function batch_norm_module(name, ranks)
  local c = class(name)
  function c:init(n, ...)
    local cname = "nn." .. name
    local opts = positional(cname, {"eps", "momentum", "affine", "track_running_stats"}, ...)
    check(type(n) == "number" and n >= 1, cname, "expected a positive number of features, got %s", tostring(n))
    known(opts, cname, {"eps", "momentum", "affine", "track_running_stats"})
    -- momentum=false is PyTorch's momentum=None (a table cannot hold nil):
    -- the running statistics are then the average of every batch so far.
    local m = opts.momentum
    check(m == nil or m == false or type(m) == "number", cname,
      "momentum must be a number, or false for PyTorch's None (a cumulative average), got %s", tostring(m))
    if m == nil then m = 0.1 end
    self.num_features, self.eps, self.momentum = n, opts.eps or 1e-5, m
    if opts.affine ~= false then
      self.weight = tensor.param(tensor.ones(n))
      self.bias = tensor.param(tensor.zeros(n))
    end
    -- track_running_stats=false: no running statistics, and the batch's
    -- own normalise in eval() too, as PyTorch's.
    self.track_running_stats = opts.track_running_stats ~= false
    if self.track_running_stats then
      self:register_buffer("running_mean", tensor.zeros(n))
      self:register_buffer("running_var", tensor.ones(n))
      -- PyTorch's count of training batches: a scalar (written 0-d), f32
      -- (gglua's i32 tensors do not change in place), counted exactly on
      -- the host.
      self:register_buffer("num_batches_tracked", tensor.scalar_tensor(0))
      self._batches = 0
    end
  end
  c.forward = function(self, x)
    local ok = false
    for _, r in ipairs(ranks) do ok = ok or x:dim() == r end
    check(ok, name, "expected a %s-d input, got %d-d", table.concat(ranks, "- or "), x:dim())
    local momentum = self.momentum
    if self.training and self.track_running_stats then
      check(self._batches < 2^24, name, "num_batches_tracked would pass 2^24, past what its f32 holds exactly")
      self._batches = self._batches + 1
      local count = self.num_batches_tracked
      no_grad(function() count:add_(1) end) -- onto whatever it holds, as PyTorch
      if momentum == false then momentum = 1 / self._batches end -- PyTorch's None: 1 / num_batches_tracked
    end
    if momentum == false then momentum = 0 end -- no running update: unread
    return nn.batch_norm(x, self.running_mean, self.running_var, {weight = self.weight, bias = self.bias,
      training = self.training or not self.track_running_stats, momentum = momentum, eps = self.eps})
  end
  -- A state_dict without num_batches_tracked (PyTorch's before it had one)
  -- loads with the count at 0, as PyTorch's does (not reported missing).
  -- _batches bounds the count for its f32 (set at a load, counted after).
  c._optional_buffers = {num_batches_tracked = true}
  after_load[c] = function(self)
    if self.track_running_stats then
      local v = self.num_batches_tracked:item()
      check(v >= 0 and v == math.floor(v) and v <= 2^24, name, "num_batches_tracked must be a whole number in 0..2^24, got %s", tostring(v))
      self._batches = v
    end
  end
  c.describe = function(self) return string.format("%s(%d)", name, self.num_features) end
  nn[name] = c
end
batch_norm_module("BatchNorm1d", {2, 3})
batch_norm_module("BatchNorm2d", {4})

-- GroupNorm(groups, C [, {eps=1e-5, affine=true}]).
nn.GroupNorm = class("GroupNorm")
function nn.GroupNorm:init(groups, n, opts)
  opts = opts or {}
  check(type(groups) == "number" and type(n) == "number" and groups >= 1 and n % groups == 0, "nn.GroupNorm",
    "groups %s must divide the number of channels %s", tostring(groups), tostring(n))
  known(opts, "nn.GroupNorm", {"eps", "affine"})
  self.groups, self.num_channels, self.eps = groups, n, opts.eps or 1e-5
  if opts.affine ~= false then
    self.weight = tensor.param(tensor.ones(n))
    self.bias = tensor.param(tensor.zeros(n))
  end
end
function nn.GroupNorm:forward(x)
  return nn.group_norm(x, self.groups, {weight = self.weight, bias = self.bias, eps = self.eps})
end

-- RMSNorm(normalized_shape [, {eps=, elementwise_affine=true}]), as
-- PyTorch 2.4's: eps nil is float32's machine epsilon.
nn.RMSNorm = class("RMSNorm")
function nn.RMSNorm:init(shape, opts)
  opts = opts or {}
  known(opts, "nn.RMSNorm", {"eps", "elementwise_affine"})
  if type(shape) == "number" then shape = {shape} end
  check(type(shape) == "table" and #shape >= 1, "nn.RMSNorm", "expected a size or a table of sizes")
  self.normalized_shape, self.eps = shape, opts.eps
  if opts.elementwise_affine ~= false then self.weight = tensor.param(tensor.ones(unpack(shape))) end
end
function nn.RMSNorm:forward(x)
  return nn.rms_norm(x, self.normalized_shape, {weight = self.weight, eps = self.eps})
end
