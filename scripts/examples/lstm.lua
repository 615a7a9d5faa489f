-- scripts/examples/lstm.lua - a character-level LSTM language model: it reads
-- a short poem one character at a time, learns to predict the next character,
-- then writes new text in the same style.
--
-- It shows:
--   * turning text into 1-based token ids and back;
--   * a model of your own with nn.Module:extend: nn.Embedding -> nn.LSTM
--     (batch_first) -> nn.Linear, whose parameters register themselves;
--   * training on random windows of the text with cross_entropy over every
--     position, Adam and gradient clipping;
--   * sampling: carrying the LSTM's state {h, c} from one character to the
--     next and drawing each character with tensor.multinomial from
--     softmax(logits / temperature).
--
--   gglua scripts/examples/lstm.lua [steps] [sample_length] [temperature]
--
-- It prints the loss every few steps, then "sample (N characters):" and the
-- text, between two lines of dashes.

local steps = tonumber(arg and arg[1]) or 300
local sample_length = tonumber(arg and arg[2]) or 200
local temperature = tonumber(arg and arg[3]) or 0.8

-- Edward Lear, "The Owl and the Pussy-cat" (1871), first stanza.
local text = [[
The Owl and the Pussy-cat went to sea
In a beautiful pea-green boat,
They took some honey, and plenty of money,
Wrapped up in a five-pound note.
The Owl looked up to the stars above,
And sang to a small guitar,
"O lovely Pussy! O Pussy, my love,
What a beautiful Pussy you are,
You are,
You are!
What a beautiful Pussy you are!"
]]

-- 1. A vocabulary: every character that occurs gets an id 1..V.
local id, chars = {}, {}
for c in text:gmatch(".") do
  if not id[c] then chars[#chars + 1] = c; id[c] = #chars end
end
local V = #chars
local ids = {}
for i = 1, #text do ids[i] = id[text:sub(i, i)] end
print(string.format("%d characters of text, a vocabulary of %d", #text, V))

tensor.manual_seed(3)
math.randomseed(3)

-- 2. The model. forward takes ids [B, T] and an optional state, and returns
-- logits [B, T, V] and the new state.
local CharLSTM = nn.Module:extend("CharLSTM")
function CharLSTM:init(vocab, dim, hidden)
  self.embed = nn.Embedding(vocab, dim)
  self.lstm = nn.LSTM(dim, hidden, {batch_first = true})
  self.head = nn.Linear(hidden, vocab)
end
function CharLSTM:forward(idx, state)
  local out, new_state = self.lstm(self.embed(idx), state) -- out [B, T, hidden]
  return self.head(out), new_state
end

local model = CharLSTM(V, 16, 96):to_gpu("persistent")
print(model)
local opt = optim.adam(model:parameters(), {lr = 0.01})

-- 3. Training. Each batch holds B windows of T characters; the target of
-- position t is the character at t + 1.
local B, T = 16, 24
local function batch()
  local inputs, targets = {}, {}
  for b = 1, B do
    local start = math.random(1, #ids - T)
    inputs[b] = {}
    for t = 1, T do
      inputs[b][t] = ids[start + t - 1]
      targets[#targets + 1] = ids[start + t] -- row-major, as logits:reshape below
    end
  end
  return tensor(inputs), targets
end

local first_loss, last_loss
for step = 1, steps do
  local x, y = batch()
  opt:zero_grad()
  local loss = with_grad_tape(function()
    local logits = model(x)
    return nn.cross_entropy(logits:reshape(B * T, V), y)
  end)
  backward(loss)
  optim.clip_grad_norm(model:parameters(), 1.0) -- LSTMs like their gradients bounded
  opt:step()
  last_loss = loss:item()
  first_loss = first_loss or last_loss
  if step == 1 or step % math.max(1, math.floor(steps / 6)) == 0 then
    print(string.format("step %4d  loss %.3f", step, last_loss))
  end
end
print(string.format("loss %.3f -> %.3f (uniform guessing: %.3f)", first_loss, last_loss, math.log(V)))

-- 4. Sampling. The prompt runs through the LSTM once; then each new character
-- goes in alone, with the state the previous call returned.
model:eval()
local prompt = "The Owl"
local out = {prompt}
no_grad(function()
  local prompt_ids = {}
  for i = 1, #prompt do prompt_ids[i] = id[prompt:sub(i, i)] end
  local logits, state = model(tensor{prompt_ids})
  for _ = 1, sample_length do
    local last = logits[1][logits:size(2)]                     -- [V]: the last position's logits
    local probs = (last / temperature):softmax(1)
    local next_id = tensor.multinomial(probs, 1):item()        -- a 1-based id
    out[#out + 1] = chars[next_id]
    logits, state = model(tensor{{next_id}}, state)
  end
end)
local sample = table.concat(out)
print(string.format("sample (%d characters):", #sample))
print("----")
print(sample)
print("----")
