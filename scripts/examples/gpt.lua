-- scripts/examples/gpt.lua - a tiny GPT: a character-level transformer
-- trained to continue a short text, in the style of nanoGPT.
--
-- It shows:
--   * modules of your own (nn.Module:extend): causal multi-head
--     self-attention on nn.scaled_dot_product_attention, a pre-norm block
--     (LayerNorm, attention, LayerNorm, GELU MLP, residuals), the model with
--     token and position embeddings and an nn.ModuleList of blocks;
--   * AdamW with two parameter groups: weight decay on the weight matrices,
--     none on biases, LayerNorm and embeddings;
--   * a learning rate that warms up linearly and then follows a cosine
--     (optim.lr_scheduler.warmup_cosine), and gradient clipping;
--   * a checkpoint: the model's state_dict saved with tensor.save, loaded
--     into a fresh model with tensor.load and load_state_dict;
--   * sampling with a temperature and tensor.multinomial;
--   * data parallelism: under `gglua --nproc N` (GPUs) or `mpirun -np N`
--     (CPUs) every process trains on its 1/N of each batch and the
--     gradients are averaged (dist.data_parallel), so the losses are one
--     process's on the whole batch. Alone, the dist calls do nothing.
--
--   gglua scripts/examples/gpt.lua [steps] [checkpoint_path] [sample_length]
--
-- The checkpoint goes to checkpoint_path (default: $TMPDIR/gpt.gguf).

dist.init()
local rank, world = dist.rank(), dist.world_size()
local function say(...) if rank == 0 then print(string.format(...)) end end

local steps = tonumber(arg and arg[1]) or 400
local ckpt_path = (arg and arg[2]) or ((os.getenv("TMPDIR") or "/tmp") .. "/gpt.gguf")
local sample_length = tonumber(arg and arg[3]) or 200

