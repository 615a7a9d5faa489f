-- tests/gpu/dist_nccl.lua - the NCCL path of dist, on 2 GPUs (CI has none).
--
--   export NCCL_NVLS_ENABLE=0
--   gglua --device cuda tests/gpu/dist_nccl.lua ref /tmp/dist_ref.gguf
--   gglua --nproc 2 --device cuda tests/gpu/dist_nccl.lua check /tmp/dist_ref.gguf
--
-- "ref" trains alone on the global batch of 32 and saves the losses and
-- weights; "check" trains on 2 GPUs, each rank on its half of every batch
-- (shard=true), after checking the collectives' values, and compares: the
-- weights must match the single-GPU run (ggml-cuda may run f32 matmuls as
-- TF32, hence the tolerance) and be identical on both ranks. Every rank
-- ends with one line "PASS ..." or "FAIL ..." (and exit status 1).
-- (A third argument "mpi" runs the same checks on CPU tensors under
-- mpirun -np 2, to test this script where there is no GPU.)
local mode, ref, backend = arg[1], arg[2], arg[3] or "nccl"
assert((mode == "ref" or mode == "check") and ref, "usage: dist_nccl.lua ref|check FILE")

local failures = {}
local function check(ok, what)
  if not ok then failures[#failures + 1] = what end
end

dist.init()
local rank, world = dist.rank(), dist.world_size()
if mode == "check" then
  assert(world == 2, "run under gglua --nproc 2 --device cuda")
  assert(dist.backend() == backend, "backend " .. tostring(dist.backend()))

  -- The collectives, on GPU tensors: rank 0 holds {1,2,3}, rank 1 {10,20,30}.
  local function mine() return to_gpu(tensor{1, 2, 3} * (rank == 0 and 1 or 10), "persistent") end
  local function same(t, want, what)
    local got = t:totable()
    for i = 1, #want do check(math.abs(got[i] - want[i]) < 1e-5, string.format("%s[%d] = %g, want %g", what, i, got[i], want[i])) end
  end
  same(dist.all_reduce(mine()), {11, 22, 33}, "all_reduce sum")
  same(dist.all_reduce(mine(), "avg"), {5.5, 11, 16.5}, "all_reduce avg")
  same(dist.all_reduce(mine(), "max"), {10, 20, 30}, "all_reduce max")
  same(dist.all_reduce(mine(), "min"), {1, 2, 3}, "all_reduce min")
  same(dist.broadcast(mine(), 1), {10, 20, 30}, "broadcast from 1")
  local g = dist.all_gather(mine())
  check(#g == 2, "all_gather returns one tensor per rank")
  same(g[1], {1, 2, 3}, "all_gather[1]")
  same(g[2], {10, 20, 30}, "all_gather[2]")
  dist.barrier()
  if backend == "nccl" then
    local ok, err = pcall(dist.all_reduce, tensor{1, 2})
    check(not ok and tostring(err):find("to_gpu"), "a host tensor is refused: " .. tostring(err))
  end
end

-- Training: an MLP, SGD with momentum, cross-entropy, 2 epochs of 4 batches.
tensor.manual_seed(5)
local x = tensor.randn(128, 64)
local labels = {}
for i = 1, 128 do labels[i] = (i * 7) % 10 + 1 end
tensor.manual_seed(100 + rank) -- different on each rank: data_parallel must broadcast rank 0's
local model = nn.Sequential{nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)}:to_gpu("persistent")
model = dist.data_parallel(model)
local opt = optim.sgd(model:parameters(), {lr = 0.05, momentum = 0.9})
local loader = data.loader(x, labels, {batch = 32 / world, shuffle = true, shard = true, seed = 1})
local losses, computes = {}, nil
for epoch = 1, 2 do
  if epoch == 2 then sync(); computes = residency.stats().graph_computes end
  for xb, yb in loader do
    opt:zero_grad()
    local loss = with_grad_tape(function() return nn.cross_entropy(model(xb), yb) end)
    backward(loss)
    optim.clip_grad_norm(model:parameters(), 1.0)
    opt:step()
    -- the global batch's loss: the average of the ranks' (equal halves)
    losses[#losses + 1] = dist.all_reduce(loss:detach():clone(), "avg"):item()
  end
end
sync()
local per_step = (residency.stats().graph_computes - computes) / #loader

local weights = {}
for i, p in ipairs(model:parameters()) do weights["w" .. i] = to_cpu(p) end

if mode == "ref" then
  weights.losses = tensor(losses)
  tensor.save(ref, weights)
  print(string.format("reference saved to %s (%d steps, final loss %.6f)", ref, #losses, losses[#losses]))
  return
end

local want = tensor.load(ref)
check(per_step <= 3, string.format("%.2f graph computes per step (the all_reduce of the loss adds one)", per_step))
local wl = want.losses:totable()
for i = 1, #losses do
  check(math.abs(losses[i] - wl[i]) < 2e-3 * math.max(1, math.abs(wl[i])), string.format("loss %d: %.6f, alone %.6f", i, losses[i], wl[i]))
end
local worst, between = 0, 0
for i, p in ipairs(model:parameters()) do
  local w = weights["w" .. i]
  local d = (w - want["w" .. i]):abs():max():item()
  worst = math.max(worst, d)
  local both = dist.all_gather(to_gpu(w:reshape(w:numel()), "persistent"))
  between = math.max(between, (both[1] - both[2]):abs():max():item())
end
check(worst < 2e-3, string.format("weights differ from the single-GPU run by %g", worst))
check(between == 0, string.format("the ranks' weights differ by %g", between))

if #failures == 0 then
  print(string.format("PASS rank %d: %d steps, weights within %.2g of one GPU, ranks identical, %.2f computes/step", rank, #losses, worst, per_step))
else
  print(string.format("FAIL rank %d: %s", rank, table.concat(failures, "; ")))
  os.exit(1)
end
