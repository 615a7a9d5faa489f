-- nn modules: parameters, state dicts, train/eval, resident weights.

tensor.manual_seed(3)
local lin = nn.Linear(3, 2)
assert(lin.weight:shape()[1] == 2 and lin.weight:shape()[2] == 3, "weight is [out, in]")
local bound = 1 / math.sqrt(3)
for _, row in ipairs(lin.weight:totable()) do
  for _, v in ipairs(row) do assert(math.abs(v) <= bound, "torch's uniform init") end
end
local y = lin(tensor{{1, 0, 0}})
local w, b = lin.weight:totable(), lin.bias:totable()
assert(math.abs(y:totable()[1][2] - (w[2][1] + b[2])) < 1e-6, "y = x wT + b")

local net = nn.Sequential{nn.Linear(2, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 3)}
local names = {}
for name in pairs(net:state_dict()) do names[#names + 1] = name end
table.sort(names)
assert(table.concat(names, ",") == "0.bias,0.weight,3.bias,3.weight", table.concat(names, ","))
assert(#net:parameters() == 4)

-- eval() turns dropout off: two evaluations agree; train() turns it on.
net:eval()
local x = tensor{{0.5, -1}, {2, 1}}
local a, b2 = net(x):totable(), net(x):totable()
assert(a[2][3] == b2[2][3])
assert(not net[3].training and net:train()[3].training)

-- Weights move to the persistent pool and keep their identity.
local p1 = net[1].weight
net:to_gpu()
assert(net[1].weight == p1 and p1:scope() == "persistent")

-- state_dict / load_state_dict round trip, and checked names and shapes.
local other = nn.Sequential{nn.Linear(2, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 3)}
other:load_state_dict(net:state_dict())
net:eval(); other:eval()
assert(net(x):totable()[1][1] == other(x):totable()[1][1], "same weights, same output")
local ok, err = pcall(other.load_state_dict, other, {["0.weight"] = tensor.zeros(8, 2)})
assert(not ok and err:find("missing parameter or buffer 0.bias"), err)
local sd = net:state_dict()
sd["9.weight"] = tensor.zeros(1)
ok, err = pcall(other.load_state_dict, other, sd)
assert(not ok and err:find("unexpected parameter or buffer 9.weight"), err)
sd["9.weight"] = nil
sd["0.weight"] = tensor.zeros(3, 3)
ok, err = pcall(other.load_state_dict, other, sd)
assert(not ok and err:find("shape"), err)

-- Embedding and LayerNorm.
local emb = nn.Embedding(5, 3)
local e = emb({2, 5, 2}):totable()
local wt = emb.weight:totable()
assert(e[1][3] == wt[2][3] and e[2][1] == wt[5][1] and e[3][2] == wt[2][2], "rows by 1-based index")
ok, err = pcall(emb, {6})
assert(not ok and err:find("out of range"), err)
local ln = nn.LayerNorm(4)
local out = ln(tensor{{1, 2, 3, 4}}):totable()[1]
local mean = (out[1] + out[2] + out[3] + out[4]) / 4
assert(math.abs(mean) < 1e-5 and math.abs(out[4] - 1.3416) < 1e-3)

-- A module trains with an optimizer over its parameters.
local model = nn.Sequential{nn.Linear(1, 1)}
local opt = optim.sgd(model:parameters(), {lr = 0.1})
local xs, ys = tensor{{1}, {2}, {3}}, tensor{{3}, {5}, {7}}
for _ = 1, 300 do
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.mse_loss(model(xs), ys) end)
  backward(loss)
  opt:step()
end
assert(math.abs(model[1].weight:item() - 2) < 0.05 and math.abs(model[1].bias:item() - 1) < 0.1)
ok, err = pcall(nn.Linear, 0, 2)
assert(not ok and err:find("nn.Linear"), err)

-- Numerics (issue 13): PyTorch's values, worked out here in double precision.
local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b)) end
local function lsm(row) -- log_softmax of a Lua row
  local m = -math.huge
  for _, v in ipairs(row) do m = math.max(m, v) end
  local s = 0
  for _, v in ipairs(row) do s = s + math.exp(v - m) end
  local out = {}
  for i, v in ipairs(row) do out[i] = v - m - math.log(s) end
  return out
end

-- log_softmax stays finite far below the row's maximum.
local lsv = tensor{{0, -200, 1e4}}:log_softmax(2):totable()[1]
assert(lsv[1] == -1e4 and lsv[2] == -10200 and lsv[3] == 0, table.concat(lsv, " "))

