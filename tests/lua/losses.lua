-- The losses of issue 12 from Lua: options, 1-based labels, gradients, errors.

local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) * (1 + math.abs(b)) end

-- nll_loss takes 1-based labels (a table or a 1-d tensor) like cross_entropy,
-- and equals cross_entropy of the logits' log_softmax.
local logits = tensor{{1, 2, 3}, {0.5, -1, 2}, {0, 0, 1}}
local logp = logits:log_softmax(2)
local ce = nn.cross_entropy(logits, {3, 1, 2}, {weight = tensor{1, 2, 0.5}, ignore_index = 2})
local nll = nn.nll_loss(logp, {3, 1, 2}, {weight = tensor{1, 2, 0.5}, ignore_index = 2})
assert(near(ce:item(), nll:item()), ce:item() .. " vs " .. nll:item())
assert(near(nn.nll_loss(logp, tensor{3, 1, 2}, {reduction = "sum"}):item(),
  -(logp:totable()[1][3] + logp:totable()[2][1] + logp:totable()[3][2])))
local per_row = nn.nll_loss(logp, {3, 1, 2}, {reduction = "none"}):totable()
assert(#per_row == 3 and near(per_row[2], -logp:totable()[2][1]))

-- binary_cross_entropy_with_logits is finite at ±100 and its gradient is
-- sigmoid(x) - y over the count.
local x = tensor.param(tensor{-100, 0, 100})
local loss = with_grad_tape(function() return nn.binary_cross_entropy_with_logits(x, tensor{1, 0.5, 0}) end)
assert(near(loss:item(), (200 + math.log(2)) / 3), tostring(loss:item()))
backward(loss)
local g = x.grad:totable()
assert(near(g[1], -1 / 3) and near(g[2], 0) and near(g[3], 1 / 3))
local pw = nn.binary_cross_entropy_with_logits(tensor{{0, 0}}, tensor{{1, 1}}, {pos_weight = tensor{2, 3}, reduction = "sum"})
assert(nn.bce_with_logits(tensor{{0, 0}}, tensor{{1, 1}}, {pos_weight = tensor{2, 3}, reduction = "sum"}):item() == pw:item(), "the short name is the same loss")
assert(near(pw:item(), 5 * math.log(2)), pw:item())

-- l1, smooth_l1 (beta) and huber (delta), "none" keeps the shape.
local a, b = tensor{{0, 3}, {-0.5, 1}}, tensor{{0, 1}, {0, 1.5}}  -- d: 0, 2, -0.5, -0.5
assert(near(nn.l1_loss(a, b):item(), 3 / 4))
assert(near(nn.smooth_l1_loss(a, b, {reduction = "sum"}):item(), 1.5 + 0.125 + 0.125))
assert(near(nn.smooth_l1_loss(a, b, {reduction = "sum", beta = 4}):item(), (4 + 0.25 + 0.25) / 8))
assert(near(nn.huber_loss(a, b, {reduction = "sum", delta = 0.25}):item(), 0.25 * (2 - 0.125) + 2 * 0.25 * (0.5 - 0.125)))
local none = nn.huber_loss(a, b, {reduction = "none"})
assert(none:shape()[1] == 2 and none:shape()[2] == 2)

-- kl_div: a zero target adds nothing (0 log 0 = 0); batchmean divides by rows.
local q = tensor{{0.5, 0.5, 0}, {0.25, 0.25, 0.5}}
local lp = tensor{{0.2, 0.3, 0.5}, {0.3, 0.3, 0.4}}:log()
local want = (0.5 * math.log(0.5 / 0.2) + 0.5 * math.log(0.5 / 0.3)
  + 0.25 * math.log(0.25 / 0.3) * 2 + 0.5 * math.log(0.5 / 0.4)) / 2
assert(near(nn.kl_div(lp, q, {reduction = "batchmean"}):item(), want, 1e-4))
local q2 = tensor{{0.5, 0.25, 0.25}, {0.25, 0.25, 0.5}}
assert(near(nn.kl_div(lp, q2:log(), {reduction = "sum", log_target = true}):item(),
  nn.kl_div(lp, q2, {reduction = "sum"}):item(), 1e-4))
assert(near(nn.kl_div(lp, q):item(), want * 2 / 6, 1e-4))

-- Mistakes are errors naming the loss.
for _, c in ipairs({
  {function() return nn.nll_loss(logp, {4, 1, 1}) end, "nll_loss: label 4 at row 1 is out of range 1..3"},
  {function() return nn.nll_loss(logp, {1.5, 1, 1}) end, "nll_loss: label 1.5 at row 1 is not an integer"},
  {function() return nn.nll_loss(logp, logp) end, "nll_loss: target must be 1%-based labels"},
  {function() return nn.l1_loss(a, b, {reduction = "avg"}) end, "l1_loss: reduction must be"},
  {function() return nn.smooth_l1_loss(a, b, {beta = -1}) end, "beta must be >= 0"},
  {function() return nn.huber_loss(a, b, {delta = 0}) end, "delta must be > 0"},
  {function() return nn.huber_loss(a, tensor{1, 2}) end, "input shape 2x2 and target shape 2 differ"},
  {function() return nn.kl_div(lp, q, {log_targets = true}) end, "unknown option log_targets"},
  {function() return nn.binary_cross_entropy_with_logits(a, b, {pos_weight = 2}) end, "option pos_weight must be a tensor"},
}) do
  local ok, err = pcall(c[1])
  assert(not ok and tostring(err):find(c[2]), tostring(err))
end

-- mse_loss and bce_loss honour reduction and weight (PyTorch's values:
-- F.mse_loss(p, t, reduction="sum") = 0.14 for these; bce by hand), and
-- refuse what they do not take.
do
  local p, t = tensor{0.2, 0.7, 0.4}, tensor{0.1, 1, 0}
  local function near(a, b) return math.abs(a - b) < 1e-6 * math.max(1, math.abs(b)) end
  assert(near(nn.mse_loss(p, t, {reduction = "sum"}):item(), 0.01 + 0.09 + 0.16))
  assert(near(nn.mse_loss(p, t):item(), 0.26 / 3))
  assert(nn.mse_loss(p, t, {reduction = "none"}):numel() == 3)
  local bce = {-(0.1 * math.log(0.2) + 0.9 * math.log(0.8)), -math.log(0.7), -math.log(0.6)}
  assert(near(nn.bce_loss(p, t, {reduction = "sum"}):item(), bce[1] + bce[2] + bce[3]))
  local none = nn.bce_loss(p, t, {reduction = "none", weight = tensor{1, 2, 3}}):totable()
  for i = 1, 3 do assert(near(none[i], i * bce[i]), "bce none " .. i) end
  for _, c in ipairs({
    {function() return nn.mse_loss(p, t, {reducton = "sum"}) end, "unknown option reducton"},
    {function() return nn.bce_loss(p, t, {reduction = "avg"}) end, "reduction must be"},
    {function() return p:matmul(t, t) end, "takes two tensors, got 3"},
  }) do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2], 1, true), tostring(err))
  end
  -- F.linear's bias
  local x, w, b = tensor{{1, 2}}, tensor{{1, 0}, {0, 1}, {1, 1}}, tensor{10, 20, 30}
  local y = tensor.linear(x, w, b):totable()[1]
  assert(y[1] == 11 and y[2] == 22 and y[3] == 33, table.concat(y, ","))
