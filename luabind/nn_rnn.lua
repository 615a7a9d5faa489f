-- Recurrent layers as torch.nn's, written as modules of nn (nn.Module:extend).
--
--   nn.RNN(input_size, hidden_size [, opts]), nn.GRU(...), nn.LSTM(...)
--     opts: {num_layers=1, nonlinearity="tanh" (RNN only; or "relu"),
--            bias=true, batch_first=false, dropout=0, bidirectional=false,
--            proj_size=0 (LSTM only)},
--     or those positionally, in PyTorch's order.
--     rnn(x [, h0])          returns output, h_n        (two results)
--     gru(x [, h0])          returns output, h_n
--     lstm(x [, {h0, c0}])   returns output, {h_n, c_n} (the second a table,
--                            as PyTorch's tuple: it can be passed back in)
--     x is [seq, batch, input] ([batch, seq, input] with batch_first) or
--     unbatched [seq, input]; output is [seq, batch, D*hidden] (D = 2 when
--     bidirectional, the directions concatenated), h_n [num_layers*D,
--     batch, hidden] (unbatched: without the batch dim); h0 defaults to
--     zeros. Dropout (in train() only) applies to each layer's output but
--     the last. An LSTM with proj_size > 0 projects each step's h down to
--     proj_size features (h = W_hr h, W_hr [proj_size, hidden]): output,
--     h0 and h_n then have proj_size features, c0 and c_n hidden_size.
--   nn.RNNCell(input_size, hidden_size [, bias [, nonlinearity]]),
--   nn.GRUCell(input_size, hidden_size [, bias]), nn.LSTMCell(...)
--     cell(x [, h])          returns h'                 (RNNCell, GRUCell)
--     cell(x [, {h, c}])     returns h', c'             (LSTMCell, two results)
--     x is [batch, input] or unbatched [input].
--
-- Parameters have PyTorch's names and layouts (weight_ih_l0 [G*hidden,
-- input], weight_hh_l0 [G*hidden, hidden], bias_ih_l0, bias_hh_l0, then
-- weight_hr_l0 with proj_size, then ..._reverse for the backward
-- direction, layer by layer; the cells' weight_ih, weight_hh, bias_ih,
-- bias_hh), with the gates stacked in
-- PyTorch's order (GRU r, z, n; LSTM i, f, g, o), so a PyTorch state dict
-- loads as it is; all start uniform in ±1/sqrt(hidden_size), as PyTorch's.
local nn = nn

local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 3) end
end

local gate_count = {RNN_TANH = 1, RNN_RELU = 1, GRU = 3, LSTM = 4}

-- step is one time step of a cell: xw is x W_ihᵀ + b_ih (computed for the
-- whole sequence at once), h (and c) the state; it returns h' (and c').
local function step(mode, xw, h, c, w_hh, b_hh)
  local hw = h:linear(w_hh)
  if b_hh then hw = hw + b_hh end
  if mode == "RNN_TANH" then return (xw + hw):tanh() end
  if mode == "RNN_RELU" then return (xw + hw):relu() end
  if mode == "GRU" then
    local xs, hs = xw:chunk(3, -1), hw:chunk(3, -1)
    local r = (xs[1] + hs[1]):sigmoid()
    local z = (xs[2] + hs[2]):sigmoid()
    local n = (xs[3] + r * hs[3]):tanh()
    return n + z * (h - n) -- (1 - z) n + z h
  end
  local g = (xw + hw):chunk(4, -1)
  local c2 = g[2]:sigmoid() * c + g[1]:sigmoid() * g[3]:tanh()
  return g[4]:sigmoid() * c2:tanh(), c2
end

local function uniform_param(bound, ...)
  return nn.init.uniform_(tensor.param(tensor.zeros(...)), -bound, bound)
end

local function is_tensor(fn, name, v)
  check(type(v) == "userdata" and pcall(function() return v:dim() end), fn, "%s must be a tensor, got %s", name, type(v))
  return v
end

