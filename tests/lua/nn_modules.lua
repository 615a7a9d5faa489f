-- Writing modules (nn.Module:extend), containers, nn.init.

tensor.manual_seed(5)
local function names_of(m)
  local out = {}
  for i, np in ipairs(m:named_parameters()) do out[i] = np[1] end
  return table.concat(out, ",")
end
local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b)) end

-- A subclass: fields registered in the order assigned, own parameters
-- before the children's (as PyTorch), plain fields ignored.
local Net = nn.Module:extend("Net")
function Net:init(n_in, n_out)
  self.fc = nn.Linear(n_in, 4)
  self.act = nn.Tanh()
  self.size = n_out
  self.head = nn.Linear(4, n_out, false)
  self.scale = tensor.param(tensor.ones(n_out))
  self.cache = tensor.zeros(2) -- not a parameter
end
function Net:forward(x) return self.head(self.act(self.fc(x))) * self.scale end
local net = Net(3, 2)
assert(names_of(net) == "scale,fc.weight,fc.bias,head.weight", names_of(net))
assert(#net:parameters() == 4 and net:parameters()[1] == net.scale)
assert(net(tensor{{1, 2, 3}}):shape()[2] == 2)
assert(Net.new(3, 2).size == 2, "Class.new(...) is Class(...)")
assert(tostring(net) == "Net(\n  (fc): Linear(3 -> 4)\n  (act): Tanh()\n  (head): Linear(4 -> 2)\n)", tostring(net))

-- train/eval reach children; state_dict round trip; to_gpu keeps identity.
net:eval()
assert(not net.training and not net.fc.training and not net.act.training)
net:train()
assert(net.training and net.head.training)
local other = Net(3, 2)
other:load_state_dict(net:state_dict())
local x = tensor{{0.5, -1, 2}}
assert(close(other(x):totable()[1][2], net(x):totable()[1][2]))
local sd = net:state_dict()
sd.scale = nil
local ok, err = pcall(other.load_state_dict, other, sd)
assert(not ok and err:find("missing parameter or buffer scale"), err)
local w = net.fc.weight
net:to_gpu()
assert(net.fc.weight == w and w:scope() == "persistent")

-- Reassigning a field keeps its place; a parameter that becomes nil goes.
net.scale = tensor.param(tensor.full({2}, 2))
assert(names_of(net) == "scale,fc.weight,fc.bias,head.weight")
net.head = nil
assert(names_of(net) == "scale,fc.weight,fc.bias", names_of(net))
net.head = nn.Linear(4, 2)
assert(names_of(net) == "scale,fc.weight,fc.bias,head.weight,head.bias", names_of(net))

-- A shared module is listed once by parameters (an optimizer steps it once).
local Tied = nn.Module:extend("Tied")
function Tied:init()
  self.a = nn.Linear(2, 2)
  self.b = self.a
end
function Tied:forward(v) return self.b(self.a(v)) end
assert(#Tied():parameters() == 2)

-- Subclass of a subclass, calling the parent's init.
local Scaled = nn.Linear:extend("Scaled")
function Scaled:init(n_in, n_out, k)
  nn.Linear.init(self, n_in, n_out)
  self.k = k
end
function Scaled:forward(v) return nn.Linear.forward(self, v) * self.k end
local s = Scaled(2, 3, 10)
assert(names_of(s) == "weight,bias" and getmetatable(s) == Scaled)
local lin = s(tensor{{1, 1}}):totable()[1][1]
local wt, bt = s.weight:totable(), s.bias:totable()
assert(close(lin, 10 * (wt[1][1] + wt[1][2] + bt[1])))
ok, err = pcall(Net(3, 2).extend, Net(3, 2), "X")
assert(not ok and err:find("call it on a class"), err)
local Bare = nn.Module:extend("Bare")
ok, err = pcall(Bare(), tensor{1})
assert(not ok and err:find("Bare: forward is not defined"), err)

-- A module trained through an optimizer over parameters().
local Affine = nn.Module:extend("Affine")
function Affine:init() self.w = tensor.param(tensor{0}) self.b = tensor.param(tensor{0}) end
function Affine:forward(v) return v * self.w + self.b end
local aff = Affine()
local opt = optim.sgd(aff:parameters(), {lr = 0.1})
local xs, ys = tensor{1, 2, 3}, tensor{3, 5, 7}
for _ = 1, 400 do
  opt:zero_grad()
  backward(with_grad_tape(function() return nn.mse_loss(aff(xs), ys) end))
  opt:step()
end
assert(close(aff.w:item(), 2, 0.02) and close(aff.b:item(), 1, 0.05), aff.w:item() .. " " .. aff.b:item())

-- Sequential: a list or the modules themselves, add, indexing, #.
local seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
seq:add(nn.Linear(3, 1))
assert(#seq == 3 and getmetatable(seq[3]) == nn.Linear and seq(tensor{{1, 2}}):shape()[2] == 1)
assert(names_of(seq) == "0.weight,0.bias,2.weight,2.bias", names_of(seq))
assert(#nn.Sequential{nn.Identity(), nn.Identity()} == 2 and #nn.Sequential() == 0)
ok, err = pcall(seq.add, seq, 42)
assert(not ok and err:find("element 4 is not a module"), err)
ok, err = pcall(nn.Sequential, {nn.ReLU(), "relu"})
assert(not ok and err:find("element 2 is not a module"), err)
assert(tostring(nn.Sequential{nn.Flatten(), nn.Sequential{nn.ReLU()}}) ==
  "Sequential(\n  (0): Flatten(start_dim=2, end_dim=-1)\n  (1): Sequential(\n    (0): ReLU()\n  )\n)")

-- ModuleList: registered, indexed, ipairs-able, not callable.
local Stack = nn.Module:extend("Stack")
function Stack:init(n)
  self.layers = nn.ModuleList()
  for _ = 1, n do self.layers:append(nn.Linear(2, 2)) end
end
function Stack:forward(v)
  for _, l in ipairs(self.layers) do v = l(v) end
  return v
end
local st = Stack(3)
assert(#st.layers == 3 and names_of(st):find("^layers.0.weight,layers.0.bias,layers.1.weight"), names_of(st))
assert(#st:parameters() == 6 and st(tensor{{1, 1}}):shape()[2] == 2)
local count = 0
for i, l in ipairs(st.layers) do count = count + 1 assert(l == st.layers[i]) end
assert(count == 3)
st.layers:extend{nn.Linear(2, 2)}
assert(#st.layers == 4 and #nn.ModuleList{nn.ReLU(), nn.Tanh()} == 2)
ok, err = pcall(st.layers, tensor{1})
assert(not ok and err:find("ModuleList"), err)
local MyList = nn.ModuleList:extend("MyList")
assert(#MyList{nn.ReLU()} == 1, "ModuleList:extend on the class makes a subclass")

-- Identity, Flatten.
local v4 = tensor.randn(2, 3, 4, 5)
assert(nn.Identity(7, "ignored")(v4) == v4)
local f = nn.Flatten()(v4):shape()
assert(#f == 2 and f[1] == 2 and f[2] == 60)
f = nn.Flatten(1, 2)(v4):shape()
assert(#f == 3 and f[1] == 6 and f[3] == 5)
f = nn.Flatten(2, 3)(v4):shape()
assert(#f == 3 and f[2] == 12 and f[3] == 5)

-- named_modules, modules, children, apply.
local nm = {}
for i, m in ipairs(st:named_modules()) do nm[i] = m[1] end
assert(table.concat(nm, ",") == ",layers,layers.0,layers.1,layers.2,layers.3", table.concat(nm, ","))
assert(#st:children() == 1 and #st:modules() == 6)
local visited = 0
st:apply(function(m)
  visited = visited + 1
  if getmetatable(m) == nn.Linear then nn.init.zeros_(m.bias) end
end)
assert(visited == 6 and st.layers[2].bias:totable()[1] == 0)

-- nn.init: in place, returning the tensor, under the seeded generator.
local function stats(t)
  local n = t:numel()
  local flat = t:reshape(n)
  local mean = flat:mean():item()
  local var = ((flat - mean) * (flat - mean)):sum():item() / (n - 1)
  return mean, math.sqrt(var), flat:min():item(), flat:max():item()
end
local p = tensor.param(tensor.zeros(100, 200))
assert(nn.init.uniform_(p, -0.5, 2) == p, "the same tensor back")
local mean, std, lo, hi = stats(p)
assert(lo >= -0.5 and hi <= 2 and close(mean, 0.75, 0.03) and close(std, 2.5 / math.sqrt(12), 0.03), mean .. " " .. std)
nn.init.uniform_(p)
mean, std, lo, hi = stats(p)
assert(lo >= 0 and hi <= 1 and close(mean, 0.5, 0.03))
nn.init.normal_(p, {mean = 3, std = 0.1})
mean, std = stats(p)
assert(close(mean, 3, 0.01) and close(std, 0.1, 0.03), mean .. " " .. std)
nn.init.constant_(p, 0.25)
mean, std, lo, hi = stats(p)
assert(lo == 0.25 and hi == 0.25)
nn.init.ones_(p)
assert(p:sum():item() == 20000)
nn.init.zeros_(p)
assert(p:abs():sum():item() == 0)
-- The same seed, the same values.
tensor.manual_seed(9)
local a1 = nn.init.xavier_uniform_(tensor.zeros(4, 4)):totable()
tensor.manual_seed(9)
local a2 = nn.init.xavier_uniform_(tensor.zeros(4, 4)):totable()
assert(a1[3][2] == a2[3][2] and a1[1][1] ~= a1[1][2])
-- Gains and fans as PyTorch's.
assert(nn.init.calculate_gain("relu") == math.sqrt(2) and close(nn.init.calculate_gain("tanh"), 5 / 3))
assert(close(nn.init.calculate_gain("leaky_relu"), math.sqrt(2 / (1 + 0.01 ^ 2))))
assert(close(nn.init.calculate_gain("leaky_relu", 0.2), math.sqrt(2 / 1.04)) and nn.init.calculate_gain("conv2d") == 1)
local fi, fo = nn.init.fans(tensor.zeros(16, 8, 3, 3))
assert(fi == 72 and fo == 144)
-- The bound of a default kaiming_uniform_(a=sqrt(5)) is nn.Linear's 1/sqrt(fan_in).
local kw = nn.init.kaiming_uniform_(tensor.zeros(50, 400), math.sqrt(5))
local _, _, klo, khi = stats(kw)
assert(klo >= -1 / 20 and khi <= 1 / 20 and khi > 0.049, khi)
-- orthogonal_: orthonormal rows (wide) or columns (tall), times gain.
for _, shape in ipairs{{6, 4}, {4, 6}, {3, 2, 2}} do
  local q = nn.init.orthogonal_(tensor.param(tensor.zeros(shape)), 2)
  local m2 = q:reshape(shape[1], q:numel() / shape[1])
  local g = (shape[1] >= m2:size(2)) and m2:t():matmul(m2) or m2:matmul(m2:t())
  local gt = g:totable()
  for i = 1, #gt do
    local tol = device.current() == "cpu" and 1e-4 or 2e-3 -- TF32 matmuls on a GPU
    for j = 1, #gt do assert(close(gt[i][j], i == j and 4 or 0, tol), i .. "," .. j .. ": " .. gt[i][j]) end
  end
end
-- Mistakes are errors that name the initialiser.
for _, bad in ipairs{
  {function() nn.init.xavier_uniform_(tensor.zeros(5)) end, "xavier_uniform_: fan in and fan out"},
  {function() nn.init.kaiming_normal_(tensor.zeros(2, 2), {mode = "fan_avg"}) end, "mode must be"},
  {function() nn.init.kaiming_normal_(tensor.zeros(2, 2), {moed = "fan_in"}) end, "unknown option moed"},
  {function() nn.init.kaiming_uniform_(tensor.zeros(2, 2), 0, "fan_in", "swish") end, "unsupported nonlinearity swish"},
  {function() nn.init.uniform_(tensor.zeros(2), 1, 0) end, "expected a <= b"},
  {function() nn.init.normal_({1, 2}) end, "normal_: expected a tensor"},
  {function() nn.init.orthogonal_(tensor.zeros(300, 300)) end, "too large"},
  {function() nn.init.orthogonal_(tensor.zeros(3)) end, "2 or more dims"},
} do
  ok, err = pcall(bad[1])
  assert(not ok and err:find(bad[2], 1, true), tostring(err))
end
-- Under a tape, init is not recorded: the parameter stays a leaf.
local lp = tensor.param(tensor.zeros(3, 3))
with_grad_tape(function() nn.init.normal_(lp) end)
backward(with_grad_tape(function() return (lp * 2):sum() end))
assert(lp.grad:totable()[2][2] == 2)

-- Buffers: BatchNorm's running statistics are state, not parameters:
-- state_dict carries them, load_state_dict restores them (an eval-mode
-- model saved and loaded gives the same outputs), optimizers never see them.
do
  local bn = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm1d(4)}
  assert(#bn:parameters() == 4, "running stats are not parameters")
  local x = tensor.randn(8, 3)
  bn:train()
  no_grad(function() bn(x) end) -- updates the running stats
  local sd = bn:state_dict()
  assert(sd["1.running_mean"] and sd["1.running_var"], "buffers are in the state dict")
  local names = {}
  for _, nb in ipairs(bn:named_buffers()) do names[#names + 1] = nb[1] end
  assert(table.concat(names, ",") == "1.running_mean,1.running_var,1.num_batches_tracked", table.concat(names, ","))
  bn:eval()
  local want = bn(x):totable()
  local copy = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm1d(4)}
  copy:load_state_dict(sd)
  copy:eval()
  local got = copy(x):totable()
  for i = 1, 8 do
    for j = 1, 4 do assert(math.abs(got[i][j] - want[i][j]) < 1e-5, "restored model differs") end
  end
  local ok, err = pcall(function()
    local partial = {}
    for k, v in pairs(sd) do if k ~= "1.running_var" then partial[k] = v end end
    copy:load_state_dict(partial)
  end)
  assert(not ok and err:find("missing parameter or buffer 1.running_var"), err)
end

-- Sequential runs a Linear with a bias and a ReLU as one op (relu(x wᵀ + b)):
-- its output and gradients are the two modules' called one by one, NaN and
-- an infinite incoming gradient included; a subclass of Linear, a replaced
-- forward and a Linear without bias run as they are.
do
  tensor.manual_seed(11)
  local lin, act, head = nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)
  local seq = nn.Sequential{lin, act, head}
  local xs = tensor{{0.5, -1, 2}, {0 / 0, 1, 1}, {-3, 0.25, 1}}
  local g = tensor{{1, 2}, {3, 4}, {math.huge, -1}}
  local function run(f)
    seq:zero_grad() -- gradients add up over backward calls
    local loss = with_grad_tape(function() return (f(xs) * g):sum() end)
    local grads = backward(loss)
    return {grads[lin.weight]:totable(), grads[lin.bias]:totable(), grads[head.weight]:totable()}
  end
  local fused = run(function(x) return seq(x) end)
  local apart = run(function(x) return head(act(lin(x))) end)
  local function same(a, b, path)
    if type(a) == "table" then
      for k in pairs(a) do same(a[k], b[k], path .. "." .. k) end
      return
    end
    assert((a ~= a and b ~= b) or a == b, path .. ": " .. tostring(a) .. " vs " .. tostring(b))
  end
  same(fused, apart, "fused")
  same(seq(xs):totable(), head(act(lin(xs))):totable(), "output")
  local function nodes(f)
    local before = residency.stats().nodes_computed
    f(xs):totable()
    return residency.stats().nodes_computed - before
  end
  assert(nodes(seq) < nodes(function(x) return head(act(lin(x))) end), "the Sequential's Linear and ReLU are one op")
  -- the bias changed in place between the forward and backward: its
  -- gradient does not read it (as PyTorch's)
  local loss = with_grad_tape(function() return seq(xs):sum() end)
  no_grad(function() lin.bias:add_(1) end)
  assert(pcall(backward, loss), "a bias changed after the forward")

  local calls = 0
  local Counting = nn.Linear:extend("Counting")
  function Counting:forward(x) calls = calls + 1; return nn.Linear.forward(self, x) end
  local sub = Counting(3, 4)
  nn.Sequential{sub, nn.ReLU()}(xs)
  assert(calls == 1, "a subclass's forward is called")
  local own = nn.Linear(3, 4)
  own.forward = function(self, x) calls = calls + 1; return nn.Linear.forward(self, x) end
  nn.Sequential{own, nn.ReLU()}(xs)
  assert(calls == 2, "a replaced forward is called")
  local nobias = nn.Linear(3, 4, false)
  same(nn.Sequential{nobias, nn.ReLU()}(xs):totable(), nn.ReLU()(nobias(xs)):totable(), "no bias")
  local number = nn.Linear(3, 4)
  number.bias = 0.5
  same(nn.Sequential{number, nn.ReLU()}(xs):totable(), nn.ReLU()(number(xs)):totable(), "a number for a bias")
  -- a forward replaced on the class: the Sequential calls it
  local relu_forward = nn.ReLU.forward
  nn.ReLU.forward = function(_, x) return x:clamp(0, 0.1) end
  local ok, err = pcall(function()
    local l = nn.Linear(3, 4)
    local y = nn.Sequential{l, nn.ReLU()}(tensor{{5, -1, 2}, {3, 3, 3}})
    assert(y:max():item() <= 0.1 + 1e-6, "the class's new forward runs (clamp to 0.1)")
  end)
  nn.ReLU.forward = relu_forward
  assert(ok, err)
end

-- A frozen parameter (requires_grad(false)) stays a parameter, as in
-- PyTorch: parameters(), state_dict and to_gpu still have it, an optimizer
-- given it skips it, and nothing turns requires_grad back on.
do
  local net = nn.Sequential{nn.Linear(2, 3), nn.Linear(3, 1)}
  local frozen = net[1].weight
  frozen:requires_grad(false)
  assert(#net:parameters() == 4, "the frozen weight is still a parameter")
  assert(net:state_dict()["0.weight"] ~= nil, "and in the state_dict")
  net:to_gpu()
  assert(frozen:scope() == "persistent", "to_gpu moves it")
  local before = frozen:totable()
  local opt = optim.sgd(net:parameters(), {lr = 0.5})
  assert(not frozen:requires_grad(), "the optimizer leaves it frozen")
  local last = net[2].weight:totable()
  opt:zero_grad()
  backward(with_grad_tape(function() return net(tensor{{1, 2}}):sum() end))
  assert(frozen.grad == nil)
  opt:step()
  assert(not frozen:requires_grad())
  local after = frozen:totable()
  for i = 1, #before do for j = 1, #before[i] do assert(before[i][j] == after[i][j], "not stepped") end end
  assert(net[2].weight:totable()[1][1] ~= last[1][1], "the others are")
  local plain = nn.Linear(2, 2)
  plain.mask = tensor.ones(2)
  assert(#plain:parameters() == 2, "a plain tensor field is no parameter")
end

-- load_state_dict(sd, strict): strict (the default) refuses a missing or an
-- unexpected name; strict=false loads the rest and returns both lists.
do
  local a, b = nn.Linear(2, 3), nn.Linear(2, 3)
  local sd = a:state_dict()
  sd.bias = nil
  sd.extra = tensor{1}
  local ok, err = pcall(function() b:load_state_dict(sd) end)
  assert(not ok and err:find("missing parameter or buffer bias"), err)
  for _, strict in ipairs({false, {strict = false}}) do
    local c = nn.Linear(2, 3)
    local bias = c.bias:totable()
    local m, missing, unexpected = c:load_state_dict(sd, strict)
    assert(m == c)
    assert(#missing == 1 and missing[1] == "bias", "missing")
    assert(#unexpected == 1 and unexpected[1] == "extra", "unexpected")
    assert(c.weight:totable()[2][1] == a.weight:totable()[2][1], "the weight loaded")
    assert(c.bias:totable()[1] == bias[1], "the bias left")
  end
  ok, err = pcall(function() b:load_state_dict(sd, {strict = false, sloppy = true}) end)
  assert(not ok and err:find("unknown option sloppy"), err)
  local wrong = a:state_dict()
  wrong.bias = tensor{1}
  ok, err = pcall(function() b:load_state_dict(wrong) end)
  assert(not ok and err:find("load_state_dict: bias: copy_:"), "the message names the entry: " .. tostring(err))
  for _, args in ipairs({{{assign = true}}, {true, true}}) do
    ok, err = pcall(function() b:load_state_dict(a:state_dict(), unpack(args)) end)
    assert(not ok and err:find("assign is not supported"), err)
  end
  ok, err = pcall(function() b:load_state_dict(sd, {format = "pt"}) end)
  assert(not ok and err:find("missing parameter"), "tensor.load's metadata second: strict " .. tostring(err))
end

-- A tied weight is one parameter, listed in a state_dict under each of its
-- names (as PyTorch's), and loading wants both.
do
  local Tied = nn.Module:extend("Tied")
  function Tied:init()
    self.enc = nn.Linear(2, 2, false)
    self.dec = nn.Linear(2, 2, false)
    self.dec.weight = self.enc.weight
  end
  local m = Tied()
  assert(#m:parameters() == 1, "one parameter")
  local sd = m:state_dict()
  assert(sd["enc.weight"] and sd["dec.weight"] and rawequal(sd["enc.weight"], sd["dec.weight"]), "both names")
  local other = Tied()
  other:load_state_dict(sd)
  assert(other.enc.weight:totable()[1][1] == m.enc.weight:totable()[1][1])
  local ok, err = pcall(other.load_state_dict, other, {["enc.weight"] = sd["enc.weight"]})
  assert(not ok and err:find("missing parameter or buffer dec.weight"), err)
end

-- An error inside a module names the module's path in the model (its
-- state_dict name) and class, at the line that called the model, not a
-- line of nn.lua; an error in the outermost module's own forward is as it
-- was raised.
do
  local seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(5, 2))
  local ok, err = pcall(function() return seq(tensor.randn(2, 3)) end)
  assert(not ok and err:find("^[^:]*nn_modules%.lua:%d+: 2 %(Linear%): linear: cannot multiply"), err)
  local Block = nn.Module:extend("Block")
  function Block:init() self.attn = nn.Sequential(nn.Linear(4, 4), nn.Linear(3, 1)) end
  function Block:forward(x) return self.attn(x) end
  local Model = nn.Module:extend("Model")
  function Model:init() self.blocks = nn.ModuleList({Block(), Block()}) end
  function Model:forward(x)
    for _, b in ipairs(self.blocks) do x = b(x) end
    return x
  end
  ok, err = pcall(function() return Model()(tensor.randn(2, 4)) end)
  assert(not ok and err:find("blocks%.0%.attn%.1 %(Linear%): linear"), err)
  assert(not err:find("nn%.lua"), err)
  local Own = nn.Module:extend("Own")
  function Own:forward(x) error("own failure") end
  ok, err = pcall(function() return nn.Sequential(nn.ReLU(), Own())(tensor{1}) end)
  assert(not ok and err:find("1 %(Own%): [^:]*nn_modules%.lua:%d+: own failure"), err)
  ok, err = pcall(function() return Own()(tensor{1}) end)
  assert(not ok and err:find("nn_modules%.lua:%d+: own failure$") and not err:find("Own"), err)
  -- After the failures a model runs, and a later error carries no old path.
  assert(nn.Sequential(nn.Linear(3, 4), nn.ReLU())(tensor.randn(2, 3)):size(2) == 4)
  ok, err = pcall(function() return nn.Linear(3, 2)(tensor.randn(2, 5)) end)
  assert(not ok and err:find("nn_modules%.lua:%d+: linear: cannot multiply") and not err:find("%(Linear%)"), err)
end

-- A constructor's error cites the line that called the constructor, not
-- a line of nn.lua.
do
  local ok, err = pcall(function() return nn.Linear("a", 2) end)
  assert(not ok and err:find("^[^:]*nn_modules%.lua:%d+: nn%.Linear: expected positive sizes"), err)
  ok, err = pcall(function() return nn.Conv2d(1, 2, 3, {bogus = 1}) end)
  assert(not ok and err:find("nn_modules%.lua:%d+: nn%.Conv2d: unknown option bogus"), err)
  local Holder = nn.Module:extend("Holder")
  function Holder:init() self.l = nn.Embedding(5, 3, {padding_idx = 9}) end
  ok, err = pcall(function() return Holder() end)
  assert(not ok and err:find("nn_modules%.lua:%d+: nn%.Embedding: padding_idx") and not err:find("nn%.lua"), err)
end

-- BatchNorm with track_running_stats=false keeps no running statistics
-- and normalises by the batch's own in eval() too, as PyTorch's (values:
-- torch 1.13, BatchNorm1d(3, track_running_stats=False).eval() of the
-- same x); positional in PyTorch's order as well.
do
  local x = (tensor.arange(12):reshape(4, 3)) ^ 1.5
  local bn = nn.BatchNorm1d(3, {track_running_stats = false})
  bn:eval()
  local y = bn(x)
  local want = {-1.141009, -1.193667, -1.222108, -0.635275, -0.587558, -0.561522}
  local got = y:reshape(12):totable()
  for i, w in ipairs(want) do assert(math.abs(got[i] - w) < 1e-5, i .. ": " .. got[i]) end
  local train = nn.BatchNorm1d(3)(x) -- a training batch norm: the batch's statistics
  assert((train - y):abs():max():item() < 1e-6)
  local keys = {}
  for k in pairs(bn:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  assert(table.concat(keys, ",") == "bias,weight", table.concat(keys, ","))
  assert(nn.BatchNorm2d(3, 1e-5, 0.1, true, false).running_mean == nil)
end

-- ModuleDict, ParameterList and ParameterDict register their members under
-- PyTorch's state_dict names (a dict's keys, a list's 0-based indices),
-- keep them in the order added, and refuse what is not a member or a name
-- that would hide a method.
do
  local d = nn.ModuleDict{enc = nn.Linear(2, 3), dec = nn.Linear(3, 2)}
  d:update{head = nn.Linear(2, 1)}
  assert(table.concat(d:keys(), ",") == "dec,enc,head" and d:len() == 3 and d.enc.weight:size(1) == 3)
  assert(d:items()[3][1] == "head" and d:values()[1] == d.dec)
  local M = nn.Module:extend("DictHolder")
  function M:init()
    self.blocks = nn.ModuleDict{a = nn.Linear(1, 1)}
    self.scales = nn.ParameterDict{s = tensor.ones(1)}
    self.extra = nn.ParameterList{tensor.zeros(2), tensor.ones(3)}
  end
  local m = M()
  local keys = {}
  for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  assert(table.concat(keys, ",") == "blocks.a.bias,blocks.a.weight,extra.0,extra.1,scales.s", table.concat(keys, ","))
  assert(#m:parameters() == 5 and m.extra[2]:requires_grad() and #m.extra == 2)
  m.extra:append(tensor.ones(4))
  assert(#m.extra == 3 and m.extra[3]:size(1) == 4 and #m:parameters() == 6)
  for _, c in ipairs{
    {function() return nn.ModuleDict{keys = nn.Linear(1, 1)} end, "nn.ModuleDict: \"keys\" is the name of a method or field of ModuleDict"},
    {function() return nn.ModuleDict{a = 5} end, "nn.ModuleDict: a is not a module %(got number%)"},
    {function() return nn.ParameterDict{p = "x"} end, "nn.ParameterDict: p is not a tensor"},
    {function() return nn.ParameterList{1} end, "ParameterList:append: element 1 is not a tensor"},
    {function() return nn.ModuleDict{a = nn.Linear(1, 1)}(tensor{1}) end, "a ModuleDict is not called"},
  } do
    local ok, err = pcall(c[1])
    assert(not ok and tostring(err):find(c[2]), tostring(err))
  end
end

-- Dropout2d zeroes whole channels (about p of them) and scales the rest
-- by 1/(1-p), its gradient likewise; eval() and p=0 pass x through; a 3-d
-- input is refused (PyTorch's meaning of it changes between versions).
do
  tensor.manual_seed(1)
  local x = tensor.param(tensor.ones(8, 16, 3, 3))
  local y
  backward(with_grad_tape(function() y = nn.Dropout2d(0.25)(x); return y:sum() end))
  local sums, grads = y:sum(4):sum(3):reshape(128):totable(), x.grad:sum(4):sum(3):reshape(128):totable()
  local zeros = 0
  for i, v in ipairs(sums) do
    assert(v == 0 or math.abs(v - 12) < 1e-4, "a channel is all dropped or all kept: " .. v)
    assert(math.abs(grads[i] - v) < 1e-4, "the gradient drops the same channels")
    if v == 0 then zeros = zeros + 1 end
  end
  assert(zeros > 12 and zeros < 52, "about a quarter of 128 channels dropped: " .. zeros)
  local m = nn.Dropout2d(0.5)
  m:eval()
  assert(m(x):eq(x):all():item() == 1 and nn.dropout2d(x, 0):eq(x):all():item() == 1 and tostring(m) == "Dropout2d(p=0.5)")
  assert(nn.dropout2d(x, 1):abs():sum():item() == 0)
  local ok, err = pcall(nn.dropout2d, tensor.ones(2, 3, 4))
  assert(not ok and tostring(err):find("nn.dropout2d: expected an %[N, C, H, W%] input, got 3 dims"), tostring(err))
end
