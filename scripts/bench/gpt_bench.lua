-- scripts/bench/gpt_bench.lua - training throughput of scripts/examples/gpt.lua's
-- transformer at a size given on the command line, on any device.
--
--   gglua [--device cuda] [--threads N] scripts/bench/gpt_bench.lua L H d T B steps [warmup] [bf16]
--
--   L layers, H heads, d the width (d_model), T the block size (context),
--   B the batch, steps the timed steps (default 2 4 128 64 16 20; warmup 5);
--   bf16 runs the forward under autocast (torch_gpt.py's bf16 argument).
--   e.g. the nanoGPT shakespeare_char size: 6 6 384 256 64 20 on a GPU.
--
-- The model and the step are gpt.lua's: token + position embeddings, pre-norm
-- blocks (LayerNorm, causal multi-head attention on
-- nn.scaled_dot_product_attention, LayerNorm, GELU MLP 4d), a final LayerNorm
-- and an untied head; cross-entropy, backward, clipping at 1.0, AdamW with
-- weight decay on the matrices only, a warmup-cosine scheduler step, and the
-- loss read once. The data are random tokens of a 65-symbol vocabulary (as
-- shakespeare_char's) drawn from the seed into 8 batches made before timing,
-- used in turn, so what is timed is the model's step and the batch's upload.
-- scripts/bench/torch_gpt.py is the PyTorch twin; gpt_compare.sh runs both.
--
-- Under `gglua --nproc N` each rank trains on B/N of every batch with
-- dist.data_parallel (B is the global batch) and rank 0 prints the global
-- tokens/s.
--
-- Prints one line that gpt_compare.sh parses:
--   gglua gpt L=.. H=.. d=.. T=.. B=.. tokens/s=... ms/step=... loss=... params=... peak=..MiB held=..MiB

local function int_arg(i, default)
  local v = arg and arg[i]
  if v == nil then return default end
  local n = tonumber(v)
  assert(n and n >= 1 and n == math.floor(n), string.format("gpt_bench: argument %d (%s) is not a positive integer", i, v))
  return n
end
local L, H, E, T, B = int_arg(1, 2), int_arg(2, 4), int_arg(3, 128), int_arg(4, 64), int_arg(5, 16)
local steps, warmup = int_arg(6, 20), int_arg(7, 5)
local precision = arg and arg[8] or "f32"
assert(precision == "f32" or precision == "bf16", "gpt_bench: argument 8 is f32 or bf16, not " .. precision)
assert(E % H == 0, string.format("gpt_bench: d=%d is not a multiple of H=%d", E, H))
local V, NBATCH = 65, 8
dist.init()
local world = dist.world_size()
assert(B % world == 0, string.format("gpt_bench: the batch %d does not split over %d processes", B, world))
local global = B
B = math.floor(B / world)

tensor.manual_seed(1337)
math.randomseed(1337)
local cfg = {vocab = V, block = T, embd = E, heads = H, layers = L}

-- The model: gpt.lua's, unchanged.
local SelfAttention = nn.Module:extend("SelfAttention")
function SelfAttention:init(c)
  self.heads = c.heads
  self.qkv = nn.Linear(c.embd, 3 * c.embd)
  self.proj = nn.Linear(c.embd, c.embd)
end
function SelfAttention:forward(x)
  local b, t, e = x:size(1), x:size(2), x:size(3)
  local h = self.heads
  local q, k, v = unpack(self.qkv(x):chunk(3, 3))                   -- each [b, t, e]
  local function split(z) return z:reshape(b, t, h, e / h):transpose(2, 3) end -- [b, h, t, e/h]
  local y = nn.scaled_dot_product_attention(split(q), split(k), split(v), {is_causal = true})
  return self.proj(y:transpose(2, 3):reshape(b, t, e))
end

local Block = nn.Module:extend("Block")
function Block:init(c)
  self.ln1 = nn.LayerNorm(c.embd)
  self.attn = SelfAttention(c)
  self.ln2 = nn.LayerNorm(c.embd)
  self.mlp = nn.Sequential{nn.Linear(c.embd, 4 * c.embd), nn.GELU(), nn.Linear(4 * c.embd, c.embd)}
end
function Block:forward(x)
  x = x + self.attn(self.ln1(x))
  return x + self.mlp(self.ln2(x))
end

local GPT = nn.Module:extend("GPT")
function GPT:init(c)
  self.tok_emb = nn.Embedding(c.vocab, c.embd)
  self.pos_emb = nn.Embedding(c.block, c.embd)
  self.blocks = nn.ModuleList()
  for _ = 1, c.layers do self.blocks:append(Block(c)) end
  self.ln_f = nn.LayerNorm(c.embd)
  self.head = nn.Linear(c.embd, c.vocab, false)
  for _, np in ipairs(self:named_parameters()) do
    if np[2]:dim() == 2 then nn.init.normal_(np[2], 0, 0.02) end
  end
end
function GPT:forward(idx)
  local t = idx:size(2)
  local x = self.tok_emb(idx) + self.pos_emb(tensor.arange(1, t + 1))
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(self.ln_f(x))
end

local model = GPT(cfg)
-- Resident weights, as gpt.lua: a step then uploads only its batch. On the
-- CPU too (the persistent pool spares a copy of every weight into the pass
-- pool each step: 83 against 116 ms a step at the small size);
-- GPT_BENCH_HOST=1 leaves them on the host to measure that.
if os.getenv("GPT_BENCH_HOST") ~= "1" then model:to_gpu("persistent") end
-- BUCKET_CAP_MB: data_parallel's bucket size (unset: PyTorch DDP's 25 MiB)
if world > 1 then model = dist.data_parallel(model, {bucket_cap_mb = tonumber(os.getenv("BUCKET_CAP_MB"))}) end
local nparams = 0
for _, p in ipairs(model:parameters()) do nparams = nparams + p:numel() end

local decay, no_decay = {}, {}
for _, np in ipairs(model:named_parameters()) do
  local name, p = np[1], np[2]
  if p:dim() >= 2 and not name:find("emb") then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
end
local opt = optim.adamw({{params = decay, weight_decay = 0.1}, {params = no_decay, weight_decay = 0}},
  {lr = 3e-3, betas = {0.9, 0.95}})
local total = warmup + steps
local sched = optim.lr_scheduler.warmup_cosine(opt, {warmup = math.floor(total / 10), total = total, eta_min = 3e-4})

-- Token ids 1..V (1-based, as nn.Embedding and cross_entropy take them), as
-- i32 tensors on the host.
local xs, ys = {}, {}
if world > 1 then tensor.manual_seed(1337 + dist.rank()) end -- each rank its own rows
for i = 1, NBATCH do
  xs[i] = tensor.randint(1, V + 1, {B, T}, {dtype = "i32"})
  ys[i] = tensor.randint(1, V + 1, {B * T}, {dtype = "i32"})
end

-- GPT_BENCH_PHASES=1: each phase's host wall time and time in computes, a
-- step's average over the timed steps, printed to stderr at the end.
local phases = os.getenv("GPT_BENCH_PHASES") == "1" and {} or nil
local names = {"forward", "backward", "clip", "step", "item"}
local mark_t, mark_c
local function mark(k)
  if not phases then return end
  local t, c = device.clock(), residency.stats().compute_seconds
  if k then
    local p = phases[k] or {0, 0}
    phases[k] = {p[1] + t - mark_t, p[2] + c - mark_c}
  end
  mark_t, mark_c = t, c
end

local n = 0
local function step()
  n = n + 1
  local i = (n - 1) % NBATCH + 1
  local x, y = xs[i], ys[i]
  mark()
  opt:zero_grad()
  local function forward() return nn.cross_entropy(model(x):reshape(B * T, V), y) end
  local loss = with_grad_tape(function() return autocast(precision, forward) end)
  mark("forward")
  backward(loss)
  mark("backward")
  optim.clip_grad_norm(model:parameters(), 1.0)
  mark("clip")
  opt:step()
  sched:step()
  mark("step")
  local l = loss:item()
  mark("item")
  return l
end

for _ = 1, warmup do step() end
local timed = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "bench_steps.lua")
if phases then phases = {} end
local run = timed(step, steps)
if phases then
  for _, k in ipairs(names) do
    io.stderr:write(string.format("phase %-8s %7.2f ms wall, %7.2f ms in computes\n", k, 1000 * phases[k][1] / steps, 1000 * phases[k][2] / steps))
  end
end
local dt, loss = run.seconds, run.loss
-- Under --nproc, each rank's spread of step times.
if world > 1 then io.stderr:write(string.format("rank %d: %s\n", dist.rank(), run.spread)) end

if dist.rank() == 0 then
  local st = run.stats
  io.stderr:write(string.format("gglua device %s, %d warm-up steps, %d processes, %d graph computes (%d replayed as CUDA graphs); per timed step %.2f ms in computes, %.2f ms in gradient collectives\n",
    device.current(), warmup, world, st.graph_computes, st.graph_replays, 1000 * run.computes, 1000 * run.collectives))
  -- peak: the pass pool's high-water mark in the last step (activations
  -- and the graphs' scratch memory); held: all device memory gglua holds.
  print(string.format("gglua gpt L=%d H=%d d=%d T=%d B=%d tokens/s=%.0f ms/step=%.2f loss=%.4f params=%d peak=%dMiB held=%dMiB",
    L, H, E, T, global, steps * global * T / dt, 1000 * dt / steps, loss, nparams,
    math.floor(st.peak_bytes / 2^20), math.floor(st.total_buffer_bytes / 2^20)))
end
