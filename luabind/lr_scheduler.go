package luabind

import (
	"fmt"
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
//	lambda(opt, {lr_lambda=})                               LambdaLR: base rate * lr_lambda(epoch)
//	reduce_on_plateau(opt, {mode="min", factor=0.1, ...})   ReduceLROnPlateau; step(metric)
//	sequential(opt, {schedulers=, milestones=})             SequentialLR
//
// A scheduler has step() (reduce_on_plateau's step(metric)), get_lr() (the
// optimizer's rate, its first group's), get_last_lr() (torch's: the list
// of every group's rate the last step set), last_epoch() (the number of
// step() calls), state_dict() and load_state_dict(sd).
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
		"cosine":            env.scheduler("cosine", cosineLR),
		"cosine_restarts":   env.scheduler("cosine_restarts", cosineRestartsLR),
		"exponential":       env.scheduler("exponential", exponentialLR),
		"lambda":            env.scheduler("lambda", env.lambdaLR),
		"linear":            env.scheduler("linear", linearLR),
		"multi_step":        env.scheduler("multi_step", multiStepLR),
		"one_cycle":         env.scheduler("one_cycle", oneCycleLR),
		"reduce_on_plateau": env.plateauLR,
		"sequential":        env.sequentialLR,
		"step":              env.scheduler("step", stepLR),
		"warmup_cosine":     env.scheduler("warmup_cosine", warmupCosineLR),
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

// countsOpt reads a required table of whole numbers (step numbers).
func countsOpt(o *optReader, key string) []int {
	v := o.get(key)
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(o.L, o.fn, "option %s is required: a table of step numbers, got %s", key, luaTypeName(v))
	}
	var out []int
	for i := 1; i <= tbl.Len(); i++ {
		n, ok := tbl.RawGetInt(i).(lua.LNumber)
		if !ok || float64(n) != math.Trunc(float64(n)) || math.Abs(float64(n)) > 1<<40 {
			argError(o.L, o.fn, "%s[%d] must be an integer, got %s", key, i, luaTypeName(tbl.RawGetInt(i)))
		}
		out = append(out, int(n))
	}
	return out
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
	ms, gamma := countsOpt(o, "milestones"), o.number("gamma", 0.1)
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

// lambdaLR reads lr_lambda: a function of the epoch (torch's, from 0)
// returning the factor of the base rate, or a table of one for each
// parameter group.
func (env *Env) lambdaLR(o *optReader) func(core.Rated) (*core.Scheduler, error) {
	v := o.get("lr_lambda")
	var fns []*lua.LFunction
	list := false // a table must hold one for each group, as torch's list
	switch x := v.(type) {
	case *lua.LFunction:
		fns = append(fns, x)
	case *lua.LTable:
		list = true
		for i := 1; i <= x.Len(); i++ {
			f, ok := x.RawGetInt(i).(*lua.LFunction)
			if !ok {
				argError(o.L, o.fn, "lr_lambda[%d] must be a function, got %s", i, luaTypeName(x.RawGetInt(i)))
			}
			fns = append(fns, f)
		}
	default:
		argError(o.L, o.fn, "option lr_lambda is required: a function of the epoch, or a table of one for each parameter group, got %s", luaTypeName(v))
	}
	return func(r core.Rated) (*core.Scheduler, error) {
		if n := len(r.Rates()); list && len(fns) != n {
			return nil, &argumentError{fmt.Sprintf("%s: expected %d lr_lambdas (one for each parameter group), got %d", o.fn, n, len(fns))}
		}
		return core.LambdaLR(r, func(epoch, g int) (float64, error) {
			f := fns[0]
			if list {
				f = fns[g]
			}
			L := env.schedL
			L.Push(f) // a Lua error in it is the script's, raised as it is
			L.Push(lua.LNumber(epoch))
			L.Call(1, 1)
			out := L.Get(-1)
			L.Pop(1)
			n, ok := out.(lua.LNumber)
			if !ok {
				return 0, &argumentError{fmt.Sprintf("optim.lr_scheduler.lambda: lr_lambda(%d) returned %s, expected a number", epoch, luaTypeName(out))}
			}
			return float64(n), nil
		})
	}
}

func (env *Env) scheduler(name string, make makeScheduler) lua.LGFunction {
	return func(L *lua.LState) int {
		fn := "optim.lr_scheduler." + name
		o := env.checkOptimizer(L, fn, 1)
		r := readOpts(L, fn, 2)
		build := make(r)
		r.done()
		env.schedL = L
		s, err := build(o.o)
		raise(L, err)
		return env.pushScheduler(L, s, func(L *lua.LState) int { raise(L, s.Step()); return 0 })
	}
}

// plateauLR is optim.lr_scheduler.reduce_on_plateau(opt, {mode="min",
// factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
// cooldown=0, min_lr=0 (or a table, one for each group), eps=1e-8}); its
// step takes the metric, a number or a one-element tensor.
func (env *Env) plateauLR(L *lua.LState) int {
	const fn = "optim.lr_scheduler.reduce_on_plateau"
	opt := env.checkOptimizer(L, fn, 1)
	o := readOpts(L, fn, 2)
	d := core.DefaultPlateau
	po := core.PlateauOptions{Mode: o.str("mode", d.Mode), ThresholdMode: o.str("threshold_mode", d.ThresholdMode),
		Factor: o.number("factor", d.Factor), Threshold: o.number("threshold", d.Threshold), Eps: o.number("eps", d.Eps)}
	po.Patience, po.Cooldown = d.Patience, d.Cooldown
	if o.has("patience") {
		po.Patience = countOpt(o, "patience")
	}
	if o.has("cooldown") {
		po.Cooldown = countOpt(o, "cooldown")
	}
	switch v := o.get("min_lr").(type) {
	case lua.LNumber:
		po.MinLRs = []float64{float64(v)}
	case *lua.LTable:
		if groups := len(opt.o.Rates()); v.Len() != groups {
			argError(L, fn, "expected %d min_lrs (one for each parameter group), got %d", groups, v.Len())
		}
		for i := 1; i <= v.Len(); i++ {
			n, ok := v.RawGetInt(i).(lua.LNumber)
			if !ok {
				argError(L, fn, "min_lr[%d] must be a number, got %s", i, luaTypeName(v.RawGetInt(i)))
			}
			po.MinLRs = append(po.MinLRs, float64(n))
		}
	case *lua.LNilType:
		po.MinLRs = d.MinLRs
	default:
		argError(L, fn, "option min_lr must be a number or a table of numbers, got %s", luaTypeName(v))
	}
	o.done()
	p, err := core.ReduceLROnPlateau(opt.o, po)
	raise(L, err)
	return env.pushScheduler(L, p, func(L *lua.LState) int {
		const fn = "scheduler:step"
		var m float64
		switch v := L.Get(2).(type) {
		case lua.LNumber:
			m = float64(v)
		default:
			t := toTensor(v)
			if t == nil {
				argError(L, fn, "reduce_on_plateau's step takes the metric: a number or a one-element tensor, got %s", luaTypeName(v))
			}
			x, err := t.Item()
			raise(L, err)
			m = float64(x)
		}
		raise(L, p.Step(m))
		return 0
	})
}

// sequentialLR is optim.lr_scheduler.sequential(opt, {schedulers={...},
// milestones={...}}): the schedulers (made on opt) in turn.
func (env *Env) sequentialLR(L *lua.LState) int {
	const fn = "optim.lr_scheduler.sequential"
	opt := env.checkOptimizer(L, fn, 1)
	o := readOpts(L, fn, 2)
	list, ok := o.get("schedulers").(*lua.LTable)
	if !ok {
		argError(L, fn, "option schedulers is required: a table of schedulers, got %s", luaTypeName(o.get("schedulers")))
	}
	var subs []*core.Scheduler
	for i := 1; i <= list.Len(); i++ {
		s, ok := objectOf(list.RawGetInt(i), schedulerField).(*core.Scheduler)
		if !ok {
			argError(L, fn, "schedulers[%d] must be a scheduler of optim.lr_scheduler other than reduce_on_plateau and sequential, got %s", i, luaTypeName(list.RawGetInt(i)))
		}
		subs = append(subs, s)
	}
	ms := countsOpt(o, "milestones")
	o.done()
	env.schedL = L
	q, err := core.SequentialLR(opt.o, subs, ms)
	raise(L, err)
	return env.pushScheduler(L, q, func(L *lua.LState) int { raise(L, q.Step()); return 0 })
}

// schedulerField is the metatable field of a scheduler table that holds
// the scheduler (for sequential to find its schedulers).
const schedulerField = "__scheduler"

// pushScheduler pushes the Lua face of s, whose step is step.
func (env *Env) pushScheduler(L *lua.LState, s core.LRScheduler, step lua.LGFunction) int {
	tbl := objectTable(L, "scheduler", schedulerField, s)
	L.SetFuncs(tbl, functions("scheduler:", map[string]lua.LGFunction{
		"get_last_lr":     func(L *lua.LState) int { return pushRates(L, s.LastLRs()) },
		"get_lr":          func(L *lua.LState) int { L.Push(lua.LNumber(s.LR())); return 1 },
		"last_epoch":      func(L *lua.LState) int { L.Push(lua.LNumber(s.LastEpoch())); return 1 },
		"load_state_dict": func(L *lua.LState) int { return schedulerLoad(L, s) },
		"state_dict":      func(L *lua.LState) int { L.Push(schedulerState(L, s.StateDict())); return 1 },
		"step":            func(L *lua.LState) int { env.schedL = L; return step(L) },
	}))
	L.Push(tbl)
	return 1
}

func pushRates(L *lua.LState, v []float64) int {
	out := L.NewTable()
	for _, x := range v {
		out.Append(lua.LNumber(x))
	}
	L.Push(out)
	return 1
}

// schedulerState is st as a table: kind, the numbers and texts by name,
// and a sequential scheduler's schedulers' states as a list, schedulers.
func schedulerState(L *lua.LState, st core.SchedulerState) *lua.LTable {
	out := L.NewTable()
	out.RawSetString("kind", lua.LString(st.Kind))
	for k, v := range st.Nums {
		out.RawSetString(k, lua.LNumber(v))
	}
	for k, v := range st.Texts {
		out.RawSetString(k, lua.LString(v))
	}
	if st.Subs != nil {
		subs := L.NewTable()
		for _, sub := range st.Subs {
			subs.Append(schedulerState(L, sub))
		}
		out.RawSetString("schedulers", subs)
	}
	return out
}

func schedulerLoad(L *lua.LState, s core.LRScheduler) int {
	const fn = "scheduler:load_state_dict"
	tbl, ok := L.Get(2).(*lua.LTable)
	if !ok {
		argError(L, fn, "expected a table (a scheduler's state_dict()), got %s", luaTypeName(L.Get(2)))
	}
	raise(L, s.LoadStateDict(readSchedulerState(L, fn, tbl)))
	return 0
}

// readSchedulerState reads what schedulerState wrote.
func readSchedulerState(L *lua.LState, fn string, tbl *lua.LTable) core.SchedulerState {
	st := core.SchedulerState{Nums: map[string]float64{}}
	tbl.ForEach(func(k, v lua.LValue) {
		key, isStr := k.(lua.LString)
		switch x := v.(type) {
		case lua.LString:
			if isStr && key == "kind" {
				st.Kind = string(x)
				return
			}
			if isStr {
				if st.Texts == nil {
					st.Texts = map[string]string{}
				}
				st.Texts[string(key)] = string(x)
				return
			}
		case lua.LNumber:
			if isStr {
				st.Nums[string(key)] = float64(x)
				return
			}
		case *lua.LTable:
			if isStr && key == "schedulers" {
				for i := 1; i <= x.Len(); i++ {
					sub, ok := x.RawGetInt(i).(*lua.LTable)
					if !ok {
						argError(L, fn, "schedulers[%d] must be a scheduler's state (a table), got %s", i, luaTypeName(x.RawGetInt(i)))
					}
					st.Subs = append(st.Subs, readSchedulerState(L, fn, sub))
				}
				return
			}
		}
		argError(L, fn, "unexpected entry %s = %s", k.String(), luaTypeName(v))
	})
	return st
}
