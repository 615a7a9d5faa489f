-- Optimizers and modules made again and again (a REPL, a hyper-parameter
-- sweep) give their persistent memory back once nothing references them
-- (issue [11] #12): 400 x optim.adam({p}), each stepped once, on a 256x256 p
-- held 535 MB.

tensor.manual_seed(1)
local p = tensor.param(tensor.randn(256, 256))
local moments = 2 * 256 * 256 * 4 -- what one adam keeps for p

local function step(opt)
  opt:zero_grad()
  backward(with_grad_tape(function() return (p * p):sum() end))
  opt:step()
  return p:sum():item()
end

local function in_use(s) return s.p_buffer_bytes - s.p_free_bytes end

step(optim.adam({p}))
collectgarbage()
local one = residency.stats()
assert(one.p_free_bytes >= 0 and one.p_free_bytes <= one.p_buffer_bytes, "p_free_bytes in range")

local peak = 0
for i = 1, 400 do
  local opt = optim.adam({p}, {lr = 1e-3})
  step(opt)
  if i % 20 == 0 then peak = math.max(peak, residency.stats().p_buffer_bytes) end
end
assert(peak <= one.p_buffer_bytes + 8 * moments,
  "400 dropped optimizers: the persistent pool peaked at " .. peak .. " bytes, one optimizer held " .. one.p_buffer_bytes)
collectgarbage()
local s = residency.stats()
assert(in_use(s) <= in_use(one), "in use after the loop " .. in_use(s) .. ", after one optimizer " .. in_use(one))

-- Without a tape in between: p keeps its gradient, each optimizer steps
-- once and its work is computed (sync), then it is dropped.
local q = tensor.param(tensor.randn(256, 256))
backward(with_grad_tape(function() return (q * q):sum() end))
sync()
local start = residency.stats()
local qpeak = 0
for i = 1, 200 do
  local o = optim.sgd({q}, {lr = 1e-3, momentum = 0.9}) -- one buffer of 256 KiB each
  o:step()
  sync()
  qpeak = math.max(qpeak, residency.stats().p_buffer_bytes)
end
assert(qpeak <= start.p_buffer_bytes + 8 * 256 * 256 * 4,
  "200 dropped sgd optimizers: the persistent pool peaked at " .. qpeak .. " bytes, from " .. start.p_buffer_bytes)

-- The optimizer a script keeps is untouched by the churn around it.
local kept = optim.adam({p}, {lr = 1e-2})
step(kept)
local sd = kept:state_dict()
local m = sd["state.1.exp_avg"]:totable()
for i = 1, 50 do
  local o = optim.sgd({p}, {lr = 0, momentum = 0.9})
  step(o)
end
collectgarbage()
local m2 = kept:state_dict()["state.1.exp_avg"]:totable()
for r = 1, 256, 51 do
  for c = 1, 256, 37 do assert(m[r][c] == m2[r][c], "a kept moment changed at " .. r .. "," .. c) end
end

-- Modules too: a fresh model per trial, on the device, trained a step.
local x = tensor.randn(8, 256)
local before = residency.stats()
local mpeak = 0
for i = 1, 100 do
  local model = nn.Sequential{nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4)}:to_gpu()
  local opt = optim.adam(model:parameters())
  backward(with_grad_tape(function() return model(x):sum() end))
  opt:step()
  sync()
  if i % 10 == 0 then mpeak = math.max(mpeak, residency.stats().p_buffer_bytes) end
end
local per_model = (256 * 256 + 256 + 256 * 4 + 4) * 4 * 4 -- weights, grads, two moments
assert(mpeak <= before.p_buffer_bytes + 8 * per_model,
  "100 dropped models: the persistent pool peaked at " .. mpeak .. " bytes, one model holds about " .. per_model)
