-- Recurrent layers: shapes, options, states, errors, training. Their values
-- and gradients are checked against PyTorch in tests/rnn_test.go.

tensor.manual_seed(11)
local function shape(t) return table.concat(t:shape(), "x") end
local function names_of(m)
  local out = {}
  for i, np in ipairs(m:named_parameters()) do out[i] = np[1] end
  return table.concat(out, ",")
end

-- Parameters: PyTorch's names, shapes and init bound ±1/sqrt(hidden).
local lstm = nn.LSTM(3, 5, {num_layers = 2, bidirectional = true})
assert(names_of(lstm) == "weight_ih_l0,weight_hh_l0,bias_ih_l0,bias_hh_l0," ..
  "weight_ih_l0_reverse,weight_hh_l0_reverse,bias_ih_l0_reverse,bias_hh_l0_reverse," ..
  "weight_ih_l1,weight_hh_l1,bias_ih_l1,bias_hh_l1," ..
  "weight_ih_l1_reverse,weight_hh_l1_reverse,bias_ih_l1_reverse,bias_hh_l1_reverse", names_of(lstm))
assert(shape(lstm.weight_ih_l0) == "20x3" and shape(lstm.weight_ih_l1) == "20x10" and shape(lstm.bias_hh_l1_reverse) == "20")
local bound = 1 / math.sqrt(5)
for _, p in ipairs(lstm:parameters()) do
  local a = p:abs():max():item()
  assert(a <= bound and a > 0.8 * bound, a)
end
assert(shape(nn.GRU(3, 5).weight_hh_l0) == "15x5" and shape(nn.RNN(3, 5).weight_hh_l0) == "5x5")
assert(names_of(nn.GRU(3, 5, {bias = false})) == "weight_ih_l0,weight_hh_l0")
assert(names_of(nn.LSTMCell(3, 5)) == "weight_ih,weight_hh,bias_ih,bias_hh")
assert(shape(nn.LSTMCell(3, 5).weight_ih) == "20x3" and shape(nn.GRUCell(3, 5, false).weight_hh) == "15x5")
assert(tostring(lstm) == "LSTM(3, 5, num_layers=2, bidirectional=True)", tostring(lstm))
-- proj_size (values against PyTorch in tests/rnn_test.go): h has proj_size
-- features, c hidden_size; weight_hr_l{k} follows each layer's biases.
local proj = nn.LSTM(3, 5, {num_layers = 2, proj_size = 2})
assert(tostring(proj) == "LSTM(3, 5, proj_size=2, num_layers=2)", tostring(proj))
assert(names_of(proj) == "weight_ih_l0,weight_hh_l0,bias_ih_l0,bias_hh_l0,weight_hr_l0," ..
  "weight_ih_l1,weight_hh_l1,bias_ih_l1,bias_hh_l1,weight_hr_l1", names_of(proj))
assert(shape(proj.weight_hh_l0) == "20x2" and shape(proj.weight_ih_l1) == "20x2" and shape(proj.weight_hr_l1) == "2x5")
local pout, pstate = proj(tensor.randn(4, 3, 3))
assert(shape(pout) == "4x3x2" and shape(pstate[1]) == "2x3x2" and shape(pstate[2]) == "2x3x5")
assert(tostring(nn.RNN(2, 4, {nonlinearity = "relu", batch_first = true, bias = false})) ==
  "RNN(2, 4, nonlinearity='relu', bias=False, batch_first=True)")
assert(tostring(nn.GRUCell(2, 3)) == "GRUCell(2, 3)")
-- Positional options in PyTorch's order.
local pos = nn.RNN(2, 4, 3, "relu", false, true)
assert(pos.num_layers == 3 and pos.nonlinearity == "relu" and not pos.bias and pos.batch_first)