end

-- The loss modules hold their options and give their functionals' values
-- and gradients; a class weight is a buffer in the state_dict, as
-- PyTorch's; positional arguments and unknown options are refused.
do
  tensor.manual_seed(3)
  local x, p, labels = tensor.randn(4, 3), tensor.rand(4, 3), {1, 3, 2, 2}
  local w = tensor{0.5, 2, 1}
  local pairs_ = {
    {nn.MSELoss{reduction = "sum"}, function(a) return nn.mse_loss(a, p, {reduction = "sum"}) end, p},
    {nn.L1Loss(), function(a) return nn.l1_loss(a, p) end, p},
    {nn.SmoothL1Loss{beta = 0.5}, function(a) return nn.smooth_l1_loss(a, p, {beta = 0.5}) end, p},
    {nn.HuberLoss{delta = 0.3, reduction = "none"}, function(a) return nn.huber_loss(a, p, {delta = 0.3, reduction = "none"}) end, p},
    {nn.BCEWithLogitsLoss{pos_weight = w, weight = w}, function(a) return nn.bce_with_logits(a, p, {pos_weight = w, weight = w}) end, p},
    {nn.CrossEntropyLoss{weight = w, label_smoothing = 0.2}, function(a) return nn.cross_entropy(a, labels, {weight = w, label_smoothing = 0.2}) end, labels},
    {nn.NLLLoss{ignore_index = 2}, function(a) return nn.nll_loss(a:log_softmax(2), labels, {ignore_index = 2}) end, labels, true},
    {nn.KLDivLoss{reduction = "batchmean"}, function(a) return nn.kl_div(a:log_softmax(2), p, {reduction = "batchmean"}) end, p, true},
  }
  for i, c in ipairs(pairs_) do
    local a1, a2 = tensor.param(x:clone()), tensor.param(x:clone())
    local l1 = with_grad_tape(function()
      local input = c[4] and a1:log_softmax(2) or a1
      return c[1](input, c[3]):sum()
    end)
    backward(l1)
    local v1 = l1:item()
    local l2 = with_grad_tape(function() return c[2](a2):sum() end)
    backward(l2)
    assert(math.abs(v1 - l2:item()) < 1e-6, i .. ": " .. v1 .. " vs " .. l2:item())
    assert((a1.grad - a2.grad):abs():max():item() < 1e-6, i .. ": gradients")
  end
  local keys = {}
  for k in pairs(nn.BCEWithLogitsLoss{pos_weight = w, weight = w}:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  assert(table.concat(keys, ",") == "pos_weight,weight", table.concat(keys, ","))
  local crit = nn.CrossEntropyLoss{label_smoothing = 0.1}
  assert(crit.label_smoothing == 0.1 and crit.reduction == "mean" and tostring(crit) == "CrossEntropyLoss()")
  for _, c in ipairs{
    {function() return nn.MSELoss(true) end, "nn.MSELoss: takes an options table"},
    {function() return nn.L1Loss{beta = 1} end, "nn.L1Loss: unknown option beta %(expected reduction%)"},
    {function() return nn.NLLLoss{reduction = "avg"} end, "nn.NLLLoss: reduction must be"},
    {function() return nn.CrossEntropyLoss{weight = {1, 2}} end, "nn.CrossEntropyLoss: weight must be a tensor"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]) and tostring(err):find("losses%.lua:%d+:"), tostring(err))
  end
end

-- nn.one_hot as F.one_hot with 1-based labels (torch 1.13: one_hot([2, 0,
-- 1]) is [[0,0,1],[1,0,0],[0,1,0]], one_hot([[0, 3]], 5) of shape 1x2x5).
do
  local function s(t)
    local r = {}
    for i, row in ipairs(t:totable()) do r[i] = table.concat(row, ",") end
    return table.concat(r, ";")
  end
  assert(s(nn.one_hot({3, 1, 2})) == "0,0,1;1,0,0;0,1,0")
  local o = nn.one_hot(tensor{{1, 4}}:int(), 5)
  assert(o:dim() == 3 and o:size(3) == 5 and o:dtype() == "i32" and s(o[1]) == "1,0,0,0,0;0,0,0,1,0")
  for _, c in ipairs{
    {function() return nn.one_hot({0, 1}) end, "nn.one_hot: labels must be in 1..1 %(1%-based%)"},
    {function() return nn.one_hot({1.5}) end, "labels must be integers"},
    {function() return nn.one_hot({3}, 2) end, "labels must be in 1..2"},
    {function() return nn.one_hot({1}, 0) end, "num_classes must be a positive integer"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]), tostring(err))
  end
end
