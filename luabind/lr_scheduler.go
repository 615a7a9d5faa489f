package luabind

import (
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// optim.lr_scheduler (core/lr_scheduler.go): each takes an optimizer and an
// options table and returns a scheduler, as torch.optim.lr_scheduler does:
//
//	step(opt, {step_size=, gamma=0.1})                      StepLR
//	cosine(opt, {t_max=, eta_min=0})                        CosineAnnealingLR (past t_max it
//	                                                        rises again: period 2*t_max)
//	one_cycle(opt, {max_lr=, total=, pct_start=0.3,         OneCycleLR (cosine, no momentum
//	          div_factor=25, final_div_factor=1e4})         cycling); stepping past total is an error
//	warmup_cosine(opt, {warmup=, total=, eta_min=0})        linear warm-up, then cosine to eta_min
//
// A scheduler has step(), get_lr() (the optimizer's rate, its first
// group's), get_last_lr() (torch's: the list of every group's rate the last
// step set), last_epoch() (the number of step() calls), state_dict() and
// load_state_dict(sd).
//
// A scheduler drives every parameter group's rate, each from the group's
// own initial_lr (torch's), which the first scheduler made on an optimizer
// sets from the group's rate (one_cycle sets it to max_lr/div_factor) and
// opt:state_dict() keeps. Its state_dict holds base_lr and last_lr for the
// first group, base_lr.2, last_lr.2... for the others. To resume training,
// save the optimizer's and the scheduler's state and restore both:
//
//	tensor.save(path, {model = model:state_dict(), opt = opt:state_dict(),
//	                   sched = sched:state_dict(), epoch = epoch})
//	-- later, in a fresh run:
//	local ck = tensor.load(path)
//	model:load_state_dict(ck.model)
//	local opt = optim.adam(model:parameters(), {lr = 1e-3})
//	opt:load_state_dict(ck.opt)         -- moments, step count, every group's
//	                                    -- lr, initial_lr and settings
//	local sched = optim.lr_scheduler.cosine(opt, {t_max = 1000})
//	sched:load_state_dict(ck.sched)     -- last_epoch: carries on where it stopped
//
// The scheduler's state must come from one of the same kind and settings
// (torch would take the saved settings silently; gglua refuses).

func (env *Env) schedulerFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"cosine":          env.scheduler("cosine", cosineLR),
		"cosine_restarts": env.scheduler("cosine_restarts", cosineRestartsLR),
		"exponential":     env.scheduler("exponential", exponentialLR),
		"linear":          env.scheduler("linear", linearLR),
		"multi_step":      env.scheduler("multi_step", multiStepLR),
		"one_cycle":       env.scheduler("one_cycle", oneCycleLR),
		"step":            env.scheduler("step", stepLR),
		"warmup_cosine":   env.scheduler("warmup_cosine", warmupCosineLR),
	}
}

// makeScheduler reads the options and returns the constructor to call once
// every option was checked (a refused scheduler leaves the rate alone).
type makeScheduler func(o *optReader) func(r core.Rated) (*core.Scheduler, error)

// countOpt reads a required whole-number option (a size or a number of steps).
func countOpt(o *optReader, key string) int {
	v := o.required(key)
	if v != math.Trunc(v) || math.Abs(v) > 1<<40 { // NaN and ±Inf fail too
		argError(o.L, o.fn, "option %s must be an integer, got %g", key, v)
	}
	return int(v)
}

func stepLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	size, gamma := countOpt(o, "step_size"), o.number("gamma", 0.1)
	return func(r core.Rated) (*core.Scheduler, error) { return core.StepLR(r, size, gamma) }
}

func cosineRestartsLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	t0 := countOpt(o, "t_0")
	mult := 1
	if o.has("t_mult") {
		mult = countOpt(o, "t_mult")
	} else {
		o.get("t_mult")
	}
	etaMin := o.number("eta_min", 0)
	return func(r core.Rated) (*core.Scheduler, error) { return core.CosineRestartsLR(r, t0, mult, etaMin) }
}

func exponentialLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	gamma := o.required("gamma")
	return func(r core.Rated) (*core.Scheduler, error) { return core.ExponentialLR(r, gamma) }
}

func linearLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	start, end := o.number("start_factor", 1.0/3), o.number("end_factor", 1)
	total := 5
	if o.has("total_iters") {
		total = countOpt(o, "total_iters")
	} else {
		o.get("total_iters")
	}
	return func(r core.Rated) (*core.Scheduler, error) { return core.LinearLR(r, start, end, total) }
}