-- Shapes: output [seq, batch, D*hidden], h_n [layers*D, batch, hidden].
local x = tensor.randn(6, 2, 3)
local out, hc = lstm(x)
assert(shape(out) == "6x2x10" and shape(hc[1]) == "4x2x5" and shape(hc[2]) == "4x2x5")
-- The state passes back in; a zero state is the default.
local out2 = lstm(x, {tensor.zeros(4, 2, 5), tensor.zeros(4, 2, 5)})
assert(out2:totable()[6][2][7] == out:totable()[6][2][7])
local gru = nn.GRU(3, 4, {batch_first = true})
local o, h = gru(tensor.randn(2, 6, 3))
assert(shape(o) == "2x6x4" and shape(h) == "1x2x4")
-- The last step's output is h_n (one layer, one direction).
assert(math.abs(o:totable()[2][6][3] - h:totable()[1][2][3]) < 1e-6)
-- Running the sequence in two halves, passing the state, is running it whole.
local seqx = tensor.randn(6, 1, 3)
local whole = nn.RNN(3, 4)
local ow = whole(seqx)
local _, h1 = whole(seqx:narrow(1, 1, 3))
local o2 = whole(seqx:narrow(1, 4, 3), h1)
assert(math.abs(ow:totable()[6][1][2] - o2:totable()[3][1][2]) < 1e-5)
-- Unbatched input: [seq, input] -> [seq, D*hidden], h_n [layers*D, hidden].
o, h = nn.RNN(3, 4, {num_layers = 2}):eval()(tensor.randn(5, 3))
assert(shape(o) == "5x4" and shape(h) == "2x4")
-- Cells: one step.
local cell = nn.LSTMCell(3, 4)
local hh, cc = cell(tensor.randn(2, 3))
assert(shape(hh) == "2x4" and shape(cc) == "2x4")
hh, cc = cell(tensor.randn(2, 3), {hh, cc})
assert(shape(hh) == "2x4")
assert(shape(nn.GRUCell(3, 4)(tensor.randn(3))) == "4" and shape(nn.RNNCell(3, 4)(tensor.randn(5, 3))) == "5x4")

-- Dropout between layers: only in train().
local drop = nn.GRU(3, 8, {num_layers = 2, dropout = 0.5})
local dx = tensor.randn(4, 2, 3)
drop:eval()
assert(drop(dx):totable()[4][1][1] == drop(dx):totable()[4][1][1])

-- Mistakes name the layer and the shape expected.
for _, bad in ipairs{
  {function() nn.LSTM(3, 4)(tensor.randn(5, 2, 2)) end, "LSTM: expected input size 3"},
  {function() nn.GRU(3, 4)(tensor.randn(5)) end, "GRU: expected an input of 3 dims"},
  {function() nn.RNN(3, 4)(tensor.randn(5, 2, 3), tensor.zeros(2, 2, 4)) end, "expected h0 of shape [1, 2, 4], got [2, 2, 4]"},
  {function() nn.LSTM(3, 4)(tensor.randn(5, 2, 3), tensor.zeros(1, 2, 4)) end, "expected hx as {h0, c0}"},
  {function() nn.LSTMCell(3, 4)(tensor.randn(2, 3), {tensor.zeros(2, 4), tensor.zeros(3, 4)}) end, "expected c of shape [2, 4]"},
  {function() nn.RNN(3, 4, {nonlinearity = "gelu"}) end, "nonlinearity must be"},
  {function() nn.RNN(3, 4, {num_layer = 2}) end, "unknown option num_layer"},
  {function() nn.GRU(3, 0) end, "hidden_size must be a positive integer"},
  {function() nn.LSTM(3, 4)({1, 2}) end, "input must be a tensor"},
  {function() nn.LSTM(3, 4, {proj_size = 4}) end, "proj_size (4) must be smaller than hidden_size (4)"},
  {function() nn.LSTM(3, 4, {proj_size = -1}) end, "proj_size must be a positive integer or zero"},
  {function() nn.GRU(3, 4, {proj_size = 2}) end, "unknown option proj_size"},
  {function() nn.LSTM(3, 4, {proj_size = 2})(tensor.randn(5, 2, 3), {tensor.zeros(1, 2, 4), tensor.zeros(1, 2, 4)}) end,
    "expected h0 of shape [1, 2, 2], got [1, 2, 4]"},
} do
  local ok, err = pcall(bad[1])
  assert(not ok and err:find(bad[2], 1, true), tostring(err))
end

-- state_dict round trip.
local copy = nn.LSTM(3, 5, {num_layers = 2, bidirectional = true})
copy:load_state_dict(lstm:state_dict())
assert(copy(x):totable()[3][1][9] == out:totable()[3][1][9])

-- An LSTM learns to output the running sum of its input (a few steps of Adam).
tensor.manual_seed(2)
local Summer = nn.Module:extend("Summer")
function Summer:init()
  self.rnn = nn.LSTM(1, 8, {batch_first = true})
  self.head = nn.Linear(8, 1)
end
function Summer:forward(v)
  local hs = self.rnn(v)
  return self.head(hs)
end
local model = Summer()
local opt = optim.adam(model:parameters(), {lr = 0.03})
local xs = tensor.rand(16, 5, 1) - 0.5
local rows = xs:totable()
for b = 1, 16 do
  local s = 0
  for t = 1, 5 do
    s = s + rows[b][t][1]
    rows[b][t][1] = s
  end
end
local ys = tensor(rows)
local first, last
for i = 1, 150 do
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.mse_loss(model(xs), ys) end)
  backward(loss)
  opt:step()
  if i == 1 then first = loss:item() end
  last = loss:item()
end
assert(last < first / 10, first .. " -> " .. last)
