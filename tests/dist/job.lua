-- tests/dist/job.lua - what the data-parallel test scripts share (loaded
-- with dofile from their folder): the data, a small MLP initialised
-- differently on every rank (data_parallel must hand every rank rank 0's
-- weights, the ones a single process makes), a sharded loader whose batch
-- is 8 rows alone and 4 on each of two ranks, and the line of final weights
-- ("W ...") the tests compare.
local job = {}

function job.start()
  dist.init()
  local world, rank = dist.world_size(), dist.rank()
  tensor.manual_seed(7)
  local x = tensor.randn(16, 4)
  local y = tensor.randn(16, 2)
  tensor.manual_seed(1 + rank)
  local model = dist.data_parallel(nn.Sequential{nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)}:to_gpu("persistent"))
  local loader = data.loader(x, y, {batch = 8 / world, shuffle = true, shard = true, seed = 3})
  assert(#loader == 2, "batches per epoch: " .. #loader)
  return model, loader
end

function job.print_weights(model)
  local out = {}
  for _, p in ipairs(model:parameters()) do
    for _, v in ipairs(p:reshape(p:numel()):totable()) do out[#out + 1] = string.format("%.7g", v) end
  end
  print("W " .. table.concat(out, " "))
end

return job
