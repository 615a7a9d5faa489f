-- scripts/bench/gpu_residency.lua - what resident weights save on a GPU.
--
-- An MLP of 4 hidden layers of 4096 (input 1024, 10 classes), batch 64,
-- trained three ways, each timed after warm-up:
--   persistent  weights in the persistent pool, Adam on the device: a step
--               uploads only its batch;
--   reupload    weights kept on the host and uploaded every step (what a
--               single pass-scoped pool forces), forward + backward only;
--   fwd+bwd     the persistent weights, forward + backward only, to compare
--               with reupload like for like.
--
--   gglua --device cuda scripts/bench/gpu_residency.lua [steps]
local steps = tonumber(arg and arg[1]) or 30
local sizes = {1024, 4096, 4096, 4096, 4096, 10}
local batch = 64
tensor.manual_seed(0)

local mlp = dofile(((arg and arg[0] or ""):match("^(.*/)") or "") .. "bench_mlp.lua") -- the benchmark MLP
local function make_model() return mlp(sizes) end

local x = tensor.randn(batch, sizes[1])
local labels = {}
for i = 1, batch do labels[i] = (i % 10) + 1 end

local function run(name, model, opt)
  local function step()
    if opt then opt:zero_grad() else tensor.zero_grad(model:parameters()) end
    local loss = with_grad_tape(function() return nn.cross_entropy(model(x), labels) end)
    backward(loss)
    if opt then opt:step() end
    return loss:item()
  end
  for _ = 1, 3 do step() end
  local s0, t0 = residency.stats(), device.clock()
  for _ = 1, steps do step() end
  local dt, s1 = device.clock() - t0, residency.stats()
  local h2d = (s1.h2d_bytes - s0.h2d_bytes) / steps
  print(string.format("%-11s %8.1f steps/s  %10.0f h2d bytes/step  %6.2f ms/step  persistent pool %d MiB",
    name, steps / dt, h2d, 1000 * dt / steps, math.floor(s1.p_buffer_bytes / 2^20)))
  return steps / dt, h2d
end

print(string.format("device %s, batch %d, layers %s", device.current(), batch, table.concat(sizes, "-")))
print(string.format("the batch is %d bytes", batch * sizes[1] * 4 + batch * 10 * 4))
local resident = make_model():to_gpu("persistent")
local p_rate = run("persistent", resident, optim.adam(resident:parameters(), {lr = 1e-4}))
local f_rate = run("fwd+bwd", resident, nil)
residency.reset()
local host = make_model() -- parameters stay on the host: uploaded every step
local r_rate = run("reupload", host, nil)
print(string.format("fwd+bwd with resident weights is %.1fx the re-uploading step", f_rate / r_rate))
