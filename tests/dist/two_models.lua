-- Run by tests/dist_agree_test.go alone and under mpirun -np 2: two models
-- wrapped one after the other (an encoder, then a head) both stay averaged,
-- and data_parallel gives every rank rank 0's buffers (BatchNorm's running
-- statistics) besides its parameters. The ranks initialise differently
-- (rank 0 as the one process alone); each trains on its half of every
-- batch. "B" is the running statistics right after data_parallel, "W" the
-- weights after training; both must be rank 0's / the one process's.
dist.init()
local W, r = dist.world_size(), dist.rank()
tensor.manual_seed(7)
local X, Y = tensor.randn(8, 3), tensor.randn(8, 2)
tensor.manual_seed(100 + r)
local enc = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh()}
no_grad(function()
  enc:state_dict()["1.running_mean"]:copy_(tensor.randn(4))
  enc:state_dict()["1.running_var"]:copy_(tensor.rand(4) + 0.5)
end)
-- normalising by the running statistics makes each sample's output its
-- own, so that halves of a batch average to the whole batch's gradient
enc:eval()
dist.data_parallel(enc)
local sd = enc:state_dict()
print("B " .. table.concat(sd["1.running_mean"]:totable(), " ") .. " " .. table.concat(sd["1.running_var"]:totable(), " "))
local head = dist.data_parallel(nn.Linear(4, 2))
local n = 8 / W
local x, y = X:narrow(1, r * n + 1, n):clone(), Y:narrow(1, r * n + 1, n):clone()
local ps = {}
for _, p in ipairs(enc:parameters()) do ps[#ps + 1] = p end
for _, p in ipairs(head:parameters()) do ps[#ps + 1] = p end
local opt = optim.sgd(ps, {lr = 0.1})
for _ = 1, 3 do
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.mse_loss(head(enc(x)), y) end)
  backward(loss)
  opt:step()
end
local out = {}
for _, p in ipairs(ps) do
  for _, v in ipairs(p:reshape(p:numel()):totable()) do out[#out + 1] = string.format("%.6f", v) end
end
print("W " .. table.concat(out, " "))