local function shape_string(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-- ---- RNN, GRU, LSTM ----

local RNNBase = nn.Module:extend("RNNBase")
nn.RNNBase = RNNBase

local option_names = {
  RNN = {"num_layers", "nonlinearity", "bias", "batch_first", "dropout", "bidirectional"},
  GRU = {"num_layers", "bias", "batch_first", "dropout", "bidirectional"},
}
option_names.LSTM = {"num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size"}

-- setup reads (input_size, hidden_size [, opts or positional options])
-- and makes the parameters, in PyTorch's order.
function RNNBase:setup(kind, input_size, hidden_size, ...)
  local fn = "nn." .. kind
  local names = option_names[kind]
  local o = {}
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" then
    local known = {}
    for _, n in ipairs(names) do known[n] = true end
    for k in pairs(first) do
      check(known[k], fn, "unknown option %s (expected %s)", tostring(k), table.concat(names, ", "))
    end
    o = first
  else
    check(select("#", ...) <= #names, fn, "expected at most %d options, got %d", #names, select("#", ...))
    for i, n in ipairs(names) do o[n] = (select(i, ...)) end
  end
  local function positive(name, v)
    check(type(v) == "number" and v >= 1 and v % 1 == 0, fn, "%s must be a positive integer, got %s", name, tostring(v))
    return v
  end
  self.input_size = positive("input_size", input_size)
  self.hidden_size = positive("hidden_size", hidden_size)
  self.num_layers = positive("num_layers", o.num_layers or 1)
  self.nonlinearity = o.nonlinearity or "tanh"
  check(self.nonlinearity == "tanh" or self.nonlinearity == "relu", fn,
    "nonlinearity must be \"tanh\" or \"relu\", got %s", tostring(self.nonlinearity))
  self.bias = o.bias ~= false
  self.batch_first = o.batch_first == true
  self.dropout = o.dropout or 0
  check(type(self.dropout) == "number" and self.dropout >= 0 and self.dropout <= 1, fn,
    "dropout must be a number in [0, 1], got %s", tostring(self.dropout))
  self.bidirectional = o.bidirectional == true
  self.proj_size = o.proj_size or 0
  check(type(self.proj_size) == "number" and self.proj_size >= 0 and self.proj_size % 1 == 0, fn,
    "proj_size must be a positive integer or zero to disable projections, got %s", tostring(self.proj_size))
  check(self.proj_size < hidden_size, fn, "proj_size (%d) must be smaller than hidden_size (%d)", self.proj_size, hidden_size)
  -- out_size is the width of h: proj_size when projecting.
  self.out_size = self.proj_size > 0 and self.proj_size or hidden_size
  self.kind = kind
  self.mode = kind == "RNN" and (self.nonlinearity == "tanh" and "RNN_TANH" or "RNN_RELU") or kind
  local gates = gate_count[self.mode] * hidden_size
  local bound = 1 / math.sqrt(hidden_size)
  local dirs = self.bidirectional and 2 or 1
  for layer = 0, self.num_layers - 1 do
    local layer_input = layer == 0 and input_size or self.out_size * dirs
    for dir = 1, dirs do
      local suffix = "_l" .. layer .. (dir == 2 and "_reverse" or "")
      self["weight_ih" .. suffix] = uniform_param(bound, gates, layer_input)
      self["weight_hh" .. suffix] = uniform_param(bound, gates, self.out_size)
      if self.bias then
        self["bias_ih" .. suffix] = uniform_param(bound, gates)
        self["bias_hh" .. suffix] = uniform_param(bound, gates)
      end
      if self.proj_size > 0 then
        self["weight_hr" .. suffix] = uniform_param(bound, self.proj_size, hidden_size)
      end
    end
  end
end

function RNNBase:describe()
  local s = string.format("%s(%d, %d", self.kind, self.input_size, self.hidden_size)
  if self.proj_size ~= 0 then s = s .. ", proj_size=" .. self.proj_size end
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if self.kind == "RNN" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity='" .. self.nonlinearity .. "'" end
  if not self.bias then s = s .. ", bias=False" end
  if self.batch_first then s = s .. ", batch_first=True" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. self.dropout end
  if self.bidirectional then s = s .. ", bidirectional=True" end
  return s .. ")"
end

-- state checks an initial state against [layers*dirs, batch, width] (or
-- zeros when nil); unbatched, it has no batch dim. width is hidden_size,
-- or proj_size for a projected LSTM's h.
function RNNBase:state(name, h, batch, unbatched, width)
  local fn = self.kind
  local rows = self.num_layers * (self.bidirectional and 2 or 1)
  if h == nil then return tensor.zeros(rows, batch, width) end
  is_tensor(fn, name, h)
  if unbatched then
    check(h:dim() == 2 and h:size(1) == rows and h:size(2) == width, fn,
      "expected %s of shape [%d, %d] for an unbatched input, got %s", name, rows, width, shape_string(h))
    return h:unsqueeze(2)
  end
  check(h:dim() == 3 and h:size(1) == rows and h:size(2) == batch and h:size(3) == width, fn,
    "expected %s of shape [%d, %d, %d], got %s", name, rows, batch, width, shape_string(h))
  return h
end

function RNNBase:forward(input, hx)
  local fn = self.kind
  is_tensor(fn, "input", input)
  check(input:dim() == 2 or input:dim() == 3, fn,
    "expected an input of 3 dims ([seq, batch, input]) or 2 (unbatched [seq, input]), got %s", shape_string(input))
  check(input:size(input:dim()) == self.input_size, fn, "expected input size %d in the last dim, got %s",
    self.input_size, shape_string(input))
  local unbatched = input:dim() == 2
  local x = input
  if unbatched then
    x = x:unsqueeze(2)
  elseif self.batch_first then
    x = x:transpose(1, 2)
  end
  local seq, batch = x:size(1), x:size(2)
  local lstm = self.mode == "LSTM"
  local h0, c0
  if lstm then
    check(hx == nil or (type(hx) == "table" and #hx == 2), fn, "expected hx as {h0, c0}, got %s", type(hx))
    h0 = self:state("h0", hx and hx[1], batch, unbatched, self.out_size)
    c0 = self:state("c0", hx and hx[2], batch, unbatched, self.hidden_size)
  else
    h0 = self:state("h0", hx, batch, unbatched, self.hidden_size)
  end
  local dirs = self.bidirectional and 2 or 1
  local hs, cs = {}, {}
  for layer = 0, self.num_layers - 1 do
    local width = x:size(3)
    local outs = {}
    for dir = 1, dirs do
      local suffix = "_l" .. layer .. (dir == 2 and "_reverse" or "")
      local w_ih, w_hh = self["weight_ih" .. suffix], self["weight_hh" .. suffix]
      local b_ih, b_hh = self["bias_ih" .. suffix], self["bias_hh" .. suffix]
      local w_hr = self["weight_hr" .. suffix]
      -- The input's part of every step at once: [seq, batch, gates].
      local xw = x:reshape(seq * batch, width):linear(w_ih)
      if b_ih then xw = xw + b_ih end
      xw = xw:reshape(seq, batch, w_ih:size(1))
      local idx = layer * dirs + dir
      local h = h0:select(1, idx)
      local c = c0 and c0:select(1, idx)
      local ys = {} -- in the order computed: backwards for the reverse direction
      for k = 1, seq do
        local t = dir == 2 and seq - k + 1 or k
        h, c = step(self.mode, xw:select(1, t), h, c, w_hh, b_hh)
        if w_hr then h = h:linear(w_hr) end
        ys[k] = h
      end
      if dir == 2 then
        local fwd = {}
        for k = 1, seq do fwd[k] = ys[seq - k + 1] end
        ys = fwd
      end
      outs[dir] = tensor.stack(ys, 1)
      hs[#hs + 1] = h
      cs[#cs + 1] = c
    end
    x = dirs == 2 and tensor.cat(outs, 3) or outs[1]
    if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
      x = x:dropout(self.dropout, true)
    end
  end
  local h_n = tensor.stack(hs, 1)
  local c_n = lstm and tensor.stack(cs, 1)
  if unbatched then
    x = x:squeeze(2)
    h_n = h_n:squeeze(2)
    c_n = c_n and c_n:squeeze(2)
  elseif self.batch_first then
    x = x:transpose(1, 2)
  end
  if lstm then return x, {h_n, c_n} end
  return x, h_n
end

nn.RNN = RNNBase:extend("RNN")
function nn.RNN:init(...) self:setup("RNN", ...) end
nn.GRU = RNNBase:extend("GRU")
function nn.GRU:init(...) self:setup("GRU", ...) end
nn.LSTM = RNNBase:extend("LSTM")
function nn.LSTM:init(...) self:setup("LSTM", ...) end

-- ---- RNNCell, GRUCell, LSTMCell ----

local CellBase = nn.Module:extend("RNNCellBase")
nn.RNNCellBase = CellBase

function CellBase:setup(kind, input_size, hidden_size, bias, nonlinearity)
  local fn = "nn." .. kind
  for _, v in ipairs{{"input_size", input_size}, {"hidden_size", hidden_size}} do
    check(type(v[2]) == "number" and v[2] >= 1 and v[2] % 1 == 0, fn, "%s must be a positive integer, got %s", v[1], tostring(v[2]))
  end
  nonlinearity = nonlinearity or "tanh"
  check(nonlinearity == "tanh" or nonlinearity == "relu", fn,
    "nonlinearity must be \"tanh\" or \"relu\", got %s", tostring(nonlinearity))
  self.kind = kind
  self.input_size = input_size
  self.hidden_size = hidden_size
  self.bias = bias ~= false
  self.nonlinearity = nonlinearity
  self.mode = kind == "RNNCell" and (nonlinearity == "tanh" and "RNN_TANH" or "RNN_RELU")
    or (kind == "GRUCell" and "GRU" or "LSTM")
  local gates = gate_count[self.mode] * hidden_size
  local bound = 1 / math.sqrt(hidden_size)
  self.weight_ih = uniform_param(bound, gates, input_size)
  self.weight_hh = uniform_param(bound, gates, hidden_size)
  if self.bias then
    self.bias_ih = uniform_param(bound, gates)
    self.bias_hh = uniform_param(bound, gates)
  end
end

function CellBase:describe()
  local s = string.format("%s(%d, %d", self.kind, self.input_size, self.hidden_size)
  if not self.bias then s = s .. ", bias=False" end
  if self.kind == "RNNCell" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity='" .. self.nonlinearity .. "'" end
  return s .. ")"
end

function CellBase:cell_state(name, h, batch, unbatched)
  local fn = self.kind
  if h == nil then
    if unbatched then return tensor.zeros(1, self.hidden_size) end
    return tensor.zeros(batch, self.hidden_size)
  end
  is_tensor(fn, name, h)
  if unbatched then
    check(h:dim() == 1 and h:size(1) == self.hidden_size, fn,
      "expected %s of shape [%d] for an unbatched input, got %s", name, self.hidden_size, shape_string(h))
    return h:unsqueeze(1)
  end
  check(h:dim() == 2 and h:size(1) == batch and h:size(2) == self.hidden_size, fn,
    "expected %s of shape [%d, %d], got %s", name, batch, self.hidden_size, shape_string(h))
  return h
end

function CellBase:forward(input, hx)
  local fn = self.kind
  is_tensor(fn, "input", input)
  check((input:dim() == 1 or input:dim() == 2) and input:size(input:dim()) == self.input_size, fn,
    "expected an input of shape [batch, %d] or [%d], got %s", self.input_size, self.input_size, shape_string(input))
  local unbatched = input:dim() == 1
  local x = unbatched and input:unsqueeze(1) or input
  local batch = x:size(1)
  local h, c
  if self.mode == "LSTM" then
    check(hx == nil or (type(hx) == "table" and #hx == 2), fn, "expected hx as {h, c}, got %s", type(hx))
    h = self:cell_state("h", hx and hx[1], batch, unbatched)
    c = self:cell_state("c", hx and hx[2], batch, unbatched)
  else
    h = self:cell_state("h", hx, batch, unbatched)
  end
  local xw = x:linear(self.weight_ih)
  if self.bias_ih then xw = xw + self.bias_ih end
  local h2, c2 = step(self.mode, xw, h, c, self.weight_hh, self.bias_hh)
  if unbatched then
    h2 = h2:squeeze(1)
    c2 = c2 and c2:squeeze(1)
  end
  if self.mode == "LSTM" then return h2, c2 end
  return h2
end

nn.RNNCell = CellBase:extend("RNNCell")
function nn.RNNCell:init(input_size, hidden_size, bias, nonlinearity)
  self:setup("RNNCell", input_size, hidden_size, bias, nonlinearity)
end
nn.GRUCell = CellBase:extend("GRUCell")
function nn.GRUCell:init(input_size, hidden_size, bias) self:setup("GRUCell", input_size, hidden_size, bias) end
nn.LSTMCell = CellBase:extend("LSTMCell")
function nn.LSTMCell:init(input_size, hidden_size, bias) self:setup("LSTMCell", input_size, hidden_size, bias) end
