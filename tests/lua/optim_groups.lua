-- Optimizer parameter groups from Lua, as torch's: a group's own settings
-- over the defaults, param_groups read and written live, every group's rate
-- scheduled from its own initial_lr, state_dict's param_groups. The
-- trajectories are torch 1.13's (core/testdata/torch_optim_groups.json,
-- scripts/reference/optim_groups.py: "sgd lr set by hand mid-schedule" and
-- "adamw two groups, step lr").

local W0 = {{-0.4867807626724243, -0.6038215756416321}, {-0.5580962300300598, 0.6675242781639099},
  {-0.19741509854793549, 1.9427834749221802}}
local B0 = {-1.4017020463943481, -0.7625571489334106}
local X = tensor{{0.6312134265899658, -0.899135172367096, -0.5577934384346008},
  {0.6907187700271606, 0.2224585860967636, -0.666225254535675},
  {0.6846421957015991, 0.5740016102790833, -0.5828827023506165},
  {0.7679415345191956, 0.057092659175395966, -1.189374566078186}}

local function fresh()
  return tensor.param(tensor(W0)), tensor.param(tensor(B0))
end

local function step(w, b, opt)
  opt:zero_grad()
  backward(with_grad_tape(function() return ((X:matmul(w) + b - 1) ^ 2):sum() end))
  opt:step()
end

