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

-- state_dict right after step() (nothing read since) holds that step's
-- moments and count, and is a snapshot.
do
  local p = tensor.param(tensor{3, -1})
  local opt = optim.adam({p}, {lr = 0.1})
  quad_step(p, opt)
  opt:zero_grad()
  backward(with_grad_tape(function() return ((p - 1) ^ 2):sum() end))
  opt:step()
  local sd = opt:state_dict()
  local m = sd["state.1.exp_avg"]:totable()
  p:totable() -- computes anything still queued
  local again = opt:state_dict()
  assert(sd.step == 2 and again.step == 2, "two steps counted")
  local m2 = again["state.1.exp_avg"]:totable()
  assert(m[1] == m2[1] and m[2] == m2[2], "the moments of step 2, read right after it")
  quad_step(p, opt)
  local m3 = sd["state.1.exp_avg"]:totable()
  assert(m3[1] == m[1], "a state dict does not change with later steps")
  assert(opt:get_lr() == 0.1, "the rate as given")
end

-- NaN and inf settings are errors, not silent.
do
  local nan, inf = 0 / 0, 1 / 0
  local q = tensor.param(tensor{1, 2})
  for _, case in ipairs{
    {optim.sgd, {lr = nan}, "lr"}, {optim.sgd, {lr = inf}, "lr"}, {optim.sgd, {momentum = nan}, "momentum"},
    {optim.sgd, {dampening = inf}, "dampening"}, {optim.sgd, {weight_decay = nan}, "weight_decay"},
    {optim.adam, {lr = nan}, "lr"}, {optim.adam, {betas = {nan, 0.999}}, "beta 1"},
    {optim.adam, {betas = {0.9, inf}}, "beta 2"}, {optim.adamw, {eps = nan}, "eps"},
    {optim.adamw, {weight_decay = inf}, "weight_decay"},
  } do
    local ok, err = pcall(case[1], {q}, case[2])
    assert(not ok and err:find(case[3], 1, true), tostring(err))
  end
  local o = optim.sgd({q}, {lr = 0.1})
  for _, v in ipairs{nan, inf, -1} do
    local ok, err = pcall(o.set_lr, o, v)
    assert(not ok and err:find("set_lr"), tostring(err))
  end
  assert(o:get_lr() == 0.1)
  local ok, err = pcall(optim.clip_grad_norm, {q}, nan)
  assert(not ok and err:find("max_norm"), tostring(err))
  ok, err = pcall(optim.clip_grad_value, {q}, nan)
  assert(not ok and err:find("clip_value"), tostring(err))
  for _, case in ipairs{
    {"step", {step_size = 2, gamma = nan}, "gamma"}, {"step", {step_size = 2.5}, "step_size must be an integer"},
    {"cosine", {t_max = nan}, "t_max must be an integer"}, {"cosine", {t_max = 10, eta_min = inf}, "eta_min"},
    {"one_cycle", {max_lr = nan, total = 10}, "max_lr"}, {"one_cycle", {max_lr = 1, total = 10, pct_start = nan}, "pct_start"},
    {"warmup_cosine", {warmup = 1, total = inf}, "total must be an integer"},
  } do
    ok, err = pcall(optim.lr_scheduler[case[1]], o, case[2])
    assert(not ok and err:find(case[3], 1, true), tostring(err))
  end
  assert(o:get_lr() == 0.1, "refused schedulers leave the rate")
end

-- Schedulers as torch's: cosine past t_max rises again; one_cycle refuses
-- to step past its total; state_dict/load_state_dict resume a schedule.
do
  local q = tensor.param(tensor{1})
  local o = optim.sgd({q}, {lr = 1})
  local c = optim.lr_scheduler.cosine(o, {t_max = 2})
  c:step(); c:step()
  assert(math.abs(o:get_lr()) < 1e-12)
  c:step()
  assert(math.abs(o:get_lr() - 0.5) < 1e-12, "past t_max the cosine goes on: " .. o:get_lr())
  c:step()
  assert(math.abs(o:get_lr() - 1) < 1e-12)

  local o2 = optim.sgd({q}, {lr = 1})
  local oc = optim.lr_scheduler.one_cycle(o2, {max_lr = 1, total = 4})
  for _ = 1, 4 do oc:step() end
  local ok, err = pcall(oc.step, oc)
  assert(not ok and err:find("Tried to step 6 times. The specified number of total steps is 4", 1, true), tostring(err))

  local o3 = optim.sgd({q}, {lr = 0.2})
  local s3 = optim.lr_scheduler.step(o3, {step_size = 2, gamma = 0.5})
  for _ = 1, 3 do s3:step() end
  local osd, ssd = o3:state_dict(), s3:state_dict()
  assert(osd.initial_lr == 0.2 and ssd.kind == "step" and ssd.last_epoch == 3)
  s3:step()
  local want = o3:get_lr()

  local o4 = optim.sgd({q}, {lr = 0.2})
  o4:load_state_dict(osd)
  local s4 = optim.lr_scheduler.step(o4, {step_size = 2, gamma = 0.5})
  s4:load_state_dict(ssd)
  assert(s4:last_epoch() == 3)
  s4:step()
  assert(o4:get_lr() == want, "resumed: " .. o4:get_lr() .. " vs " .. want)
  ok, err = pcall(s4.load_state_dict, s4, c:state_dict())
  assert(not ok and err:find("cosine"), tostring(err))
