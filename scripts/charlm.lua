-- scripts/charlm.lua - a character-level language model trained on gglua's
-- own Lua scripts and docs, then sampled. An MLP over the embeddings of the
-- last 3 characters predicts the next one (Bengio et al. 2003).
--
--   gglua scripts/charlm.lua [steps] [files...]

local steps = tonumber(arg and arg[1]) or 1500
local here = (arg and arg[0] or "scripts/charlm.lua"):match("^(.*)/[^/]*$") or "."
local files = {}
for i = 2, #(arg or {}) do files[#files + 1] = arg[i] end
if #files == 0 then
  files = {here .. "/train.lua", here .. "/xor.lua", here .. "/regression.lua", here .. "/charlm.lua",
           here .. "/../README.md", here .. "/../docs/BENCHMARKS.md"}
end

local text = {}
for _, f in ipairs(files) do
  local h = io.open(f, "r")
  if h then text[#text + 1] = h:read("*a"); h:close() end
end
text = table.concat(text, "\n")
assert(#text > 1000, "charlm: found too little text to train on")

-- Vocabulary: every byte that occurs, 1-based ids.
local id, chars = {}, {}
for c in text:gmatch(".") do
  if not id[c] then chars[#chars + 1] = c; id[c] = #chars end
end
local V, ctx, dim = #chars, 3, 24
local ids = {}
for i = 1, #text do ids[i] = id[text:sub(i, i)] end
print(string.format("%d characters of text, %d distinct", #text, V))

tensor.manual_seed(5)
math.randomseed(5)
local emb = nn.Embedding(V, dim)
local mlp = nn.Sequential{nn.Linear(ctx * dim, 192), nn.Tanh(), nn.Linear(192, V)}
local params = emb:parameters()
for _, p in ipairs(mlp:parameters()) do params[#params + 1] = p end
local opt = optim.adam(params, {lr = 0.01})

local function logits_of(contexts, batch)
  local e = emb(tensor(contexts)) -- [batch, ctx, dim]
  return mlp(e:reshape(batch, ctx * dim))
end

local batch = 128
for step = 1, steps do
  local contexts, targets = {}, {}
  for b = 1, batch do
    local p = math.random(1, #ids - ctx)
    contexts[b] = {ids[p], ids[p + 1], ids[p + 2]}
    targets[b] = ids[p + ctx]
  end
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.cross_entropy(logits_of(contexts, batch), targets) end)
  backward(loss)
  opt:step()
  if step % math.max(1, math.floor(steps / 5)) == 0 then
    print(string.format("step %5d  loss %.3f  (uniform guessing: %.3f)", step, loss:item(), math.log(V)))
  end
end

-- Sample 300 characters, starting from "loc".
local seed = {id["l"] or 1, id["o"] or 1, id["c"] or 1}
local out = {chars[seed[1]], chars[seed[2]], chars[seed[3]]}
for _ = 1, 300 do
  local p = logits_of({seed}, 1):softmax(2):totable()[1]
  local r, acc, pick = math.random(), 0, V
  for k = 1, V do
    acc = acc + p[k]
    if r <= acc then pick = k; break end
  end
  out[#out + 1] = chars[pick]
  seed = {seed[2], seed[3], pick}
end
print("sample:\n" .. table.concat(out))
