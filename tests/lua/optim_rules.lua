-- optim.rmsprop, adagrad, adadelta, adamax, nadam and radam from Lua:
-- parameter groups over the defaults, settings by torch's names read and
-- written through param_groups (betas a pair, centered a flag), state_dict
-- and load_state_dict, refusals. Values are torch's
-- (core/testdata/torch_optim_rules.json, scripts/reference/optim_rules.py;
-- core/optim_rules_test.go checks every case and step): the parameters
-- after 8 steps under StepLR(3, 0.5), with a resume after step 4.

local W0 = {{-0.4867807626724243, -0.6038215756416321}, {-0.5580962300300598, 0.6675242781639099},
  {-0.19741509854793549, 1.9427834749221802}}
local B0 = {-1.4017020463943481, -0.7625571489334106}
local X = tensor{{0.6312134265899658, -0.899135172367096, -0.5577934384346008},
  {0.6907187700271606, 0.2224585860967636, -0.666225254535675},
  {0.6846421957015991, 0.5740016102790833, -0.5828827023506165},
  {0.7679415345191956, 0.057092659175395966, -1.189374566078186}}

local function step(w, b, opt, sched)
  opt:zero_grad()
  backward(with_grad_tape(function() return ((X:matmul(w) + b - 1) ^ 2):sum() end))
  opt:step()
  sched:step()
end

local function close(t, want, what)
  local tol = device.current() == "cpu" and 1e-4 or 5e-3 -- TF32 products on a GPU
  local flat = {}
  for _, row in ipairs(t:totable()) do
    if type(row) == "table" then
      for _, v in ipairs(row) do flat[#flat + 1] = v end
    else
      flat[#flat + 1] = row
    end
  end
  assert(#flat == #want, what .. ": " .. #flat .. " values, expected " .. #want)
  for i = 1, #want do
    assert(math.abs(flat[i] - want[i]) <= tol * (1 + math.abs(want[i])),
      string.format("%s[%d]: %.9g, torch %.9g", what, i, flat[i], want[i]))
  end
end

local cases = {
  {name = "rmsprop", defaults = {lr = 0.01, momentum = 0.9, centered = true},
   groups = {{centered = false, eps = 1e-4}, {momentum = 0}},
   w = {0.41189733147621155, 0.32408562302589417, 0.07830505073070526, -0.11001970618963242, -1.0907272100448608, 1.0149462223052979},
   b = {-1.1173372268676758, -0.46656185388565063}},
  {name = "adagrad", defaults = {lr = 0.1, lr_decay = 0.01, initial_accumulator_value = 0.5},
   groups = {{weight_decay = 0.1}, {eps = 1e-6}},
   w = {-0.19542212784290314, -0.30683261156082153, -0.31560203433036804, 0.40151506662368774, -0.48794546723365784, 1.6455971002578735},
   b = {-1.1099307537078857, -0.46552199125289917}},
  {name = "radam", defaults = {lr = 0.05, weight_decay = 0.1, betas = {0.8, 0.99}},
   groups = {{decoupled_weight_decay = true}, {eps = 1e-3}},
   w = {0.7129625082015991, 1.0664401054382324, -0.3466128706932068, 0.3743787407875061, -1.4169702529907227, 0.018357042223215103},
   b = {0.35964736342430115, 1.6518608331680298}},
}

for _, c in ipairs(cases) do
  -- Straight through, then resumed from a state_dict after step 4 by an
  -- optimizer made with the defaults only.
  for _, resume in ipairs{false, true} do
    local w, b = tensor.param(tensor(W0)), tensor.param(tensor(B0))
    local groups = {}
    for i, g in ipairs(c.groups) do
      local own = {params = {({w, b})[i]}}
      for k, v in pairs(g) do own[k] = v end
      groups[i] = own
    end
    local opt = optim[c.name](groups, c.defaults)
    local sched = optim.lr_scheduler.step(opt, {step_size = 3, gamma = 0.5})
    for i = 1, 8 do
      if resume and i == 5 then
        local sd, ssd = opt:state_dict(), sched:state_dict()
        opt = optim[c.name]({{params = {w}}, {params = {b}}}, c.name == "adagrad" and {initial_accumulator_value = 0.5} or nil)
        opt:load_state_dict(sd)
        sched = optim.lr_scheduler.step(opt, {step_size = 3, gamma = 0.5})
        sched:load_state_dict(ssd)
        assert(opt:state_dict().step == 4, c.name .. ": step restored")
      end
      step(w, b, opt, sched)
    end
    local what = c.name .. (resume and " resumed" or "")
    close(w, c.w, what .. " w")
    close(b, c.b, what .. " b")
    assert(math.abs(opt:get_lr(2) - c.defaults.lr / 4) < 1e-15, what .. ": lr after 8 steps")
  end
end

-- Settings by torch's names, live through param_groups.
local p = tensor.param(tensor{1, 2})
local opt = optim.nadam({p})
local g = opt.param_groups[1]
assert(g.lr == 2e-3 and g.betas[1] == 0.9 and g.betas[2] == 0.999 and g.momentum_decay == 4e-3)
assert(g.decoupled_weight_decay == false)
g.betas = {0.8, 0.95}
g.decoupled_weight_decay = true
local sd = opt:state_dict().param_groups[1]
assert(sd.betas[1] == 0.8 and sd.betas[2] == 0.95 and sd.decoupled_weight_decay == true)

-- Refusals name the optimizer, the setting and the script's line.
local function refuses(f, want)
  local ok, err = pcall(f)
  assert(not ok, "expected an error containing " .. want)
  assert(tostring(err):find(want, 1, true), tostring(err))
  assert(tostring(err):find("optim_rules.lua", 1, true), "the error names the script: " .. tostring(err))
end
refuses(function() optim.rmsprop({p}, {alpha = -1}) end, "rmsprop: alpha must be >= 0, got -1")
refuses(function() optim.adadelta({p}, {rho = 2}) end, "adadelta: rho must be in [0, 1], got 2")
refuses(function() optim.adamax({p}, {betas = {0.9, 1}}) end, "adamax: beta 2 must be in [0, 1), got 1")
refuses(function() optim.radam({p}, {momentum = 0.9}) end, "unknown option momentum")
refuses(function() optim.adagrad({{params = {p}, initial_accumulator_value = 0.1}}) end,
  "parameter group 1: initial_accumulator_value is 0.1, the optimizer's is 0")
refuses(function() opt.param_groups[1].eps = -1 end, "nadam: eps must be >= 0")
