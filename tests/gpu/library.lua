-- tests/gpu/library.lua - issue [12]'s library on the CPU and on the GPU:
-- every case computes values and the gradients of its inputs on each
-- device (device.use), and the two are compared with a TF32-level
-- tolerance. A case that fails on one device (an op the backend lacks) is
-- reported by name; the script fails if any case fails or disagrees.
--   gglua tests/gpu/library.lua cuda
local gpu = arg and arg[1] or "cuda"

local function P(t) return tensor.param(t) end

-- Each case returns a function of fresh inputs that returns a loss and a
-- table of tensors to compare (values), after which the inputs' gradients
-- are compared too.
local cases = {}
local function case(name, inputs, f, o)
  o = o or {}
  cases[#cases + 1] = {name = name, inputs = inputs, f = f, autocast = o.autocast, tol = o.tol or 1e-3}
end

local function seeded(...)
  tensor.manual_seed(5)
  return tensor.randn(...)
end

case("index and ranges", function() return {P(seeded(3, 4))} end, function(x)
  local y = x[2] * 2 + x[{ {}, {2, 3} }]:sum(2):reshape(3)[1] + x:select(2, 4):sum()
  return y:sum(), {y}
end)
case("shape ops", function() return {P(seeded(2, 3, 4))} end, function(x)
  local a = x:unsqueeze(1):squeeze(1):flatten(2):unflatten(2, {3, 4})
  local b = tensor.stack({x, x:flip(3)}, 2):sum(2)
  local c = x:chunk(2, 3)[2]:tile(1, 1, 2) + x:expand(2, 3, 4)
  local parts = x:split({1, 2}, 2)
  return (a * b):sum() + c:sum() + parts[2]:sum(), {a, b, c, parts[1]}
end)
case("math and masks", function() return {P(seeded(4, 5))} end, function(x)
  local s = x:sin() + x:cos() * 0.5 + (x * 3):round() + x:floor() + x:ceil() + x:trunc() + x:sign()
  local r = (x:abs() + 1):rsqrt() + (x:abs() + 1):log1p() + (x:abs() + 0.5):reciprocal() + x:square()
  local m = tensor.where(x:gt(0), x, x * 0.1) + x:masked_fill(x:lt(-0.5), 7) + x:tril(1) + x:triu()
  local e = tensor.maximum(x, x:t():t() * 0.5) + tensor.minimum(x, x * -1)
  local masks = x:ge(0):logical_and(x:le(1)) + x:isnan() + x:isfinite() + x:ne(0):any(2):reshape(4, 1)
  return (s + r + m + e):sum() + masks:sum(), {s, r, m, e, masks}
end)
case("activations", function() return {P(seeded(4, 6) * 4), P(tensor{0.1, -0.2, 0.3, 0.4, 0.5, 0.6})} end, function(x, w)
  local ys = {nn.leaky_relu(x, 0.2), nn.elu(x, 0.5), nn.selu(x), nn.softplus(x, 2, 5), nn.mish(x), nn.hardtanh(x, -2, 1),
    nn.hardswish(x), nn.prelu(x, w)}
  local loss = ys[1]:sum()
  for i = 2, #ys do loss = loss + ys[i]:sum() * i end
  return loss, ys
end)
case("masks past 65535 elements", function() return {P(seeded(300, 301))} end, function(x)
  local y = x:masked_fill(x:gt(1), 0) + tensor.where(x:lt(-1), x * 2, x)
  local c = (x * x):tril()
  return (y * c):sum(), {y:sum(), c:sum()}
end)
case("sums past repeat_back's limit", function() return {P(seeded(256, 160, 2, 2)), P(seeded(160, 2, 2))} end, function(x, b)
  -- ne2*ne3 = 160*256 > 32768: ggml-cuda's repeat_back takes at most 32768
  local y = (x + b) * x:sum(2, true) + x:sum(1, true)
  return (y * y):mean(), {y:sum(), x:sum(3)}
end)
case("row gradients past 65535", function() return {P(seeded(70000, 4)), P(seeded(300, 301))} end, function(w, x)
  -- get_rows_back (the gradient of index_select, gather, sort; the
  -- scatters) launches a grid row per output row: at most 65535 on CUDA
  local e = w:index_select(1, {1, 69999, 70000, 5, 69999})
  local g = x:gather(2, {{1, 301}, {300, 2}})
  local s = x:reshape(90300):sort()
  local sc = tensor.zeros(70000, 4):index_add(1, {70000, 3}, e:narrow(1, 1, 2))
  return (e * e):sum() + g:sum() + (s * tensor.arange(90300) / 90300):sum() + (sc * sc):sum(), {e, g, s:narrow(1, 1, 5), sc:sum()}
end)
case("cat past 65535", function() return {P(seeded(70000, 3)), P(seeded(2, 65537)), P(seeded(3, 70001, 1))} end, function(a, b, c)
  -- ggml-cuda's concat launches ne1 and ne2 as grid dims (at most 65535):
  -- cat takes a row layout there (concatRows); 65537 and 70001 have no
  -- divisors to spread over two grid dims
  local x = a:cat(a * 2, 2)               -- rows past the limit
  local y = tensor.cat({b, b:flip(1)}, 1)  -- columns past it, prime
  local cc = c:cat(c, 3)                   -- a middle dim past it
  local z = cc:cat(cc * 3, 1)
  return (x * x):sum() + (y * y):mean() + z:sum(), {x:sum(1), y:narrow(2, 65530, 8), z:sum(2)}
end)
case("reductions", function() return {P(seeded(3, 6))} end, function(x)
  local v = x:var(2) + x:std(2, false) + x:logsumexp(2) + x:norm(2, 2) + x:norm(1, 2) + x:norm(3, 2) + x:prod(2)
  local c = x:cumsum(2)
  return v:sum() + (c * c):sum(), {v, c}
end)
case("sort and gather", function() return {P(seeded(3, 6))} end, function(x)
  local s, i = x:sort(2, true)
  local t = x:topk(3, 2)
  local g = x:gather(2, {{1, 2}, {6, 5}, {3, 3}})
  local sa = x:scatter_add(2, {{1, 1}, {2, 3}, {6, 6}}, g)
  local ia = x:index_add(1, {3, 1}, x:narrow(1, 1, 2))
  local ms = x:masked_select(x:gt(0))
  return (s * s):sum() + t:sum() + (sa * ia):sum() + ms:sum(), {s, i, t, g, sa, ia, ms}
end)
case("matmul 4-d", function() return {P(seeded(2, 3, 4, 5)), P(seeded(3, 5, 2))} end, function(a, b)
  local y = a:matmul(b)
  local d = a[1][1][1]:dot(a[2][3][4]) + a[1][1][1]:outer(a[1][1][2]):sum()
  return y:sum() + d:sum(), {y, d}
end)
case("conv and pooling", function() return {P(seeded(2, 3, 9, 9)), P(seeded(4, 3, 3, 3)), P(seeded(4))} end, function(x, w, b)
  local y = nn.conv2d(x, w, b, {stride = 2, padding = 1})
  local g = nn.conv2d(x, seeded(6, 1, 3, 3), nil, {groups = 3, dilation = 2})
  -- max pooling of x itself: after a TF32 convolution a near-tie can pick
  -- another element on the GPU, which moves a whole gradient.
  local p = nn.avg_pool2d(y, 2) + nn.max_pool2d(x, 3, {stride = 4}):sum()
  local a = nn.adaptive_avg_pool2d(g, 1)
  local c1 = nn.conv1d(x[1], seeded(2, 9, 3), nil, {padding = 1})
  return (p * p):sum() + a:sum() + (c1 * c1):sum(), {y, g, p, a, c1}
end)
case("transposed convolutions", function() return {P(seeded(2, 4, 5, 5)), P(seeded(4, 3, 4, 4)), P(seeded(6))} end, function(x, w, b)
  local y = nn.conv_transpose2d(x, w, b, {stride = 2, padding = 1, output_padding = 1, groups = 2})
  local y1 = nn.conv_transpose1d(x[1], seeded(5, 2, 3), nil, {stride = 3, dilation = 2})
  return (y * y):sum() + (y1 * y1):sum(), {y, y1}
end)
case("interpolation", function() return {P(seeded(2, 3, 5, 6))} end, function(x)
  local b = nn.interpolate(x, {scale_factor = {1.6, 2}, mode = "bilinear"})
  local a = nn.interpolate(x, {size = {9, 4}, mode = "bilinear", align_corners = true})
  local n = nn.interpolate(x, {size = {7, 10}})
  return (b * b):sum() + (a * a):sum() + (n * n):sum(), {b, a, n}
end)
case("einsum, masks and repeats", function() return {P(seeded(2, 3, 4)), P(seeded(2, 5, 4)), P(seeded(6))} end, function(q, k, v)
  local s = tensor.einsum("bqd,bkd->bqk", q, k)
  local o = tensor.einsum("ij,jk,kl->il", q[1], k[2]:t(), seeded(5, 2))
  local m = q:masked_scatter(q:gt(0), v:repeat_interleave(tensor{1, 2, 3, 4, 5, 9}))
  return (s * s):sum() + (o * o):sum() + (m * m):sum(), {s, o, m}
end)
case("norms", function() return {P(seeded(4, 6, 3, 3))} end, function(x)
  local rm, rv = tensor.zeros(6), tensor.ones(6)
  local bn = nn.batch_norm(x, rm, rv, {training = true})
  local gn = nn.group_norm(x, 2)
  local rn = nn.rms_norm(x, {3, 3})
  local ln = x:layer_norm()
  return (bn * gn):sum() + (rn * rn):sum() + ln:sum(), {bn, gn, rn, rm, rv}
end)
case("layer norm, rows of 64", function() return {P(seeded(5, 7, 64)), P(seeded(64)), P(seeded(64))} end, function(x, w, b)
  -- gglua's fused nodes on both devices (layer_norm.c, gglua-layer-norm.cuh)
  local y = x:layer_norm(w, b) * (x + 1)
  local z = (x * 3):layer_norm()
  return y:sum() + (z * z * x):sum(), {y, z}
end)
case("layer norm, 300 rows of 770, weight or bias", function() return {P(seeded(300, 770) * 2 + 3), P(seeded(770)), P(seeded(770))} end, function(x, w, b)
  local y = x:layer_norm(w) * x:layer_norm(nil, b)
  return (y * x):sum(), {y}
end)
case("attention", function() return {P(seeded(2, 2, 5, 8)), P(seeded(2, 2, 5, 8)), P(seeded(2, 2, 5, 4))} end, function(q, k, v)
  local y = nn.scaled_dot_product_attention(q, k, v, {is_causal = true})
  local m = nn.scaled_dot_product_attention(q, k, v, {attn_mask = tensor.ones(5, 5):tril(1)})
  return (y * m):sum(), {y, m}
end)
case("attention, rows of 70 keys", function() return {P(seeded(2, 3, 70, 16)), P(seeded(2, 3, 70, 16)), P(seeded(2, 3, 70, 16))} end, function(q, k, v)
  local y = nn.scaled_dot_product_attention(q, k, v, {is_causal = true})
  local n = nn.scaled_dot_product_attention(q, k, v, {scale = 0.3})
  return (y * n):sum() + y:sum(), {y, n}
end)
case("attention, heads of a chunked projection", function() return {P(seeded(2, 9, 3 * 24)), P(seeded(2, 7, 3 * 24))} end, function(x, m)
  -- heads split from a projection by chunk, reshape and transpose: strided
  -- views the GPU's products read in place; Tq != Tk, 3-d and 4-d
  local function heads(z, t) return z:reshape(2, t, 3, 8):transpose(2, 3) end
  local q, k, v = unpack(x:chunk(3, 3))
  local _, k2, v2 = unpack(m:chunk(3, 3))
  local y = nn.scaled_dot_product_attention(heads(q, 9), heads(k, 9), heads(v, 9), {is_causal = true})
  local c = nn.scaled_dot_product_attention(heads(q, 9), heads(k2, 7), heads(v2, 7), {scale = 0.2})
  local f = nn.scaled_dot_product_attention(q, k, v)
  return (y * c):sum() + f:sum(), {y, c, f}
end)
-- Under autocast a GPU runs the fused bf16 attention (gglua-flash-attn.cuh)
-- for heads of 16, 32, 64 or 128; the CPU composes bf16 products: both
-- round q, k, v and the weights to bf16, so they agree to bf16's 1e-2.
local function gpt_heads(z, t, h, d) return z:reshape(2, t, h, d):transpose(2, 3) end
case("autocast attention, heads of 64", function() return {P(seeded(2, 70, 3 * 128)), P(seeded(2, 130, 3 * 128))} end, function(x, m)
  local q, k, v = unpack(x:chunk(3, 3))
  local _, k2, v2 = unpack(m:chunk(3, 3))
  local y = nn.scaled_dot_product_attention(gpt_heads(q, 70, 2, 64), gpt_heads(k, 70, 2, 64), gpt_heads(v, 70, 2, 64), {is_causal = true})
  local c = nn.scaled_dot_product_attention(gpt_heads(q, 70, 2, 64), gpt_heads(k2, 130, 2, 64), gpt_heads(v2, 130, 2, 64))
  local o = y:transpose(2, 3):reshape(2, 70, 128)
  return (o * o):sum() + (c * y):sum(), {y, c}
end, {autocast = true, tol = 2e-2})
case("autocast attention, heads of 16, 32 and 128", function() return {P(seeded(3, 129, 32)), P(seeded(1, 65, 128)), P(seeded(2, 17, 16))} end, function(a, b, c)
  local y = nn.scaled_dot_product_attention(a, a * 0.5, a, {is_causal = true})
  local z = nn.scaled_dot_product_attention(b, b, b * 2, {is_causal = true, scale = 0.05})
  local w = nn.scaled_dot_product_attention(c, c:flip(2), c)
  return (y * y):sum() + (z * z):sum() + (w * w):sum(), {y, z, w}
end, {autocast = true, tol = 2e-2})
-- Autocast's products run as gglua's bf16 GEMM on a GPU: dims that are not
-- multiples of 8 (a 65-symbol head) go through zero-padded copies there,
-- and the bias gradients through the column-sum kernel.
case("autocast linear, odd and even sizes", function() return {P(seeded(2, 33, 70)), P(seeded(65, 70)), P(seeded(65)), P(seeded(64, 65))} end, function(x, w, b, w2)
  local h = x:linear(w, b)              -- [2, 33, 65]: m 66, n 65, k 70
  local y = h:gelu():linear(w2)         -- k 65, n 64
  local z = x:reshape(66, 70):t():matmul(h:reshape(66, 65)) -- ta: [70, 66] by [66, 65]
  return (y * y):sum() + z:sum(), {h, y, z}
end, {autocast = true, tol = 2e-2})
-- Aligned sizes: the bias rides in cuBLASLt's epilogue (gglua-kernels.cu).
case("autocast linear with its bias in the product", function() return {P(seeded(3, 40, 64)), P(seeded(96, 64)), P(seeded(96))} end, function(x, w, b)
  local h = x:linear(w, b)              -- m 120, n 96, k 64
  return (h * h):sum(), {h}
end, {autocast = true, tol = 2e-2})
-- nn.Sequential{Linear, GELU, Linear} under autocast: one op on a GPU
-- (core's MLP: the first product and GELU's result in bf16, the latter
-- made again by the backward), the CPU composes; a 3-d input, odd sizes
-- (padded products) and aligned ones (the biases in cuBLASLt's epilogue).
case("autocast MLP (Linear, GELU, Linear)", function() return {P(seeded(2, 37, 70)), P(seeded(3, 40, 64))} end, function(x, z)
  tensor.manual_seed(4)
  local odd = nn.Sequential{nn.Linear(70, 33), nn.GELU(), nn.Linear(33, 65)}
  local even = nn.Sequential{nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)}
  local y, u = odd(x), even(z)
  return (y * y):sum() + (u * z):sum(), {y, u}
end, {autocast = true, tol = 2e-2})
case("multihead attention", function() return {P(seeded(5, 2, 8))} end, function(x)
  tensor.manual_seed(9)
  local mha = nn.MultiheadAttention(8, 2)
  local y, w = mha(x, x, x, {is_causal = true})
  return (y * y):sum(), {y, w}
end)
case("recurrent", function() return {P(seeded(6, 2, 4))} end, function(x)
  tensor.manual_seed(3)
  local rnn, gru, lstm = nn.RNN(4, 5), nn.GRU(4, 5, {num_layers = 2}), nn.LSTM(4, 5, {bidirectional = true})
  local a, ha = rnn(x)
  local b, hb = gru(x)
  local c, st = lstm(x)
  return (a * a):sum() + (b * b):sum() + (c * c):sum() + st[2]:sum(), {a, ha, b, hb, c, st[1], st[2]}
end)
case("losses", function() return {P(seeded(6, 4)), P(seeded(6, 4))} end, function(x, y)
  local labels = {1, 4, 2, 3, 3, 1}
  local l = nn.nll_loss(x:log_softmax(2), labels) + nn.binary_cross_entropy_with_logits(x, y:sigmoid())
    + nn.l1_loss(x, y) + nn.smooth_l1_loss(x, y) + nn.huber_loss(x, y, {delta = 0.5})
    + nn.kl_div(x:log_softmax(2), y:softmax(2), {reduction = "batchmean"})
  return l, {l}
end)

local function run(c)
  local inputs = c.inputs()
  local loss, vals
  with_grad_tape(function()
    if c.autocast then
      autocast(function() loss, vals = c.f(unpack(inputs)) end)
    else
      loss, vals = c.f(unpack(inputs))
    end
    loss:backward()
  end)
  local r = {loss = loss:item(), values = {}, grads = {}}
  for i, v in ipairs(vals) do r.values[i] = v:totable() end
  for i, x in ipairs(inputs) do r.grads[i] = x.grad and x.grad:totable() or "none" end
  return r
end

-- max_err is the largest difference between a and b relative to 1 + the
-- largest magnitude in b's tensor (a norm-wise error: TF32's 10-bit
-- mantissa errs by about 1e-3 of the sum of a product's |terms|, not of
-- each result, which may cancel to near zero).
local function largest(b)
  if type(b) ~= "table" then return type(b) == "number" and b == b and math.abs(b) ~= math.huge and math.abs(b) or 0 end
  local m = 0
  for _, v in pairs(b) do m = math.max(m, largest(v)) end
  return m
