-- nn.MultiheadAttention as torch.nn's, on the tensor API.
--
--   nn.MultiheadAttention(embed_dim, num_heads [, {bias=true, batch_first=false, dropout=0}])
--   mha(query, key, value [, {key_padding_mask=, attn_mask=, attn_bias=,
--       need_weights=true, average_attn_weights=true, is_causal=false}])
--     returns attn_output, attn_weights (nil unless need_weights)
--
-- query [L, N, E] (or [N, L, E] with batch_first, or unbatched [L, E]),
-- key and value [S, N, E]. The masks keep PyTorch's meaning for this
-- module: attn_mask [L, S] or [N*num_heads, L, S] and key_padding_mask
-- [N, S] hold 0 and 1, and 1 means "may not attend" (PyTorch's True);
-- PyTorch's float attn_mask (added to the scores) is attn_bias here, so
-- that a 0/1 mask is never taken for an additive one. Parameters, their
-- names and init are PyTorch's: in_proj_weight [3E, E] (xavier uniform),
-- in_proj_bias (zeros), out_proj (a Linear, bias zeros). The weights
-- returned are after dropout, averaged over heads unless
-- average_attn_weights is false, as PyTorch's.
local nn = nn

local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 3) end
end

local MHA = nn.Module:extend("MultiheadAttention")
nn.MultiheadAttention = MHA

local known = {bias = true, batch_first = true, dropout = true}
function MHA:init(embed_dim, num_heads, opts)
  local fn = "nn.MultiheadAttention"
  opts = opts or {}
  check(type(opts) == "table", fn, "options must be a table, got %s", type(opts))
  for k in pairs(opts) do check(known[k], fn, "unknown option %s", tostring(k)) end
  check(type(embed_dim) == "number" and embed_dim >= 1 and embed_dim % 1 == 0, fn, "embed_dim must be a positive integer, got %s", tostring(embed_dim))
  check(type(num_heads) == "number" and num_heads >= 1 and num_heads % 1 == 0 and embed_dim % num_heads == 0, fn,
    "num_heads must divide embed_dim (%s), got %s", tostring(embed_dim), tostring(num_heads))
  local dropout = opts.dropout or 0
  check(type(dropout) == "number" and dropout >= 0 and dropout < 1, fn, "dropout must be in [0, 1), got %s", tostring(dropout))
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.batch_first, self.dropout = opts.batch_first == true, dropout
  self.in_proj_weight = nn.init.xavier_uniform_(tensor.param(tensor.zeros(3 * embed_dim, embed_dim)))
  if opts.bias ~= false then
    self.in_proj_bias = tensor.param(tensor.zeros(3 * embed_dim))
  end
  self.out_proj = nn.Linear(embed_dim, embed_dim, opts.bias ~= false)
  if self.out_proj.bias then nn.init.zeros_(self.out_proj.bias) end
end

function MHA:describe()
  return string.format("MultiheadAttention(embed_dim=%d, num_heads=%d)", self.embed_dim, self.num_heads)
end

-- project is x [N, T, E] times rows part (1: q, 2: k, 3: v) of the input
-- projection, split into heads: [N, H, T, Dh].
function MHA:project(x, part)
  local E, H = self.embed_dim, self.num_heads
  local w = self.in_proj_weight:narrow(1, (part - 1) * E + 1, E)
  local y = x:linear(w)
  if self.in_proj_bias then y = y + self.in_proj_bias:narrow(1, (part - 1) * E + 1, E) end
  local n, t = y:size(1), y:size(2)
  return y:reshape(n, t, H, self.head_dim):permute(1, 3, 2, 4)
end

local call_known = {key_padding_mask = true, attn_mask = true, attn_bias = true, need_weights = true,
  average_attn_weights = true, is_causal = true}

function MHA:forward(query, key, value, opts)
  local fn = "MultiheadAttention"
  opts = opts or {}
  for k in pairs(opts) do check(call_known[k], fn, "unknown option %s", tostring(k)) end
  key, value = key or query, value or key or query
  local unbatched = query:dim() == 2
  if unbatched then
    query, key, value = query:unsqueeze(1), key:unsqueeze(1), value:unsqueeze(1)
  elseif not self.batch_first then
    query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
  elseif unbatched then
    query, key, value = query:unsqueeze(1), key:unsqueeze(1), value:unsqueeze(1)
  end
  if unbatched and self.batch_first then
    query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
  end
  -- now [N, T, E]
  check(query:size(3) == self.embed_dim and key:size(3) == self.embed_dim and value:size(3) == self.embed_dim, fn,
    "expected embeddings of size %d, got query %s, key %s, value %s", self.embed_dim,
    table.concat(query:shape(), "x"), table.concat(key:shape(), "x"), table.concat(value:shape(), "x"))
  local N, L, S, H = query:size(1), query:size(2), key:size(2), self.num_heads
  local q, k, v = self:project(query, 1), self:project(key, 2), self:project(value, 3)
  local scores = q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(self.head_dim)) -- [N, H, L, S]
  if opts.attn_bias then
    local b = opts.attn_bias
    if b:dim() == 3 then b = b:reshape(N, H, L, S) end
    scores = scores + b
  end
  local blocked
  local function block(m)
    blocked = blocked and blocked:logical_or(m) or m
  end
  if opts.attn_mask then
    local m = opts.attn_mask
    if m:dim() == 3 then m = m:reshape(N, H, L, S) end
    block(m)
  end
  if opts.key_padding_mask then
    local m = opts.key_padding_mask
    if unbatched and m:dim() == 1 then m = m:unsqueeze(1) end
    block(m:reshape(N, 1, 1, S))
  end
  if opts.is_causal then block(tensor.ones(L, S):triu(1)) end
  if blocked then scores = scores:masked_fill(blocked, -1 / 0) end
  local weights = scores:softmax(-1)
  if self.training and self.dropout > 0 then weights = weights:dropout(self.dropout, true) end
  local out = weights:matmul(v):permute(1, 3, 2, 4):reshape(N, L, self.embed_dim)
  out = self.out_proj(out)
  if unbatched then
    out = out:squeeze(1)
  elseif not self.batch_first then
    out = out:transpose(1, 2)
  end
  if opts.need_weights == false then return out, nil end
  if opts.average_attn_weights ~= false then weights = weights:mean(2) end
  if unbatched then weights = weights:squeeze(1) end
  return out, weights
end
