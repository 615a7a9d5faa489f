-- tests/gpu/compare.lua - the same computations on the CPU and on the GPU
-- (device.use), compared with a TF32-level tolerance: ggml-cuda runs f32
-- matmuls as TF32, relative error ~1e-5 of the sum of |a*b|.
--   gglua tests/gpu/compare.lua cuda
local gpu = arg and arg[1] or "cuda"

local function run()
  tensor.manual_seed(11)
  local model = nn.Sequential{nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10)}:to_gpu("persistent")
  local opt = optim.adam(model:parameters(), {lr = 1e-2})
  local x = tensor.randn(32, 64)
  local labels = {}
  for i = 1, 32 do labels[i] = (i * 7) % 10 + 1 end
  local losses = {}
  for s = 1, 5 do
    opt:zero_grad()
    local loss = with_grad_tape(function() return nn.cross_entropy(model(x), labels) end)
    backward(loss)
    opt:step()
    losses[s] = loss:item()
  end
  local out = model(x)
  return {
    losses = losses,
    out = out:totable(),
    sm = out:softmax(2):sum(2):totable(),
    mx = out:max(2):totable(),
    w = model[1].weight:totable(),
    emb = tensor.randn(5, 3):index_select(1, {2, 5}):totable(),
  }
end

local function max_rel(a, b, path, worst)
  if type(a) == "table" then
    for k, v in pairs(a) do worst = max_rel(v, b[k], path .. "." .. tostring(k), worst) end
    return worst
  end
  local err = math.abs(a - b) / (1 + math.abs(b))
  assert(err == err, "NaN at " .. path)
  if err > worst.err then worst.err, worst.path = err, path end
  return worst
end

device.use("cpu")
local cpu = run()
device.use(gpu)
print("comparing on " .. device.current())
local g = run()
local worst = max_rel(g, cpu, "", {err = 0, path = ""})
print(string.format("largest relative difference %.2e at %s", worst.err, worst.path))
assert(worst.err < 2e-3, "GPU and CPU disagree beyond TF32 rounding")
print("gpu matches cpu")