-- gelu is exact (erf) by default, as in PyTorch; "tanh" on request.
local phi1 = 0.5 * (1 + 0.6826894921370859) -- gelu(1) = Φ(1) = (1 + erf(1/√2)) / 2
local tanh1 = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
assert(close(tensor{1}:gelu():item(), phi1), tostring(tensor{1}:gelu():item()))
assert(close(tensor{1}:gelu("tanh"):item(), tanh1))
assert(close(tensor{1}:gelu{approximate = "tanh"}:item(), tanh1))
assert(close(nn.GELU()(tensor{1}):item(), phi1) and close(nn.GELU("tanh")(tensor{1}):item(), tanh1))
assert(close(nn.GELU{approximate = "tanh"}(tensor{1}):item(), tanh1))
assert(tostring(nn.GELU("tanh")) == "GELU(approximate='tanh')" and tostring(nn.GELU()) == "GELU()")
ok, err = pcall(nn.GELU, "fast")
assert(not ok and err:find("approximate"), err)
ok, err = pcall(function() return tensor{1}:gelu("fast") end)
assert(not ok and err:find("approximate"), err)

-- pow: integer exponents of negative bases, number bases, 0^0, x^0 on the tape.
local pw = ((-2) ^ tensor{2, 3}):totable()
assert(pw[1] == 4 and pw[2] == -8, table.concat(pw, " "))
assert(close((tensor{-1.5} ^ 17):item(), (-1.5) ^ 17))
assert((tensor{0} ^ 0):item() == 1 and (0 ^ tensor{0}):item() == 1)
local p = tensor.param(tensor{1, 2})
local l0 = with_grad_tape(function() return (p ^ 0):sum() end)
backward(l0)
assert(p.grad:totable()[1] == 0 and p.grad:totable()[2] == 0, "x^0 is on the tape with a zero gradient")
local a, b = tensor.param(tensor{2, 3}), tensor.param(tensor{3, 0.5})
backward(with_grad_tape(function() return (a ^ b):sum() end))
local ga, gb = a.grad:totable(), b.grad:totable()
assert(close(ga[1], 3 * 2 ^ 2) and close(ga[2], 0.5 * 3 ^ -0.5), table.concat(ga, " "))
assert(close(gb[1], 8 * math.log(2)) and close(gb[2], math.sqrt(3) * math.log(3)), table.concat(gb, " "))

-- clamp and relu keep NaN.
local nan = 0 / 0
local cl = tensor{nan, 5}:clamp(-1, 1):totable()
assert(cl[1] ~= cl[1] and cl[2] == 1)
local rl = tensor{nan}:relu():item()
assert(rl ~= rl)

-- cross_entropy's options, against the formula of torch 1.13.
local rows = {{1, 2, 3}, {1, 1, 1}, {0, 5, -1}}
local logits, labels, w = tensor(rows), {3, 1, 2}, {1, 2, 0.5}
local nll = {}
for i, r in ipairs(rows) do nll[i] = -lsm(r)[labels[i]] end
local none = nn.cross_entropy(logits, labels, {reduction = "none"}):totable()
for i = 1, 3 do assert(close(none[i], nll[i]), "none row " .. i) end
assert(close(nn.cross_entropy(logits, labels, {reduction = "sum"}):item(), nll[1] + nll[2] + nll[3]))
assert(close(nn.cross_entropy(logits, labels):item(), (nll[1] + nll[2] + nll[3]) / 3))
-- ignore_index is a 1-based label: rows labelled 1 count for nothing.
local ig = nn.cross_entropy(logits, labels, {ignore_index = 1, reduction = "none"}):totable()
assert(ig[2] == 0 and close(ig[1], nll[1]) and close(ig[3], nll[3]))
assert(close(nn.cross_entropy(logits, tensor{3, 1, 2}, {ignore_index = 1}):item(), (nll[1] + nll[3]) / 2))
-- class weights: the mean divides by the weights of the rows' labels.
local wl = {w[3] * nll[1], w[1] * nll[2], w[2] * nll[3]}
assert(close(nn.cross_entropy(logits, labels, {weight = tensor(w)}):item(), (wl[1] + wl[2] + wl[3]) / (w[3] + w[1] + w[2])))
-- label smoothing: (1 - e) nll + e/C * -sum(log_softmax).
local eps, sm = 0.2, 0
for i, r in ipairs(rows) do
  local s = 0
  for _, v in ipairs(lsm(r)) do s = s - v end
  sm = sm + (1 - eps) * nll[i] + eps / 3 * s
