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
assert(table.concat(names, ",") == "1.bias,1.weight,4.bias,4.weight", table.concat(names, ","))
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
local ok, err = pcall(other.load_state_dict, other, {["1.weight"] = tensor.zeros(8, 2)})
assert(not ok and err:find("missing parameter 1.bias"), err)
local sd = net:state_dict()
sd["9.weight"] = tensor.zeros(1)
ok, err = pcall(other.load_state_dict, other, sd)
assert(not ok and err:find("unexpected parameter 9.weight"), err)
sd["9.weight"] = nil
sd["1.weight"] = tensor.zeros(3, 3)
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
