package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// optim.lr_scheduler (core/lr_scheduler.go): each takes an optimizer and an
// options table and returns a scheduler with step() and get_lr().

func (env *Env) schedulerFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"cosine":        env.scheduler("cosine", cosineLR),
		"one_cycle":     env.scheduler("one_cycle", oneCycleLR),
		"step":          env.scheduler("step", stepLR),
		"warmup_cosine": env.scheduler("warmup_cosine", warmupCosineLR),
	}
}

type makeScheduler func(lr *float32, r *optReader) (*core.Scheduler, error)

func stepLR(lr *float32, r *optReader) (*core.Scheduler, error) {
	return core.StepLR(lr, int(r.required("step_size")), r.number("gamma", 0.1))
}

func cosineLR(lr *float32, r *optReader) (*core.Scheduler, error) {
	return core.CosineLR(lr, int(r.required("t_max")), r.number("eta_min", 0))
}

func warmupCosineLR(lr *float32, r *optReader) (*core.Scheduler, error) {
	return core.WarmupCosineLR(lr, int(r.required("warmup")), int(r.required("total")), r.number("eta_min", 0))
}

func oneCycleLR(lr *float32, r *optReader) (*core.Scheduler, error) {
	return core.OneCycleLR(lr, r.required("max_lr"), int(r.required("total")), r.number("pct_start", 0.3),
		r.number("div_factor", 25), r.number("final_div_factor", 1e4))
}

func (env *Env) scheduler(name string, make makeScheduler) lua.LGFunction {
	return func(L *lua.LState) int {
		fn := "optim.lr_scheduler." + name
		o := env.checkOptimizer(L, fn, 1)
		r := readOpts(L, fn, 2)
		old := *o.lr // a scheduler sets the rate when made: a refused one must not
		s, err := make(o.lr, r)
		if err == nil {
			err = r.unknown()
		}
		if err != nil {
			*o.lr = old
		}
		raise(L, err)
		tbl := L.NewTable()
		L.SetFuncs(tbl, map[string]lua.LGFunction{
			"get_lr": func(L *lua.LState) int { L.Push(lua.LNumber(s.LR())); return 1 },
			"step":   func(L *lua.LState) int { s.Step(); return 0 },
		})
		L.Push(tbl)
		return 1
	}
}