local function flatten(t)
  local flat = {}
  for _, row in ipairs(t) do
    if type(row) == "table" then
      for _, v in ipairs(row) do flat[#flat + 1] = v end
    else
      flat[#flat + 1] = row
    end
  end
  return flat
end

local function close(got, want, tol, what)
  -- On a GPU, f32 matmuls run as TF32 (about 1e-3 relative).
  -- On a GPU, f32 matmuls run as TF32 (about 1e-3 relative); Adam divides
  -- by the gradient's size, so where a gradient is near zero TF32's rounding
  -- decides the sign of a whole step: its values are compared on the CPU
  -- only (CI), its course on a GPU by tests/gpu/compare.lua.
  if device.current() ~= "cpu" then
    if what:find("adam") then return end
    tol = math.max(tol, 2e-3)
  end
  local flat = flatten(got)
  assert(#flat == #want, what .. ": " .. #flat .. " values, expected " .. #want)
  for i = 1, #want do
    assert(math.abs(flat[i] - want[i]) <= tol * (1 + math.abs(want[i])),
      string.format("%s[%d]: %.9g, torch %.9g", what, i, flat[i], want[i]))
  end
end

-- SGD with momentum: group 1 (w) has its own lr and weight decay, group 2
-- (b) the defaults but weight decay 0; StepLR halves both every 2 steps;
-- after step 3 group 1's lr is set by hand through param_groups, and the
-- schedule carries on from it.
do
  local w, b = fresh()
  local opt = optim.sgd({{params = {w}, weight_decay = 0.1, lr = 0.05}, {params = {b}}}, {lr = 0.1, momentum = 0.9})
  local groups = opt.param_groups
  assert(#groups == 2 and groups[1].params[1] == w and groups[2].params[1] == b, "param_groups hold the params")
  assert(groups[1].lr == 0.05 and groups[2].lr == 0.1, "each group's own lr over the default")
  assert(math.abs(groups[1].weight_decay - 0.1) < 1e-7 and groups[2].weight_decay == 0)
  assert(groups[1].momentum == groups[2].momentum and math.abs(groups[2].momentum - 0.9) < 1e-7, "the default momentum")
  assert(groups[1].nesterov == false and groups[1].initial_lr == nil and groups[1].foo == nil)
  local sched = optim.lr_scheduler.step(opt, {step_size = 2, gamma = 0.5})
  assert(groups[1].initial_lr == 0.05 and groups[2].initial_lr == 0.1, "each group's initial_lr")
  for i = 1, 5 do
    step(w, b, opt)
    sched:step()
    if i == 3 then groups[1].lr = 0.02 end
  end
  close(w:totable(), {0.06569048762321472, 0.13305826485157013, -0.2219259887933731, 0.2533130347728729,
    -0.6742845773696899, 0.96695876121521}, 1e-5, "sgd w")
  close(b:totable(), {-0.14524608850479126, 0.816321611404419}, 1e-5, "sgd b")
  assert(math.abs(groups[1].lr - 0.01) < 1e-15 and math.abs(groups[2].lr - 0.025) < 1e-15, "rates: " .. groups[1].lr)
  assert(opt:get_lr() == groups[1].lr and opt:get_lr(2) == groups[2].lr)
  local last = sched:get_last_lr()
  assert(#last == 2 and last[2] == groups[2].lr, "get_last_lr lists every group")

  -- state_dict: torch's param_groups layout with gglua's state names.
  local sd = opt:state_dict()
  assert(sd["state.1.momentum_buffer"] and sd["state.2.momentum_buffer"], "state.<i>.<slot>")
  local pg = sd.param_groups
  assert(#pg == 2 and pg[1].params[1] == 1 and pg[2].params[1] == 2, "params as positions")
  assert(pg[1].lr == groups[1].lr and pg[1].initial_lr == 0.05 and pg[2].initial_lr == 0.1)
  assert(math.abs(pg[1].weight_decay - 0.1) < 1e-7 and pg[2].weight_decay == 0 and pg[2].nesterov == false)
  assert(sd.lr == pg[1].lr and sd.initial_lr == pg[1].initial_lr, "the flat lr is group 1's")

  -- A fresh optimizer of other settings, loaded, takes the same next step.
  local w2, b2 = tensor.param(tensor(w:totable())), tensor.param(tensor(b:totable()))
  local opt2 = optim.sgd({{params = {w2}}, {params = {b2}}}, {lr = 1})
  opt2:load_state_dict(sd)
  assert(opt2.param_groups[1].lr == groups[1].lr and opt2.param_groups[2].initial_lr == 0.1)
  assert(opt2.param_groups[1].weight_decay == groups[1].weight_decay, "settings come back")
  step(w, b, opt)
  step(w2, b2, opt2)
  close(w2:totable(), flatten(w:totable()), 0, "resumed w")
  close(b2:totable(), b:totable(), 0, "resumed b")

  -- A flat state (no param_groups) only loads into one group.
  sd.param_groups = nil
  local ok, err = pcall(opt2.load_state_dict, opt2, sd)
  assert(not ok and err:find("no param_groups", 1, true), tostring(err))
  sd = opt:state_dict()
  sd.param_groups[1].params = {1, 2}
  ok, err = pcall(opt2.load_state_dict, opt2, sd)
  assert(not ok and err:find("parameter group 1 of the state has 2 parameters", 1, true), tostring(err))
  sd = opt:state_dict()
  sd.param_groups[2].bogus = 1
  ok, err = pcall(opt2.load_state_dict, opt2, sd)
  assert(not ok and err:find("param_groups[2]: unknown option bogus", 1, true), tostring(err))
end

-- AdamW: group 1 weight decay 0.1 and its own lr, group 2 none; StepLR.
do
  local w, b = fresh()
  local opt = optim.adamw({{params = {w}, weight_decay = 0.1, lr = 0.05}, {params = {b}, weight_decay = 0}}, {lr = 0.1})
  local sched = optim.lr_scheduler.step(opt, {step_size = 2, gamma = 0.5})
  for _ = 1, 5 do
    step(w, b, opt)
    sched:step()
  end
  close(w:totable(), {-0.31815385818481445, -0.43306487798690796, -0.38909468054771423, 0.49623164534568787,
    -0.3549644351005554, 1.7503938674926758}, 1e-5, "adamw w")
  close(b:totable(), {-1.0781646966934204, -0.43856221437454224}, 1e-5, "adamw b")
  local g = opt.param_groups[1]
  assert(#g.betas == 2 and math.abs(g.betas[1] - 0.9) < 1e-7 and math.abs(g.eps - 1e-8) < 1e-14)
  g.betas = {0.8, 0.99}
  assert(math.abs(opt.param_groups[1].betas[1] - 0.8) < 1e-7, "a setting written through param_groups")
  local ssd = sched:state_dict()
  assert(ssd.base_lr == 0.05 and ssd["base_lr.2"] == 0.1 and ssd.last_lr == 0.0125 and ssd["last_lr.2"] == 0.025)
end

-- set_lr sets every group, or one; a list of parameters is one group.
do
  local p, q = tensor.param(tensor{1}), tensor.param(tensor{2})
  local opt = optim.adam({{params = p}, {params = {q}, lr = 0.5}}, {lr = 0.1})
  assert(opt.param_groups[1].params[1] == p, "params may be one tensor")
  opt:set_lr(0.3, 2)
  assert(opt:get_lr(1) == 0.1 and opt:get_lr(2) == 0.3)
  opt:set_lr(0.2)
  assert(opt:get_lr(1) == 0.2 and opt.param_groups[2].lr == 0.2)
  local ok, err = pcall(opt.set_lr, opt, 0.1, 3)
  assert(not ok and err:find("group must be an integer from 1 to 2", 1, true), tostring(err))
  local one = optim.sgd({p}, {lr = 0.1})
  assert(#one.param_groups == 1 and one.param_groups[1].lr == 0.1 and one.param_groups[1].params[1] == p)
  one.param_groups[1].lr = 0.4
  assert(one:get_lr() == 0.4)
end

-- Errors: a parameter in two groups, an unknown group option, a group
-- without params, bad settings written through param_groups.
do
  local p, q = tensor.param(tensor{1}), tensor.param(tensor{2})
  for _, case in ipairs{
    {optim.sgd, {{params = {p}}, {params = {q, p}}}, "a parameter appears in more than one parameter group (groups 1 and 2)"},
    {optim.adam, {{params = {p}}, {params = {q}, momentum = 0.9}}, "optim.adam: parameter group 2: unknown option momentum"},
    {optim.sgd, {{params = {p}}, {lr = 0.1}}, "parameter group 2 has no params"},
    {optim.adamw, {{params = {p}}, {params = {}}}, "parameter group 2 has no parameters"},
    {optim.sgd, {{params = {p}}, q}, "parameter group 2 is a tensor"},
    {optim.sgd, {{params = {p}, lr = -1}}, "lr"},
    {optim.sgd, {{params = {p}, nesterov = true}}, "nesterov"},
    {optim.sgd, {p, p}, "parameter 2 is given twice"},
  } do
    local ok, err = pcall(case[1], case[2], {lr = 0.1})
    assert(not ok and err:find(case[3], 1, true), case[3] .. ": " .. tostring(err))
  end
  local opt = optim.sgd({{params = {p}}, {params = {q}}}, {lr = 0.1, momentum = 0.9})
  local g = opt.param_groups[2]
  for _, case in ipairs{
    {"lr", 0 / 0, "learning rate"}, {"lr", "fast", "lr must be a number"}, {"momentum", -1, "momentum"},
    {"betas", {0.9, 0.99}, "param_groups[2]: unknown option betas"}, {"dampening", 0 / 0, "dampening"},
  } do
    local ok, err = pcall(function() g[case[1]] = case[2] end)
    assert(not ok and err:find(case[3], 1, true), case[3] .. ": " .. tostring(err))
  end
  assert(g.lr == 0.1 and math.abs(g.momentum - 0.9) < 1e-7 and g.nesterov == false, "refused writes changed nothing")
  g.dampening = 0.5
  assert(g.dampening == 0.5 and opt.param_groups[1].dampening == 0, "one group's setting")
end

-- Resuming: a scheduler made after the optimizer's state was loaded takes
-- its step 0 (warm-up's first rate); its load_state_dict puts back the rate
-- it had set, so the first resumed step trains at the saved rate whatever
-- the order of the loads.
do
  local p = {tensor.param(tensor.ones(2))}
  local o = optim.adamw(p, {lr = 1e-2})
  local s = optim.lr_scheduler.warmup_cosine(o, {warmup = 2, total = 10})
  for _ = 1, 3 do
    o:zero_grad()
    backward(with_grad_tape(function() return (p[1] * p[1]):sum() end))
    o:step()
    s:step()
  end
  local so, ss, want = o:state_dict(), s:state_dict(), o:get_lr()
  for _, optimizer_first in ipairs({true, false}) do
    local o2 = optim.adamw({tensor.param(tensor.ones(2))}, {lr = 1e-2})
    local s2
    if optimizer_first then
      o2:load_state_dict(so)
      s2 = optim.lr_scheduler.warmup_cosine(o2, {warmup = 2, total = 10})
      s2:load_state_dict(ss)
    else
      s2 = optim.lr_scheduler.warmup_cosine(o2, {warmup = 2, total = 10})
      o2:load_state_dict(so)
      s2:load_state_dict(ss)
    end
    assert(math.abs(o2:get_lr() - want) < 1e-9, "resumed rate " .. o2:get_lr() .. ", saved " .. want)
  end
end

-- add_param_group (values against PyTorch in tests/optim_add_group_test.go):
-- the new group takes the defaults, param_groups and parameters() show it,
-- and mistakes are errors naming add_param_group.
do
  local w, b, c = tensor.param(tensor.ones(2)), tensor.param(tensor.ones(3)), tensor.param(tensor.ones(1))
  local o = optim.sgd({{params = {w}, lr = 0.5}}, {lr = 0.1, momentum = 0.9})
  local s = optim.lr_scheduler.step(o, {step_size = 1})
  o:add_param_group({params = {b}, weight_decay = 0.01})
  assert(#o.param_groups == 2 and #o:parameters() == 2)
  local g = o.param_groups[2]
  assert(g.lr == 0.1 and math.abs(g.momentum - 0.9) < 1e-7 and math.abs(g.weight_decay - 0.01) < 1e-7 and g.params[1] == b)
  assert(g.initial_lr == nil and o.param_groups[1].initial_lr == 0.5)
  o:add_param_group({params = c})
  local ok, err = pcall(function() s:step() end)
  assert(not ok and err:find("the scheduler was made for 1", 1, true), tostring(err))
  for _, bad in ipairs{
    {function() o:add_param_group({params = {w}}) end, "add_param_group: parameter 1 is already in parameter group 1"},
    {function() o:add_param_group({params = {tensor.param(tensor.ones(1))}, lr = -1}) end, "lr must be a finite number >= 0"},
    {function() o:add_param_group({params = {tensor.param(tensor.ones(1))}, betas = {0.9, 0.99}}) end, "unknown option betas"},
    {function() o:add_param_group({lr = 1}) end, "has no params"},
    {function() o:add_param_group(w) end, "expected a table {params = {...}, ...}"},
    {function() o:add_param_group({params = {}}) end, "the group has no parameters"},
  } do
    ok, err = pcall(bad[1])
    assert(not ok and err:find(bad[2], 1, true), tostring(err))
  end
  assert(#o.param_groups == 3, "a refused group is not added")
  -- Adam counts its steps per optimizer: a group after the first step is refused.
  local a = optim.adam({w}, {lr = 1e-2})
  a:add_param_group({params = {b}})
  a:zero_grad()
  backward(with_grad_tape(function() return (w * w):sum() + (b * b):sum() end))
  a:step()
  ok, err = pcall(function() a:add_param_group({params = {c}}) end)
  assert(not ok and err:find("adam: add_param_group: a group can only be added before the first step", 1, true), tostring(err))
end
