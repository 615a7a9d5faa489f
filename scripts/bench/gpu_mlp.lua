-- scripts/bench/gpu_mlp.lua - the MLP of gpu_residency.lua (1024-4096x4-10,
-- Adam, weights resident) at any batch, for the large-batch comparison with
-- torch_gpu_mlp.py (scripts/bench/gpu_compare.sh runs both and prints ratios).
--   gglua --device cuda scripts/bench/gpu_mlp.lua BATCH [MODE] [STEPS]
-- MODE: f32 (default), autocast (f32 weights, the products in bf16 as under
-- PyTorch's torch.autocast: torch_gpu_mlp.py's bf16), or bf16 (weights
-- stored as bf16 in the persistent pool, gradients and Adam moments f32;
-- add autocast too: bf16+autocast). Under `gglua --nproc N` each rank
-- trains on BATCH/N rows with dist.data_parallel (BATCH is the global batch).
dist.init()
local world = dist.world_size()
local batch = tonumber(arg and arg[1]) or 1024
local mode = arg and arg[2] or "f32"
local steps = tonumber(arg and arg[3]) or 30
local sizes = {1024, 4096, 4096, 4096, 4096, 10}
local mlp = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "bench_mlp.lua") -- the benchmark MLP
tensor.manual_seed(0)

local model = mlp(sizes)
if mode:find("bf16") then
  for _, p in ipairs(model:parameters()) do to_gpu(p, {scope = "persistent", dtype = "bf16"}) end
else
  model:to_gpu("persistent")
end
-- BUCKET_CAP_MB: data_parallel's bucket size (unset: PyTorch DDP's 25 MiB)
if world > 1 then model = dist.data_parallel(model, {bucket_cap_mb = tonumber(os.getenv("BUCKET_CAP_MB"))}) end
local opt = optim.adam(model:parameters(), {lr = 1e-4})
local global = batch
batch = math.floor(batch / world)
tensor.manual_seed(1 + dist.rank()) -- each rank its own rows
local x = to_gpu(tensor.randn(batch, sizes[1]), "persistent")
local y = {}
for i = 1, batch do y[i] = (i % 10) + 1 end
y = to_gpu(tensor(y, {dtype = "i32"}), "persistent")

local function step()
  opt:zero_grad()
  local loss = with_grad_tape(function()
    if mode:find("autocast") then return autocast(function() return nn.cross_entropy(model(x), y) end) end
    return nn.cross_entropy(model(x), y)
  end)
  backward(loss)
  opt:step()
  return loss:item()
end
for _ = 1, 3 do step() end
local timed = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "bench_steps.lua")
local run = timed(step, steps)
local dt, loss, s = run.seconds, run.loss, run.stats
if world > 1 then io.stderr:write(string.format("rank %d: %s\n", dist.rank(), run.spread)) end
if dist.rank() == 0 then
  -- persistent: the pool's buffers; used: what lives in them (the pool
  -- grows in steps, so bf16 weights show in the second number); peak: the
  -- pass pool's high-water mark in the last step, scratch memory included.
  print(string.format("gglua mlp batch=%d gpus=%d mode=%s steps/s=%.1f ms/step=%.2f loss=%.4f persistent=%dMiB used=%dMiB peak=%dMiB",
    global, world, mode, steps / dt, 1000 * dt / steps, loss, math.floor(s.p_buffer_bytes / 2^20),
    math.floor((s.p_buffer_bytes - s.p_free_bytes) / 2^20), math.floor(s.peak_bytes / 2^20)))
  io.stderr:write(string.format("gglua mlp: %d graph computes (%d replayed as CUDA graphs); per timed step %.2f ms in computes, %.2f ms in gradient collectives\n",
    s.graph_computes, s.graph_replays, 1000 * run.computes, 1000 * run.collectives))
end