-- Jane Taylor, "The Star" (1806), the first two stanzas.
local text = [[
Twinkle, twinkle, little star,
How I wonder what you are!
Up above the world so high,
Like a diamond in the sky.
When the blazing sun is gone,
When he nothing shines upon,
Then you show your little light,
Twinkle, twinkle, all the night.
]]
local id, chars, ids = {}, {}, {}
for c in text:gmatch(".") do
  if not id[c] then chars[#chars + 1] = c; id[c] = #chars end
  ids[#ids + 1] = id[c]
end
local V = #chars
say("%d characters of text, a vocabulary of %d", #text, V)

tensor.manual_seed(7)
math.randomseed(7)
local cfg = {vocab = V, block = 32, embd = 48, heads = 4, layers = 2}

-- Causal self-attention: one Linear makes queries, keys and values for all
-- heads at once; each head attends to the positions up to its own.
local SelfAttention = nn.Module:extend("SelfAttention")
function SelfAttention:init(c)
  self.heads = c.heads
  self.qkv = nn.Linear(c.embd, 3 * c.embd)
  self.proj = nn.Linear(c.embd, c.embd)
end
function SelfAttention:forward(x)
  local B, T, E = x:size(1), x:size(2), x:size(3)
  local H = self.heads
  local q, k, v = unpack(self.qkv(x):chunk(3, 3))                -- each [B, T, E]
  local function split(t) return t:reshape(B, T, H, E / H):transpose(2, 3) end -- [B, H, T, E/H]
  local y = nn.scaled_dot_product_attention(split(q), split(k), split(v), {is_causal = true})
  return self.proj(y:transpose(2, 3):reshape(B, T, E))          -- heads side by side again
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
  self.block_size = c.block
  self.tok_emb = nn.Embedding(c.vocab, c.embd)
  self.pos_emb = nn.Embedding(c.block, c.embd)
  self.blocks = nn.ModuleList()
  for _ = 1, c.layers do self.blocks:append(Block(c)) end
  self.ln_f = nn.LayerNorm(c.embd)
  self.head = nn.Linear(c.embd, c.vocab, false)
  -- GPT-2's init: small normal weights everywhere.
  for _, np in ipairs(self:named_parameters()) do
    if np[2]:dim() == 2 then nn.init.normal_(np[2], 0, 0.02) end
  end
end
function GPT:forward(idx) -- idx [B, T] of token ids -> logits [B, T, vocab]
  local T = idx:size(2)
  local x = self.tok_emb(idx) + self.pos_emb(tensor.arange(1, T + 1))
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(self.ln_f(x))
end

local model = dist.data_parallel(GPT(cfg):to_gpu("persistent"))
local n = 0
for _, p in ipairs(model:parameters()) do n = n + p:numel() end
say("GPT: %d layers, %d heads, %d-wide, %d parameters", cfg.layers, cfg.heads, cfg.embd, n)

-- Weight decay pulls the matrices towards zero; biases, LayerNorm's gains and
-- the embeddings are left alone.
local decay, no_decay = {}, {}
for _, np in ipairs(model:named_parameters()) do
  local name, p = np[1], np[2]
  if p:dim() >= 2 and not name:find("emb") then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
end
local opt = optim.adamw({{params = decay, weight_decay = 0.1}, {params = no_decay, weight_decay = 0}},
  {lr = 3e-3, betas = {0.9, 0.95}})
say("AdamW: %d matrices with weight decay, %d tensors without", #decay, #no_decay)
-- The rate rises linearly over the first tenth of the steps, then falls along
-- a cosine to eta_min by the last. After t calls of sched:step(), with
-- W = warmup and N = total:
--   lr = lr0 * (t + 1) / (W + 1)                                         t < W
--   lr = eta_min + (lr0 - eta_min) * (1 + cos(pi * (t - W) / (N - W))) / 2   t >= W
local sched = optim.lr_scheduler.warmup_cosine(opt, {warmup = math.floor(steps / 10), total = steps, eta_min = 3e-4})

-- A batch of B windows of the text; every process draws the same starts
-- (the same seed) and keeps its own B / world of them.
local B, T = 16, cfg.block
assert(B % world == 0, "the batch of 16 must split evenly over the processes")
local function batch()
  local x, y = {}, {}
  for b = 1, B do
    local s = math.random(1, #ids - T)
    if (b - 1) % world == rank then
      local row = {}
      for t = 1, T do row[t] = ids[s + t - 1]; y[#y + 1] = ids[s + t] end
      x[#x + 1] = row
    end
  end
  return tensor(x), y
end
local function loss_of(m, x, y)
  return nn.cross_entropy(m(x):reshape(#y, V), y)
end

local first_loss, last_loss
for step = 1, steps do
  local x, y = batch()
  opt:zero_grad()
  local loss = with_grad_tape(function() return loss_of(model, x, y) end)
  backward(loss)
  local norm = optim.clip_grad_norm(model:parameters(), 1.0) -- the norm before clipping
  local lr = opt:get_lr()                                      -- this step's rate
  opt:step()
  sched:step()
  -- the whole batch's (NCCL sums device memory: to_gpu, a no-op on the CPU)
  last_loss = dist.all_reduce(to_gpu(tensor{loss:item()}), "avg"):item()
  first_loss = first_loss or last_loss
  if step == 1 or step % math.max(1, math.floor(steps / 8)) == 0 then
    say("step %4d  loss %.4f  lr %.5f  grad norm %.3f", step, last_loss, lr, norm:item())
  end
end
say("loss %.3f -> %.3f (uniform guessing: %.3f)", first_loss, last_loss, math.log(V))
if rank ~= 0 then return end -- one process writes the checkpoint and samples

-- A checkpoint: the state dict goes to a GGUF file, and a fresh model of the
-- same shape takes it back. Both give the same loss on the same batch. (To
-- resume training, save opt:state_dict() and sched:state_dict() with it: see
-- docs/GETTING_STARTED.md, "Checkpoints and resuming".)
tensor.save(ckpt_path, {model = model:state_dict(), step = steps, config = cfg})
local ck = tensor.load(ckpt_path)
local restored = GPT(ck.config)
restored:load_state_dict(ck.model)
model:eval(); restored:eval()
local x, y = batch()
local a = no_grad(function() return loss_of(model, x, y) end):item()
local b = no_grad(function() return loss_of(restored, x, y) end):item()
print(string.format("checkpoint %s (step %d): loss %.4f, restored %.4f", ckpt_path, ck.step, a, b))

-- Sampling from the restored model: feed the last block_size characters,
-- take the last position's logits, divide by the temperature, draw.
local out = {"T", "w"}
local context = {id["T"], id["w"]}
no_grad(function()
  for _ = 1, sample_length do
    local window = {}
    for i = math.max(1, #context - cfg.block + 1), #context do window[#window + 1] = context[i] end
    local logits = restored(tensor{window})[1][#window]   -- [V]
    local next_id = tensor.multinomial((logits / 0.8):softmax(1), 1):item()
    context[#context + 1] = next_id
    out[#out + 1] = chars[next_id]
  end
end)
print(string.format("sample (%d characters):", #out))
print("----")
print(table.concat(out))
print("----")
