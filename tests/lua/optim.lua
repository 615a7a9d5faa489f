-- Optimizers from Lua: state dicts, schedulers, clipping.

local function quad_step(p, opt)
  opt:zero_grad()
  local loss = with_grad_tape(function() return ((p - 1) ^ 2):sum() end)
  backward(loss)
  opt:step()
  return loss
end

local p = tensor.param(tensor{3, -1})
local opt = optim.adam({p}, {lr = 0.1, betas = {0.9, 0.99}})
for _ = 1, 3 do quad_step(p, opt) end
local sd = opt:state_dict()
assert(sd.step == 3 and sd["state.1.exp_avg"] ~= nil, "torch-style state names")

-- A second optimizer resumed from the state takes the same next step.
local q = tensor.param(tensor(p:totable()))
local opt2 = optim.adam({q}, {lr = 0.1, betas = {0.9, 0.99}})
opt2:load_state_dict(sd)
quad_step(p, opt)
quad_step(q, opt2)
assert(p:totable()[1] == q:totable()[1] and p:totable()[2] == q:totable()[2])

-- Schedulers drive the optimizer's learning rate.
local s = optim.lr_scheduler.step(opt, {step_size = 2, gamma = 0.5})
assert(math.abs(opt:get_lr() - 0.1) < 1e-7)
s:step(); s:step()
assert(math.abs(opt:get_lr() - 0.05) < 1e-7)
local cos = optim.lr_scheduler.cosine(opt2, {t_max = 10})
for _ = 1, 10 do cos:step() end
assert(opt2:get_lr() < 1e-7)
local ok, err = pcall(optim.lr_scheduler.step, opt, {gamma = 0.5})
assert(not ok and err:find("step_size is required"), err)
ok, err = pcall(optim.lr_scheduler.cosine, {}, {t_max = 1})
assert(not ok and err:find("expected an optimizer"), err)

-- Clipping works on the device and returns the norm.
local w = tensor.param(tensor{0, 0})
local o = optim.sgd({w}, {lr = 1})
o:zero_grad()
backward(with_grad_tape(function() return (w * tensor{3, 4}):sum() end))
local norm = optim.clip_grad_norm({w}, 1)
assert(math.abs(norm:item() - 5) < 1e-5)
assert(math.abs(w.grad:totable()[2] - 0.8) < 1e-5)
o:step()
assert(math.abs(w:totable()[1] + 0.6) < 1e-5)
