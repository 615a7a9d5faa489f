-- tests/gpu/replay.lua - steps replayed as CUDA graphs compute what steps
-- launched node by node compute (ggmlcgo/graph_replay.c):
--   gglua --device cuda tests/gpu/replay.lua
-- 1. A step whose loss ends a chain of adds, which ggml-cuda fuses into one
--    kernel and reads through the first add's memory: every step's loss and
--    its partial sums, read after the step, equal their parts' sums.
-- 2. LayerNorm with the loss read before backward (a forward-only graph,
--    where ggml-cuda would fuse x̂ into its weight's product if gglua let
--    it), and read after the step (one graph a step, replayed; its gradient
--    has chains of adds): losses and weights after 6 steps equal the CPU's.
-- Prints PASS or fails with the step and the numbers.
local function close(a, b, tol) return math.abs(a - b) <= tol * (1 + math.abs(b)) end

tensor.manual_seed(0)
local w = to_gpu(tensor.param(tensor.randn(64)), "persistent")
local opt = optim.adam({w}, {lr = 0.05})
for i = 1, 6 do
  opt:zero_grad()
  local s1, s2, s3, n1
  local loss = with_grad_tape(function()
    s1, s2, s3 = (w * w):sum(), (w * 3):sum(), w:sum()
    n1 = s1 + s2
    return n1 + s3
  end)
  backward(loss)
  opt:step()
  local l, a, b, c = loss:item(), s1:item(), s2:item(), s3:item()
  assert(close(l, a + b + c, 1e-5), string.format("step %d: loss %.6f, its parts sum to %.6f", i, l, a + b + c))
  assert(close(n1:item(), a + b, 1e-5), string.format("step %d: n1 %.6f, want %.6f", i, n1:item(), a + b))
end
local replays = residency.stats().graph_replays
if device.current() ~= "cpu" and os.getenv("GGLUA_CUDA_GRAPHS") ~= "0" then
  assert(replays >= 2, "steps were not replayed as CUDA graphs: " .. replays)
end

local function train(dev, early)
  device.use(dev)
  tensor.manual_seed(3)
  local ln = nn.LayerNorm(64)
  local x = tensor.randn(32, 64)
  if dev ~= "cpu" then ln:to_gpu("persistent") end
  local o = optim.adam(ln:parameters(), {lr = 0.1})
  local losses = {}
  for i = 1, 6 do
    o:zero_grad()
    local loss = with_grad_tape(function() return (ln(x) * x):sum() end)
    if early then losses[i] = loss:item() end -- the forward is computed alone
    backward(loss)
    o:step()
    if not early then losses[i] = loss:item() end -- one graph a step: replayed
  end
  local wv = ln.weight:totable()
  device.use("cpu")
  return wv, losses
end
local gpu = device.current()
for _, early in ipairs({true, false}) do
  local wg, lg = train(gpu, early)
  local wc, lc = train("cpu", early)
  local how = early and "loss read before backward" or "replayed"
  for i = 1, #wc do
    assert(close(wg[i], wc[i], 1e-3), string.format("layer norm (%s) weight %d: %s %.6f, cpu %.6f", how, i, gpu, wg[i], wc[i]))
  end
  for i = 1, #lc do
    assert(close(lg[i], lc[i], 1e-3), string.format("layer norm (%s) loss %d: %s %.6f, cpu %.6f", how, i, gpu, lg[i], lc[i]))
  end
end
print(string.format("PASS replay: %d steps replayed, layer norm as the CPU's", replays))