end

local function max_err(a, b, path, worst, scale)
  if type(a) == "table" then
    for k, v in pairs(a) do worst = max_err(v, b[k], path .. "." .. tostring(k), worst, scale) end
    return worst
  end
  if type(a) ~= "number" then
    if a ~= b then worst.err, worst.path = math.huge, path end
    return worst
  end
  if a ~= a or b ~= b then -- NaN must be NaN on both
    if (a ~= a) ~= (b ~= b) then worst.err, worst.path = math.huge, path end
    return worst
  end
  if a == b then return worst end
  local err = math.abs(a - b) / (1 + (scale or math.abs(b)))
  if err > worst.err then worst.err, worst.path = err, path end
  return worst
end

-- compare is the worst difference of two runs, each tensor's scaled by its
-- own largest magnitude on the CPU.
local function compare(g, cpu)
  local worst = max_err(g.loss, cpu.loss, ".loss", {err = 0, path = ""})
  for _, part in ipairs({"values", "grads"}) do
    for i, t in pairs(cpu[part]) do
      worst = max_err(g[part][i], t, "." .. part .. "." .. i, worst, largest(t))
    end
  end
  return worst
end

local failed = 0
for _, c in ipairs(cases) do
  device.use("cpu")
  local ok_cpu, cpu = pcall(run, c)
  device.use(gpu)
  local ok_gpu, g = pcall(run, c)
  device.use("cpu")
  if not ok_cpu or not ok_gpu then
    failed = failed + 1
    print(string.format("FAIL %-22s cpu: %s | gpu: %s", c.name, ok_cpu and "ok" or tostring(cpu), ok_gpu and "ok" or tostring(g)))
  else
    local worst = compare(g, cpu)
    local verdict = worst.err < c.tol and "ok  " or "DIFF"
    if worst.err >= c.tol then failed = failed + 1 end
    print(string.format("%s %-22s largest difference %.2e at %s", verdict, c.name, worst.err, worst.path))
  end
end
print(string.format("%d of %d cases failed or disagree", failed, #cases))
assert(failed == 0, "the library differs between the CPU and " .. gpu)