end
assert(close(nn.cross_entropy(logits, labels, {label_smoothing = eps}):item(), sm / 3))
-- probabilities need not sum to 1: the gradient is (softmax * sum(t) - t) / N.
local lp = tensor.param(tensor{{1, 2, 3}})
backward(with_grad_tape(function() return nn.cross_entropy(lp, tensor{{0.5, 0.7, 0.1}}) end))
local sm1 = {}
for i, v in ipairs(lsm{1, 2, 3}) do sm1[i] = math.exp(v) end
local gl = lp.grad:totable()[1]
for i, t in ipairs{0.5, 0.7, 0.1} do assert(close(gl[i], sm1[i] * 1.3 - t), "probability gradient " .. i) end
-- Mistakes are errors naming the 1-based row and label.
for _, bad in ipairs{
  {{3, 2.5, 1}, nil, "label 2.5 at row 2 is not an integer"},
  {tensor{3, 1.5, 1}, nil, "label 1.5 at row 2 is not an integer"},
  {{4, 1, 1}, nil, "label 4 at row 1 is out of range 1..3"},
  {{3, 0, 1}, nil, "label 0 at row 2 is out of range 1..3"},
  {labels, {reduction = "avg"}, "reduction"},
  {labels, {label_smoothing = 1.5}, "label_smoothing"},
  {labels, {ignore_index = 1.5}, "ignore_index"},
  {labels, {wieght = tensor(w)}, "unknown option wieght"},
  {labels, {weight = tensor{1, 2}}, "weight"},
  {tensor{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, {ignore_index = 1}, "ignore_index is not supported"},
} do
  ok, err = pcall(nn.cross_entropy, logits, bad[1], bad[2])
  assert(not ok and err:find(bad[3], 1, true), tostring(err))
end

-- PyTorch's options are honoured or refused: Linear's bias in a table,
-- Embedding's padding_idx (1-based; the row starts at zeros, keeps its
-- value and gets no gradient), clip_grad_norm's norm_type.
do
  assert(nn.Linear(2, 3, {bias = false}).bias == nil, "{bias=false}")
  assert(nn.Linear(2, 3, false).bias == nil and nn.Linear(2, 3, {bias = true}).bias ~= nil)
  local ok, err = pcall(nn.Linear, 2, 3, {bais = false})
  assert(not ok and err:find("unknown option bais"), err)
  local e = nn.Embedding(5, 3, {padding_idx = 2})
  for j = 1, 3 do assert(e.weight:totable()[2][j] == 0, "the padding row starts at zeros") end
  no_grad(function() e.weight[2]:fill_(7) end) -- a value of the user's: kept, not trained
  local idx = tensor({{1, 2}, {2, 4}}, {dtype = "i32"})
  local cot = tensor.randn(2, 2, 3)
  local loss = with_grad_tape(function() return (e(idx) * cot):sum() end)
  backward(loss)
  local g, out = e.weight.grad:totable(), e(idx):totable()
  local c = cot:totable()
  for j = 1, 3 do
    assert(g[2][j] == 0, "no gradient for the padding row")
    assert(math.abs(g[1][j] - c[1][1][j]) < 1e-6 and math.abs(g[4][j] - c[2][2][j]) < 1e-6, "the other rows' gradients")
    assert(out[1][2][j] == 7, "the padding row's value")
  end
  assert(nn.Embedding(5, 3, -1).padding_idx == 5, "negative padding_idx counts from the end")
  ok, err = pcall(nn.Embedding, 5, 3, {max_norm = 1})
  assert(not ok and err:find("unknown option max_norm"), err)
  local p = tensor.param(tensor{3, -4})
  backward(with_grad_tape(function() return (p * p):sum() / 2 end))
  assert(optim.clip_grad_norm({p}, 100, 1):item() == 7, "the 1-norm")
  assert(optim.clip_grad_norm({p}, 100, math.huge):item() == 4, "the inf-norm")
end

-- gelu("tanh") is PyTorch's formula, within 1e-6 of it worked in doubles
-- over [-10, 10]; dropout with p = 1 drops everything.
do
  local xs = {}
  for i = 1, 2001 do xs[i] = -10 + (i - 1) * 0.01 end
  local y = tensor(xs):gelu("tanh"):totable()
  for i, x in ipairs(xs) do
    local r = 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ^ 3)))
    assert(math.abs(y[i] - r) < 1e-6, string.format("gelu tanh at %g: %.9g vs %.9g", x, y[i], r))
  end
  local d = tensor{1, 2, 3}:dropout(1):totable()
  assert(d[1] == 0 and d[2] == 0 and d[3] == 0, "dropout p=1")
  assert(nn.Dropout(1)(tensor{4}):totable()[1] == 0)
end

-- LayerNorm's eps, elementwise_affine and bias, positional or in a table.
do
  local x = tensor{{1, 2, 4}, {0, 0, 3}}
  local plain = nn.LayerNorm(3, {elementwise_affine = false})
  assert(plain.weight == nil and plain.bias == nil and #plain:parameters() == 0)
  local ref = nn.LayerNorm(3) -- weight ones, bias zeros: the same values
  assert(plain(x):sub(ref(x)):abs():sum():item() == 0)
  assert(nn.LayerNorm({3}, 1e-3, true, false).bias == nil and nn.LayerNorm(3, {eps = 1e-3}).eps == 1e-3)
  local big = nn.LayerNorm(3, {eps = 100, elementwise_affine = false})(x):totable()
  -- row 1: mean 7/3, variance 14/9: (1 - 7/3) / sqrt(14/9 + 100)
  assert(math.abs(big[1][1] - (1 - 7 / 3) / math.sqrt(14 / 9 + 100)) < 1e-6, big[1][1])
  local ok, err = pcall(nn.LayerNorm, 3, {elementwise_afine = false})
  assert(not ok and err:find("unknown option elementwise_afine"), err)
  ok, err = pcall(nn.LayerNorm, {2, 3})
  assert(not ok and err:find("last dim only"), err)
end
