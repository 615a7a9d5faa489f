-- Run by tests/dist_agree_test.go under mpirun -np 2: collectives whose
-- ranks disagree (sizes, shapes, ops, src, calls, models) raise a clear
-- error on every rank and send nothing, so the ranks stay in step: each
-- case prints "<case> ok" or "<case> <error>", and a last all_reduce shows
-- that the job still works.
dist.init()
local r = dist.rank()
assert(dist.world_size() == 2)
local function by(a, b) if r == 0 then return a end return b end
local function try(name, f)
  local ok, err = pcall(f)
  print(name .. " " .. (ok and "ok" or tostring(err)))
end

try("broadcast_size", function() dist.broadcast(tensor.ones(by(3, 5)), 0) end)
try("all_reduce_size", function() dist.all_reduce(tensor.ones(by(3, 5))) end)
try("all_reduce_shape", function() dist.all_reduce(tensor.ones(by(4, 2), by(1, 2))) end)
try("all_gather_size", function() dist.all_gather(tensor.ones(by(3, 5))) end)
try("op", function() dist.all_reduce(tensor.ones(3), by("sum", "max")) end)
try("src", function() dist.broadcast(tensor.ones(3), r) end)
try("view", function() dist.all_reduce(by(tensor.ones(3), tensor.ones(4):narrow(1, 1, 3))) end)
try("unknown_op", function() dist.all_reduce(tensor.ones(3), by("sum", "prod")) end)
try("call", function() if r == 0 then dist.all_reduce(tensor.ones(3)) else dist.broadcast(tensor.ones(3)) end end)
try("barrier", function() if r == 0 then dist.barrier() else dist.all_reduce(tensor.ones(1)) end end)
try("dp_shape", function() dist.data_parallel(nn.Sequential{nn.Linear(3, by(4, 6)), nn.Linear(by(4, 6), 2)}) end)
try("dp_count", function() dist.data_parallel(by(nn.Linear(3, 2), nn.Sequential{nn.Linear(3, 2), nn.Linear(2, 2)})) end)
try("dp_buffers", function() dist.data_parallel(by(nn.Linear(3, 2), nn.Sequential{nn.Linear(3, 2), nn.BatchNorm1d(2)})) end)
try("dp_not_a_param", function() dist.data_parallel({by(tensor.param(tensor{1, 2}), tensor{1, 2})}) end)

-- a module's parameters() entry that does not require grad (frozen) is
-- broadcast from rank 0, not averaged: "frozen" is rank 0's on both ranks
tensor.manual_seed(10 + r)
local frozen = tensor.randn(3)
print("frozen_before " .. table.concat(frozen:totable(), ","))
dist.data_parallel({parameters = function() return {tensor.param(tensor.ones(2)), frozen} end})
print("frozen_after " .. table.concat(frozen:totable(), ","))

-- all_gather's tensors are a collective's to change, as alone
local g = dist.all_gather(tensor{1, 2} * (r + 1))
dist.all_reduce(g[2])
print("gathered " .. table.concat(g[1]:totable(), ",") .. " " .. table.concat(g[2]:totable(), ","))
local x = tensor{1, 2} * (r + 1)
dist.all_reduce(x)
dist.barrier()
print("in step " .. table.concat(x:totable(), ","))
