-- Convolution, pooling and normalisation layers as a script uses them. The
-- values are PyTorch's (worked out by hand here; core/testdata/torch_conv.json
-- holds the full reference cases).

local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) * (1 + math.abs(b)) end

local function flat(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then for _, x in ipairs(v) do walk(x) end else out[#out + 1] = v end
  end
  walk(t:totable())
  return out
end

local function all_close(t, want, msg)
  local got = flat(t)
  assert(#got == #want, msg .. ": " .. #got .. " values, expected " .. #want)
  for i = 1, #want do assert(close(got[i], want[i]), msg .. ": element " .. i .. " is " .. got[i] .. ", expected " .. want[i]) end
end

-- conv2d: a 1x1x3x3 input, a 2x2 kernel, padding 1; every pixel is under all
-- four kernel elements, so its gradient is the kernel's sum.
local x = tensor.param(tensor{{{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}}})
local w = tensor.param(tensor{{{{1, -1}, {2, 0.5}}}})
local b = tensor.param(tensor{0.25})
local y = nn.conv2d(x, w, b, {padding = 1})
assert(y:shape()[3] == 4 and y:shape()[4] == 4, "output 4x4")
-- y[1][1] = 0.5 * x[1][1] + b; y[2][2] = 1*1 - 1*2 + 2*4 + 0.5*5 + b
assert(close(y:totable()[1][1][1][1], 0.75) and close(y:totable()[1][1][2][2], 9.75))
backward(with_grad_tape(function() return nn.conv2d(x, w, b, {padding = 1}):sum() end))
for _, g in ipairs(flat(x.grad)) do assert(close(g, 2.5), "input gradient " .. g) end
assert(close(b.grad:item(), 16), "bias gradient: one per output")
all_close(w.grad, {45, 45, 45, 45}, "weight gradient: each kernel element sees every pixel")

-- stride, dilation, groups and no bias; conv1d.
local xs = tensor.ones(2, 4, 7, 6)
local yg = nn.conv2d(xs, tensor.ones(6, 2, 3, 2), {stride = {2, 1}, dilation = {1, 2}, groups = 2})
assert(table.concat(yg:shape(), ",") == "2,6,3,4", table.concat(yg:shape(), ","))
assert(close(yg:totable()[2][6][3][4], 12), "2 channels x 3 x 2 ones")
local y1 = nn.conv1d(tensor.ones(1, 2, 5), tensor.ones(3, 2, 3), tensor{1, 2, 3}, {stride = 2, padding = 1})
assert(table.concat(y1:shape(), ",") == "1,3,3")
all_close(y1, {5, 7, 5, 6, 8, 6, 7, 9, 7}, "conv1d with padding")

-- Clear errors, before ggml is reached.
local ok, err = pcall(nn.conv2d, tensor.ones(1, 3, 5, 5), tensor.ones(2, 2, 3, 3))
assert(not ok and err:find("conv2d") and err:find("input 1x3x5x5"), err)
ok, err = pcall(nn.conv2d, tensor.ones(1, 4, 5, 5), tensor.ones(3, 2, 3, 3), {groups = 2})
assert(not ok and err:find("groups 2"), err)
ok, err = pcall(nn.conv2d, tensor.ones(1, 1, 2, 2), tensor.ones(1, 1, 3, 3))
assert(not ok and err:find("larger than the input 2x2"), err)
ok, err = pcall(nn.conv2d, tensor.ones(1, 1, 4, 4), tensor.ones(1, 1, 3, 3), {strid = 2})
assert(not ok and err:find("unknown option strid"), err)
ok, err = pcall(nn.conv2d, tensor.ones(1, 1, 4, 4), tensor.ones(1, 1, 3, 3), {stride = 1.5})
assert(not ok and err:find("stride"), err)

-- Modules: shapes and PyTorch's init bound 1/sqrt(fan_in).
tensor.manual_seed(12)
local conv = nn.Conv2d(4, 6, 3, {padding = 1, groups = 2})
assert(table.concat(conv.weight:shape(), ",") == "6,2,3,3")
local bound = 1 / math.sqrt(2 * 9)
for _, v in ipairs(flat(conv.weight)) do assert(math.abs(v) <= bound) end
for _, v in ipairs(flat(conv.bias)) do assert(math.abs(v) <= bound) end
assert(#conv:parameters() == 2)
assert(#nn.Conv1d(3, 5, 2, {bias = false}):parameters() == 1)
assert(table.concat(conv(tensor.ones(2, 4, 5, 5)):shape(), ",") == "2,6,5,5")

-- Pooling: max (ties to the first), average counting the padding, adaptive.
local p = tensor.param(tensor{{{{1, 3, 3, 0}, {2, 0, 1, 5}, {0, 4, 2, 2}, {1, 1, 6, 0}}}})
all_close(nn.max_pool2d(p, 2), {3, 5, 4, 6}, "max_pool2d")
backward(with_grad_tape(function() return nn.max_pool2d(p, 2):sum() end))
all_close(p.grad, {0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0}, "max gradient to the first maximum")
all_close(nn.avg_pool2d(tensor.ones(1, 1, 2, 2), 2, {stride = 1, padding = 1}), {0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}, "count_include_pad")
all_close(nn.AdaptiveAvgPool2d({2, 1})(tensor{{{{1, 2}, {3, 4}, {5, 6}, {7, 8}}}}), {2.5, 6.5}, "adaptive")
ok, err = pcall(nn.adaptive_avg_pool2d, tensor.ones(1, 1, 5, 4), 2)
assert(not ok and err:find("adaptive_avg_pool2d") and err:find("not a multiple"), err)
assert(table.concat(nn.MaxPool2d(3, {stride = 2, padding = 1})(tensor.ones(1, 2, 7, 6)):shape(), ",") == "1,2,4,3")
-- PyTorch's pooling options (values against PyTorch in core/ops_conv_test.go).
local r = tensor.arange(1, 6):reshape(1, 1, 5)
all_close(nn.max_pool1d(r, 2, {ceil_mode = true}), {2, 4, 5}, "ceil_mode keeps the last, partial window")
all_close(nn.avg_pool1d(r, 2, {ceil_mode = true}), {1.5, 3.5, 5}, "ceil_mode: a window past the input averages what it holds")
all_close(nn.max_pool1d(r, 2, {stride = 1, dilation = 2}), {3, 4, 5}, "dilation")
all_close(nn.avg_pool1d(r, 3, {stride = 2, padding = 1, count_include_pad = false}), {1.5, 3, 4.5}, "count_include_pad = false")
all_close(nn.avg_pool2d(tensor.ones(1, 1, 2, 2), 2, {divisor_override = 3}), {4 / 3}, "divisor_override")
all_close(nn.AvgPool2d(2, {stride = 1, padding = 1, count_include_pad = false})(tensor.ones(1, 1, 2, 2)), {1, 1, 1, 1, 1, 1, 1, 1, 1}, "AvgPool2d options")
assert(table.concat(nn.MaxPool2d(2, {ceil_mode = true, dilation = 1})(tensor.ones(1, 5, 7)):shape(), ",") == "1,3,4")
assert(table.concat(nn.MaxPool1d(2, {stride = 3, padding = 1, ceil_mode = true})(tensor.ones(2, 7)):shape(), ",") == "2,3")
for _, bad in ipairs{
  {function() nn.max_pool2d(tensor.ones(1, 1, 4, 4), 2, {count_include_pad = false}) end, "unknown option count_include_pad"},
  {function() nn.avg_pool2d(tensor.ones(1, 1, 4, 4), 2, {dilation = 2}) end, "unknown option dilation"},
  {function() nn.avg_pool2d(tensor.ones(1, 1, 4, 4), 2, {divisor_override = 0}) end, "divisor_override must be a positive integer"},
  {function() nn.max_pool2d(tensor.ones(1, 1, 4, 4), 2, {dilation = 0}) end, "max_pool2d: kernel size, stride and dilation must be positive"},
  {function() nn.max_pool1d(tensor.ones(1, 1, 4), {2, 3}) end, "integers for a 1-d pooling"},
  {function() nn.max_pool1d(tensor.ones(1, 1, 4, 4), 2) end, "max_pool1d: input of shape"},
  {function() nn.MaxPool2d(2, {divisor_override = 2}) end, "unknown option divisor_override"},
  {function() nn.max_pool2d(tensor.ones(1, 1, 2, 2), 3) end, "larger than the input 2x2"},
} do
  ok, err = pcall(bad[1])
  assert(not ok and err:find(bad[2], 1, true), tostring(err))
end

-- BatchNorm: batch statistics and running updates in train(), running
-- statistics in eval().
local bn = nn.BatchNorm1d(2)
local xb = tensor{{1, 10}, {3, 20}}
all_close(bn(xb), {-1, -1, 1, 1}, "normalised by the batch (biased variance)")
-- running_mean = 0.9*0 + 0.1*mean; running_var = 0.9*1 + 0.1*unbiased var
all_close(bn.running_mean, {0.2, 1.5}, "running mean")
all_close(bn.running_var, {0.9 + 0.1 * 2, 0.9 + 0.1 * 50}, "running var")
bn:eval()
all_close(bn(tensor{{0.2, 1.5}}), {0, 0}, "eval uses the running mean")
bn:train()
local bn2 = nn.BatchNorm2d(3)
assert(#bn2:parameters() == 2)
local yb = bn2(tensor.randn(4, 3, 2, 2))
assert(math.abs(yb:mean():item()) < 1e-5)
ok, err = pcall(bn2, tensor.ones(3, 2))
assert(not ok and err:find("BatchNorm2d"), err)

-- GroupNorm and RMSNorm.
all_close(nn.GroupNorm(1, 2)(tensor{{1, 3}}), {-1, 1}, "group_norm", 1e-4)
local rms = nn.RMSNorm(2)
all_close(rms(tensor{{3, 4}}), {3 / math.sqrt(12.5), 4 / math.sqrt(12.5)}, "rms_norm")
all_close(nn.rms_norm(tensor{{3, 4}}, {2}, {eps = 12.5}), {3 / 5, 4 / 5}, "rms_norm eps")
ok, err = pcall(nn.group_norm, tensor.ones(2, 3, 4), 2)
assert(not ok and err:find("group_norm") and err:find("groups 2"), err)

-- A small convolutional network trains.
tensor.manual_seed(1)
local net = nn.Sequential{nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(4, 2, 3), nn.AdaptiveAvgPool2d(1)}
local data = tensor.randn(8, 1, 8, 8)
local target = tensor.randn(8, 2, 1, 1)
local opt = optim.adam(net:parameters(), {lr = 0.02})
local first, last
for i = 1, 30 do
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.mse_loss(net(data), target) end)
  backward(loss)
  opt:step()
  last = loss:item()
  first = first or last
end
assert(last < 0.7 * first, "loss " .. first .. " -> " .. last)
net:eval()
assert(table.concat(net(data):shape(), ",") == "8,2,1,1")

-- Parameters and buffers: running statistics are not parameters, but they
-- are state (in the state dict, as PyTorch's buffers).
local seq = nn.Sequential{nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.GroupNorm(1, 2), nn.RMSNorm({2, 2})}
local names = {}
for name in pairs(seq:state_dict()) do names[#names + 1] = name end
table.sort(names)
assert(table.concat(names, ",") == "0.bias,0.weight,1.bias,1.num_batches_tracked,1.running_mean,1.running_var,1.weight,2.bias,2.weight,3.weight", table.concat(names, ","))
assert(#seq:parameters() == 7)
assert(tostring(seq[1]) == "Conv2d(1, 2, kernel_size=3)", tostring(seq[1]))
local out = seq(tensor.randn(2, 1, 4, 4))
assert(table.concat(out:shape(), ",") == "2,2,2,2")

-- Pooling modules print their settings, as PyTorch's.
assert(tostring(nn.MaxPool2d(3, {stride = 2})) == "MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)", tostring(nn.MaxPool2d(3, {stride = 2})))
assert(tostring(nn.MaxPool2d({2, 3}, {dilation = 2, ceil_mode = true})) == "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=2, ceil_mode=True)")
assert(tostring(nn.AvgPool1d(3)) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))", tostring(nn.AvgPool1d(3)))
assert(tostring(nn.AvgPool2d({2, 3})) == "AvgPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0)")

-- PyTorch's positional forms, beside the options table: Conv2d(in, out, k,
-- stride, padding, dilation, groups, bias), MaxPool2d(k, stride, padding,
-- dilation, return_indices, ceil_mode), AvgPool2d(k, stride, padding, ...),
-- BatchNorm2d(n, eps, momentum, affine).
do
  local c = nn.Conv2d(1, 4, 3, 2, 1, 1, 1, false)
  assert(c.opts.stride == 2 and c.opts.padding == 1 and c.bias == nil)
  local x = tensor.randn(1, 1, 8, 8)
  assert(table.concat(c(x):shape(), "x") == "1x4x4x4")
  local ct = nn.Conv2d(1, 4, 3, {stride = 2, padding = 1, bias = false})
  no_grad(function() ct.weight:copy_(c.weight) end)
  assert(ct(x):sub(c(x)):abs():sum():item() == 0, "the same layer as its options table")
  assert(tostring(nn.MaxPool2d(3, 2)) == "MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)")
  assert(tostring(nn.AvgPool2d(2, 2, 1)) == "AvgPool2d(kernel_size=2, stride=2, padding=1)")
  local bn = nn.BatchNorm2d(4, 1e-3, 0.2, false)
  assert(bn.eps == 1e-3 and bn.momentum == 0.2 and bn.weight == nil)
  for _, bad in ipairs({
    {function() return nn.MaxPool2d(3, 2, 0, 1, true) end, "unknown option return_indices"},
    {function() return nn.Conv2d(1, 2, 3, 1, 0, 1, 1, true, "zeros") end, "takes at most 5 arguments"},
    {function() return nn.BatchNorm2d(4, {eps = 1e-3}, 2) end, "give the options as one table"},
  }) do
    local ok, err = pcall(bad[1])
    assert(not ok and err:find(bad[2], 1, true), tostring(err))
  end
end

-- momentum=false is PyTorch's momentum=None: the running statistics are the
-- average of every training batch (factor 1/num_batches_tracked). Values
-- from torch 1.13, BatchNorm1d(3, momentum=None) over the three batches,
-- then eval() of the first. A string is refused.
do
  local xs = {tensor{{1, 2, 3}, {4, 0, -1}}, tensor{{0.5, -2, 1}, {2, 2, 2}, {-1, 1, 0}}, tensor{{3, 3, -3}, {1, -1, 5}}}
  for _, bn in ipairs({nn.BatchNorm1d(3, {momentum = false}), nn.BatchNorm1d(3, 1e-5, false)}) do
    for _, x in ipairs(xs) do bn(x) end
    all_close(bn.running_mean, {1.6666666269302368, 0.7777777910232544, 1.0}, "momentum=None running_mean")
    all_close(bn.running_var, {2.9166665077209473, 4.777777671813965, 13.666666984558105}, "momentum=None running_var")
    assert(bn.num_batches_tracked:item() == 3)
    bn:eval()
    all_close(bn(xs[1]), {-0.3903593420982361, 0.5591608285903931, 0.5410016179084778,
      1.3662577867507935, -0.3558296263217926, -0.5410016179084778}, "eval after momentum=None")
  end
  local ok, err = pcall(function() return nn.BatchNorm1d(3, {momentum = "none"}) end)
  assert(not ok and err:find("momentum must be a number, or false", 1, true), tostring(err))
end

-- nn.batch_norm and nn.group_norm take PyTorch's positional order
-- (F.batch_norm(input, running_mean, running_var, weight, bias, training,
-- momentum, eps), F.group_norm(input, num_groups, weight, bias, eps)) as
-- well as options: the same values and running statistics; a wrong type
-- or too many arguments is an error naming the function.
do
  tensor.manual_seed(1)
  local x, w, b = tensor.randn(4, 3), tensor.randn(3), tensor.randn(3)
  local rm1, rv1, rm2, rv2 = tensor.zeros(3), tensor.ones(3), tensor.zeros(3), tensor.ones(3)
  local a = nn.batch_norm(x, rm1, rv1, {weight = w, bias = b, training = true, momentum = 0.3, eps = 1e-3})
  local c = nn.batch_norm(x, rm2, rv2, w, b, true, 0.3, 1e-3)
  assert((a - c):abs():max():item() == 0 and (rm1 - rm2):abs():max():item() == 0 and (rv1 - rv2):abs():max():item() == 0)
  assert((rm1 - tensor.zeros(3)):abs():max():item() > 0, "training updated the running mean")
  local e = nn.batch_norm(x, rm1, rv1) -- eval, defaults
  assert((e - nn.batch_norm(x, rm1, rv1, nil, nil, false, 0.1, 1e-5)):abs():max():item() == 0)
  local y = tensor.randn(2, 4, 3)
  local g1 = nn.group_norm(y, 2, {weight = tensor.ones(4) * 2, bias = tensor.ones(4), eps = 1e-3})
  local g2 = nn.group_norm(y, 2, tensor.ones(4) * 2, tensor.ones(4), 1e-3)
  assert((g1 - g2):abs():max():item() == 0)
  local ok, err = pcall(nn.batch_norm, x, rm1, rv1, w, b, "yes")
  assert(not ok and err:find("batch_norm: argument 6 %(training%) must be a boolean"), err)
  ok, err = pcall(nn.batch_norm, x, rm1, rv1, {training = true}, 1)
  assert(not ok and err:find("nothing may follow it"), err)
  ok, err = pcall(nn.group_norm, y, 2, nil, nil, 1e-3, 5)
  assert(not ok and err:find("group_norm: 6 arguments given, at most 5"), err)
end

-- conv_transpose2d by hand: each input pixel times the kernel, placed at
-- stride steps and added where patches overlap (torch's values: the cases
-- of core/testdata/torch_conv_transpose.json).
do
  local xt = tensor.param(tensor{{{{1, 2}, {3, 4}}}})
  local wt = tensor.param(tensor{{{{1, 0}, {0, 1}}}})
  all_close(nn.conv_transpose2d(xt, wt), {1, 2, 0, 3, 5, 2, 0, 3, 4}, "stride 1: overlapping patches add")
  all_close(nn.conv_transpose2d(xt, wt, {stride = 2}), {1, 0, 2, 0, 0, 1, 0, 2, 3, 0, 4, 0, 0, 3, 0, 4}, "stride 2")
  local yo = nn.conv_transpose2d(xt, wt, tensor{0.5}, {stride = 2, output_padding = 1, padding = {1, 0}})
  assert(table.concat(yo:shape(), ",") == "1,1,3,5", table.concat(yo:shape(), ","))
  backward(with_grad_tape(function() return nn.conv_transpose2d(xt, wt, {stride = 2}):sum() end))
  all_close(xt.grad, {2, 2, 2, 2}, "each pixel meets the kernel's sum")
  all_close(wt.grad, {10, 10, 10, 10}, "each kernel element meets every pixel")
  local y1 = nn.conv_transpose1d(tensor{{{1, 2, 3}}}, tensor{{{1, 1}}}, {stride = 2, output_padding = 1})
  all_close(y1, {1, 1, 2, 2, 3, 3, 0}, "conv_transpose1d: output_padding adds a zero at the end")
  local ok, err = pcall(nn.conv_transpose2d, xt, wt, {stride = 2, output_padding = 2})
  assert(not ok and tostring(err):find("output_padding"), tostring(err))
  ok, err = pcall(nn.conv_transpose1d, tensor{{{1, 2, 3}}}, tensor{{{1, 1}}}, {stride = {2, 1}})
  assert(not ok and tostring(err):find("integers for a 1%-d"), tostring(err))

  -- Modules: DCGAN's upsampling layer, positional in torch's order; the
  -- weight is [in, out/groups, kh, kw]; output_size picks the output padding.
  local up = nn.ConvTranspose2d(4, 2, 4, 2, 1, 0, 1, false)
  assert(table.concat(up.weight:shape(), ",") == "4,2,4,4" and up.bias == nil)
  assert(table.concat(up(tensor.ones(1, 4, 3, 3)):shape(), ",") == "1,2,6,6")
  local m = nn.ConvTranspose2d(2, 3, 3, {stride = 2, padding = 1})
  local bound = 1 / math.sqrt(3 * 3 * 3)
  assert(m.weight:abs():max():item() <= bound and m.bias:abs():max():item() <= bound, "torch's init bound")
  local xin = tensor.ones(1, 2, 3, 4)
  assert(table.concat(m(xin):shape(), ",") == "1,3,5,7")
  assert(table.concat(m(xin, {6, 8}):shape(), ",") == "1,3,6,8")
  ok, err = pcall(m, xin, {7, 8})
  assert(not ok and tostring(err):find("outside 5..6"), tostring(err))
  local m1 = nn.ConvTranspose1d(2, 4, 3, {groups = 2})
  assert(table.concat(m1.weight:shape(), ",") == "2,2,3")
  assert(table.concat(m1(tensor.ones(2, 2, 5)):shape(), ",") == "2,4,7")
end