end

-- zero_grad(set_to_none): true (the default, as torch 2) takes the
-- gradients away, and Adam skips a parameter without one; false makes each
-- gradient zeros in place (a reference held to it sees them), and Adam
-- steps with them: its moments decay, so the weight still moves.
do
  local function adam_then(zero)
    local w = tensor.param(to_gpu(tensor{1, 2}, "persistent"))
    local opt = optim.adam({w}, {lr = 0.1})
    backward(with_grad_tape(function() return (w * w):sum() end))
    opt:step()
    local held = w.grad
    zero(opt, w)
    opt:step()
    return w:totable(), w.grad, held
  end
  -- Adam by hand: step 1 with g = 2w, step 2 with g = 0.
  local function by_hand(w0, steps)
    local out = {}
    for i, x in ipairs(w0) do
      local m, v, g = 0, 0, 2 * x
      for t = 1, steps do
        if t == 2 then g = 0 end
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        x = x - 0.1 * (m / (1 - 0.9 ^ t)) / (math.sqrt(v / (1 - 0.999 ^ t)) + 1e-8)
      end
      out[i] = x
    end
    return out
  end
  local function close(a, b)
    for i = 1, #a do assert(math.abs(a[i] - b[i]) < 1e-5, ("%d: %.7f vs %.7f"):format(i, a[i], b[i])) end
  end
  local w, g = adam_then(function(opt) opt:zero_grad() end)
  assert(g == nil)
  close(w, by_hand({1, 2}, 1))
  for _, zero in ipairs({
    function(opt) opt:zero_grad(false) end,
    function(opt) opt:zero_grad({set_to_none = false}) end,
    function(_, p) tensor.zero_grad({p}, false) end,
  }) do
    local w2, g2, held = adam_then(zero)
    assert(g2 ~= nil, "set_to_none=false keeps a gradient")
    close(g2:totable(), {0, 0})
    close(held:totable(), {0, 0})
    close(w2, by_hand({1, 2}, 2))
  end
  local lin = nn.Linear(2, 1)
  backward(with_grad_tape(function() return lin(tensor{{1, 2}}):sum() end))
  lin:zero_grad(false)
  close(lin.weight.grad:totable()[1], {0, 0})
  -- A hand-written SGD loop (PyTorch's tutorial): host parameters, whose
  -- gradients live in the pass pool, zeroed in place between steps.
  local m = nn.Linear(2, 1)
  local losses = {}
  for step = 1, 3 do
    m:zero_grad(false)
    local l = with_grad_tape(function() return nn.mse_loss(m(tensor{{1, 2}, {3, 4}}), tensor{{1}, {2}}) end)
    backward(l)
    no_grad(function() for _, p in ipairs(m:parameters()) do p:sub_(p.grad * 0.01) end end)
    losses[step] = l:item()
  end
  assert(losses[3] < losses[2] and losses[2] < losses[1], "the loss falls")
  local ok, err = pcall(function() optim.sgd({lin.weight}, {lr = 1}):zero_grad({set_to_nne = false}) end)
  assert(not ok and err:find("set_to_nne"), err)
end

-- multi_step, exponential and linear from Lua: torch 1.13's rates (core's
-- tests check every step against torch); milestones must be a table.
do
  local p = tensor.param(tensor{1})
  local opt = optim.sgd({p}, {lr = 0.2})
  local s = optim.lr_scheduler.multi_step(opt, {milestones = {2, 5, 5}, gamma = 0.5})
  local lrs = {}
  for i = 1, 6 do s:step(); lrs[i] = s:get_last_lr()[1] end
  assert(math.abs(lrs[1] - 0.2) < 1e-12 and math.abs(lrs[2] - 0.1) < 1e-12 and math.abs(lrs[5] - 0.025) < 1e-12, table.concat(lrs, ","))
  local e = optim.lr_scheduler.exponential(optim.sgd({p}, {lr = 0.5}), {gamma = 0.9})
  e:step(); e:step()
  assert(math.abs(e:get_last_lr()[1] - 0.405) < 1e-12)
  local l = optim.lr_scheduler.linear(optim.sgd({p}, {lr = 0.3}))
  assert(math.abs(l:get_last_lr()[1] - 0.1) < 1e-12)
  for i = 1, 5 do l:step() end
  assert(math.abs(l:get_last_lr()[1] - 0.3) < 1e-12)
  local c = optim.lr_scheduler.cosine_restarts(optim.sgd({p}, {lr = 1}), {t_0 = 2, t_mult = 2})
  c:step(); c:step()
  assert(math.abs(c:get_last_lr()[1] - 1) < 1e-12, "a restart at step 2")
  local ok, err = pcall(optim.lr_scheduler.multi_step, opt, {milestones = 3})
  assert(not ok and tostring(err):find("option milestones is required: a table of step numbers"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.multi_step, opt, {milestones = {5, 2}})
  assert(not ok and tostring(err):find("in increasing order"), tostring(err))
end

-- lambda, reduce_on_plateau and sequential from Lua: torch 1.13's rates
-- (core/testdata/lr_schedulers.json, whose cases core's tests check step by
-- step), a sequential state_dict round trip, refusals.
do
  local p = tensor.param(tensor{1})
  local function near(got, want, what)
    for i, w in ipairs(want) do
      assert(math.abs(got[i] - w) < 1e-12, what .. ": step " .. (i - 1) .. ": " .. got[i] .. " vs " .. w)
    end
  end
  local opt = optim.sgd({p}, {lr = 0.5})
  local l = optim.lr_scheduler.lambda(opt, {lr_lambda = function(e) return math.min(1, (e + 1) / 4) - 0.05 * e end})
  local lrs = {opt:get_lr()}
  for i = 1, 12 do l:step(); lrs[#lrs + 1] = l:get_last_lr()[1] end
  near(lrs, {0.125, 0.225, 0.325, 0.425, 0.4, 0.375, 0.35, 0.325, 0.3, 0.275, 0.25, 0.225, 0.2}, "lambda")

  opt = optim.sgd({p}, {lr = 1})
  local pl = optim.lr_scheduler.reduce_on_plateau(opt, {mode = "min", factor = 0.5, patience = 2, threshold = 0.01,
    threshold_mode = "abs", cooldown = 2, min_lr = 0.2})
  lrs = {opt:get_lr()}
  for _, m in ipairs({3, 2, 1.995, 1.99, 2.5, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0 / 0, 0.1}) do
    pl:step(#lrs % 2 == 0 and m or tensor{m}) -- a number or a one-element tensor
    lrs[#lrs + 1] = opt:get_lr()
  end
  near(lrs, {1, 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25}, "reduce_on_plateau")
  local sd = pl:state_dict()
  assert(sd.kind == "reduce_on_plateau" and sd.mode == "min" and sd.threshold_mode == "abs" and math.abs(sd.best - 0.1) < 1e-7, "state")
  local ok, err = pcall(pl.step, pl)
  assert(not ok and tostring(err):find("takes the metric"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.reduce_on_plateau, opt, {factor = 1})
  assert(not ok and tostring(err):find("factor must be >= 0 and < 1"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.reduce_on_plateau, opt, {mode = "lowest"})
  assert(not ok and tostring(err):find('mode must be "min" or "max"'), tostring(err))

  local function chain(o)
    local a = optim.lr_scheduler.step(o, {step_size = 2, gamma = 0.5})
    local b = optim.lr_scheduler.cosine(o, {t_max = 4, eta_min = 0.01})
    local c = optim.lr_scheduler.lambda(o, {lr_lambda = function(e) return 0.8 ^ e end})
    return optim.lr_scheduler.sequential(o, {schedulers = {a, b, c}, milestones = {3, 7}})
  end
  opt = optim.sgd({p}, {lr = 0.2})
  local q = chain(opt)
  lrs = {opt:get_lr()}
  for i = 1, 14 do
    q:step(); lrs[#lrs + 1] = q:get_last_lr()[1]
    if i == 5 then sd = q:state_dict() end
  end
  near(lrs, {0.2, 0.2, 0.1, 0.2, 0.172175144212722, 0.105, 0.037824855787278, 0.2, 0.16, 0.128, 0.1024, 0.08192,
    0.065536, 0.0524288, 0.041943040}, "sequential")
  assert(sd.kind == "sequential" and #sd.schedulers == 3 and sd.schedulers[2].kind == "cosine", "nested state")
  local opt2 = optim.sgd({p}, {lr = 0.2})
  local q2 = chain(opt2)
  q2:load_state_dict(sd)
  assert(q2:last_epoch() == 5 and math.abs(opt2:get_lr() - 0.105) < 1e-12, "resumed at step 5: " .. opt2:get_lr())
  q2:step()
  assert(math.abs(opt2:get_lr() - 0.037824855787278) < 1e-12, "and carries on")
  sd.schedulers[3].kind = "step"
  ok, err = pcall(q2.load_state_dict, q2, sd)
  assert(not ok and tostring(err):find("scheduler 3 of the sequence"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.sequential, opt2, {schedulers = {pl}, milestones = {}})
  assert(not ok and tostring(err):find("other than reduce_on_plateau"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.sequential, opt2, {schedulers = {optim.lr_scheduler.step(opt, {step_size = 1})}, milestones = {}})
  assert(not ok and tostring(err):find("another optimizer"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.lambda, opt2, {lr_lambda = function(e) return "fast" end})
  assert(not ok and tostring(err):find("returned string, expected a number"), tostring(err))
  ok, err = pcall(optim.lr_scheduler.lambda, opt2, {lr_lambda = function(e) error("mine") end})
  assert(not ok and tostring(err):find("mine"), tostring(err))
end