// multiStepLR reads milestones, a table of step numbers.
func multiStepLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	v := o.get("milestones")
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(o.L, o.fn, "option milestones is required: a table of step numbers, got %s", luaTypeName(v))
	}
	var ms []int
	for i := 1; i <= tbl.Len(); i++ {
		n, ok := tbl.RawGetInt(i).(lua.LNumber)
		if !ok || float64(n) != math.Trunc(float64(n)) || math.Abs(float64(n)) > 1<<40 {
			argError(o.L, o.fn, "milestones[%d] must be an integer, got %s", i, luaTypeName(tbl.RawGetInt(i)))
		}
		ms = append(ms, int(n))
	}
	gamma := o.number("gamma", 0.1)
	return func(r core.Rated) (*core.Scheduler, error) { return core.MultiStepLR(r, ms, gamma) }
}

func cosineLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	tMax, etaMin := countOpt(o, "t_max"), o.number("eta_min", 0)
	return func(r core.Rated) (*core.Scheduler, error) { return core.CosineLR(r, tMax, etaMin) }
}

func warmupCosineLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	warmup, total, etaMin := countOpt(o, "warmup"), countOpt(o, "total"), o.number("eta_min", 0)
	return func(r core.Rated) (*core.Scheduler, error) { return core.WarmupCosineLR(r, warmup, total, etaMin) }
}

func oneCycleLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	maxLR, total := o.required("max_lr"), countOpt(o, "total")
	pct, div, final := o.number("pct_start", 0.3), o.number("div_factor", 25), o.number("final_div_factor", 1e4)
	return func(r core.Rated) (*core.Scheduler, error) { return core.OneCycleLR(r, maxLR, total, pct, div, final) }
}

func (env *Env) scheduler(name string, make makeScheduler) lua.LGFunction {
	return func(L *lua.LState) int {
		fn := "optim.lr_scheduler." + name
		o := env.checkOptimizer(L, fn, 1)
		r := readOpts(L, fn, 2)
		build := make(r)
		r.done()
		s, err := build(o.o)
		raise(L, err)
		tbl := L.NewTable()
		L.SetFuncs(tbl, functions("scheduler:", map[string]lua.LGFunction{
			"get_last_lr":     func(L *lua.LState) int { return pushRates(L, s.LastLRs()) },
			"get_lr":          func(L *lua.LState) int { L.Push(lua.LNumber(s.LR())); return 1 },
			"last_epoch":      func(L *lua.LState) int { L.Push(lua.LNumber(s.LastEpoch())); return 1 },
			"load_state_dict": func(L *lua.LState) int { return schedulerLoad(L, s) },
			"state_dict":      func(L *lua.LState) int { return schedulerState(L, s) },
			"step":            func(L *lua.LState) int { raise(L, s.Step()); return 0 },
		}))
		L.Push(tbl)
		return 1
	}
}

func pushRates(L *lua.LState, v []float64) int {
	out := L.NewTable()
	for _, x := range v {
		out.Append(lua.LNumber(x))
	}
	L.Push(out)
	return 1
}

func schedulerState(L *lua.LState, s *core.Scheduler) int {
	kind, nums := s.StateDict()
	out := L.NewTable()
	out.RawSetString("kind", lua.LString(kind))
	for k, v := range nums {
		out.RawSetString(k, lua.LNumber(v))
	}
	L.Push(out)
	return 1
}

func schedulerLoad(L *lua.LState, s *core.Scheduler) int {
	const fn = "scheduler:load_state_dict"
	tbl, ok := L.Get(2).(*lua.LTable)
	if !ok {
		argError(L, fn, "expected a table (a scheduler's state_dict()), got %s", luaTypeName(L.Get(2)))
	}
	kind := ""
	nums := map[string]float64{}
	tbl.ForEach(func(k, v lua.LValue) {
		key, isStr := k.(lua.LString)
		switch x := v.(type) {
		case lua.LString:
			if isStr && key == "kind" {
				kind = string(x)
				return
			}
		case lua.LNumber:
			if isStr {
				nums[string(key)] = float64(x)
				return
			}
		}
		argError(L, fn, "unexpected entry %s = %s", k.String(), luaTypeName(v))
	})
	raise(L, s.LoadStateDict(kind, nums))
	return 0
}
