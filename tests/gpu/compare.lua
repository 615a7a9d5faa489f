-- tests/gpu/compare.lua - the same computations on the CPU and on the GPU
-- (device.use), compared with a TF32-level tolerance: ggml-cuda runs f32
-- matmuls as TF32 (relative error ~1e-5 of the sum of |a*b|).
--   gglua tests/gpu/compare.lua cuda
local gpu = arg and arg[1] or "cuda"

local function run()
  tensor.manual_seed(11)
  local model = nn.Sequential{nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10)}:to_gpu("persistent")
  local x = tensor.randn(32, 64)
  local labels = {}
  for i = 1, 32 do labels[i] = (i * 7) % 10 + 1 end
  -- One forward and backward: values and gradients.
  local loss = with_grad_tape(function() return nn.cross_entropy(model(x), labels) end)
  backward(loss)
  local out = model(x)
  local r = {
    loss = loss:item(),
    out = out:totable(),
    sm = out:softmax(2):sum(2):totable(),
    mx = out:max(2):totable(),
    g1 = model[1].weight.grad:totable(),
    g4 = model[4].bias.grad:totable(),
    rows = tensor.randn(5, 3):index_select(1, {2, 5}):totable(),
  }
  -- Then Adam steps: the losses must follow the same course. (Weights are
  -- not compared element by element: Adam divides by the gradient's size, so
  -- where a gradient is near zero TF32's rounding decides the step.)
  local opt = optim.adam(model:parameters(), {lr = 1e-2})
  local losses = {}
  for s = 1, 5 do
    opt:zero_grad()
    local l = with_grad_tape(function() return nn.cross_entropy(model(x), labels) end)
    backward(l)
    opt:step()
    losses[s] = l:item()
  end
  return r, losses
end

local function max_err(a, b, path, worst)
  if type(a) == "table" then
    for k, v in pairs(a) do worst = max_err(v, b[k], path .. "." .. tostring(k), worst) end
    return worst
  end
  local err = math.abs(a - b) / (1 + math.abs(b))
  assert(err == err, "NaN at " .. path)
  if err > worst.err then worst.err, worst.path = err, path end
  return worst
end

device.use("cpu")
local cpu, cpu_losses = run()
device.use(gpu)
print("comparing on " .. device.current())
local g, g_losses = run()
local worst = max_err(g, cpu, "", {err = 0, path = ""})
print(string.format("values and gradients: largest difference %.2e at %s", worst.err, worst.path))
assert(worst.err < 1e-3, "GPU and CPU disagree beyond TF32 rounding")
local lw = max_err(g_losses, cpu_losses, "loss", {err = 0, path = ""})
print(string.format("5 Adam steps: largest loss difference %.2e (%s)", lw.err, lw.path))
assert(lw.err < 1e-2, "training on the GPU follows another course")

-- autocast: both devices multiply bf16-rounded operands and sum in f32 (a
-- GPU with gglua's kernels through its bf16 gemm, the CPU through ggml's
-- mul_mat), so they differ only in the order of the sums, and where a
-- gradient rounds to the other side of a bf16 step (hence 4e-3). The
-- first layer's weight is stored in bf16, read without a conversion.
local function run_autocast()
  tensor.manual_seed(12)
  local model = nn.Sequential{nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)}
  to_gpu(model[1].weight, {scope = "persistent", dtype = "bf16"})
  for _, i in ipairs{1, 3} do to_gpu(model[i].bias, "persistent") end
  to_gpu(model[3].weight, "persistent")
  -- 512 rows: the bias's gradient (summed from a bf16 one on a GPU) runs
  -- its kernel's several slices.
  local x = tensor.randn(512, 256)
  local labels = {}
  for i = 1, 512 do labels[i] = (i * 3) % 10 + 1 end
  local loss = with_grad_tape(function() return autocast(function() return nn.cross_entropy(model(x), labels) end) end)
  backward(loss)
  local out = autocast(function() return model(x) end)
  local off = (out - model(x)):abs():max():item()
  return {loss = loss:item(), out = out:totable(), g1 = model[1].weight.grad:totable(),
    b1 = model[1].bias.grad:totable(), g3 = model[3].weight.grad:totable()}, off
end
device.use("cpu")
local cpu_ac = run_autocast()
device.use(gpu)
local g_ac, off = run_autocast()
assert(off > 1e-3, "autocast's products differ from the f32 ones: " .. off)
local aw = max_err(g_ac, cpu_ac, "", {err = 0, path = ""})
print(string.format("autocast: largest difference %.2e at %s", aw.err, aw.path))
assert(aw.err < 4e-3, "autocast on the GPU and the CPU disagree")

-- Under autocast on a GPU a Linear layer with its bias returns bf16, as
-- PyTorch's autocast does; nn.Sequential keeps a ReLU's result in bf16 only
-- where nn's own Linear reads it next, so a model ending in a ReLU returns
-- f32, one ending in a Linear bf16; every gradient stays f32.
local function dtypes(model)
  local out
  local loss = with_grad_tape(function()
    out = autocast(function() return model(tensor.randn(4, 8)) end)
    return out:sum()
  end)
  backward(loss)
  for _, p in ipairs(model:parameters()) do assert(p.grad:dtype() == "f32", "a gradient is " .. p.grad:dtype()) end
  return out:dtype()
end
local function lin() return nn.Linear(8, 8) end
for name, c in pairs{
  pair = {nn.Sequential{lin(), nn.ReLU()}, "f32"},
  nested = {nn.Sequential{lin(), nn.ReLU(), nn.Sequential{lin()}}, "bf16"},
  two_pairs = {nn.Sequential{lin(), nn.ReLU(), lin(), nn.ReLU()}, "f32"},
  three_layers = {nn.Sequential{lin(), nn.ReLU(), lin(), nn.ReLU(), lin()}, "bf16"},
  mlp = {nn.Sequential{lin(), nn.GELU(), lin()}, "f32"},
} do
  local got = dtypes(c[1])
  assert(got == c[2], name .. ": a model's output under autocast is " .. got .. ", expected " .. c[2])
end
print("gpu matches cpu")
