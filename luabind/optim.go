package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// paramsArg reads a table (sequence) of parameter tensors.
func paramsArg(L *lua.LState, fn string) []*core.Tensor {
	if _, ok := L.Get(1).(*lua.LTable); !ok {
		argError(L, fn, "argument 1: expected a table of parameters, got %s", luaTypeName(L.Get(1)))
	}
	return tensorList(L, fn, 1, "parameter")
}

// tensorList reads argument n, a table (sequence) of tensors; what names an
// element in errors.
func tensorList(L *lua.LState, fn string, n int, what string) []*core.Tensor {
	tbl := L.CheckTable(n)
	var ts []*core.Tensor
	for i := 1; i <= tbl.Len(); i++ {
		ud, ok := tbl.RawGetInt(i).(*lua.LUserData)
		t, isT := (*core.Tensor)(nil), false
		if ok {
			t, isT = ud.Value.(*core.Tensor)
		}
		if !isT {
			argError(L, fn, "%s %d is a %s, expected a tensor", what, i, luaTypeName(tbl.RawGetInt(i)))
		}
		ts = append(ts, t)
	}
	return ts
}

// options reads an options table, refusing keys it does not know.
func options(L *lua.LState, fn string, n int, known map[string]*float32, flags map[string]*bool) {
	v := L.Get(n)
	if v == lua.LNil {
		return
	}
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(L, fn, "argument %d: expected an options table, got %s", n, luaTypeName(v))
	}
	tbl.ForEach(func(k, val lua.LValue) {
		key := k.String()
		if p, ok := known[key]; ok {
			num, isNum := val.(lua.LNumber)
			if !isNum {
				argError(L, fn, "option %s must be a number, got %s", key, luaTypeName(val))
			}
			*p = float32(num)
			return
		}
		if p, ok := flags[key]; ok {
			*p = lua.LVAsBool(val)
			return
		}
		if key == "betas" {
			bt, ok := val.(*lua.LTable)
			b1, ok1 := bt.RawGetInt(1).(lua.LNumber)
			b2, ok2 := bt.RawGetInt(2).(lua.LNumber)
			if ok && ok1 && ok2 {
				*known["beta1"], *known["beta2"] = float32(b1), float32(b2)
				return
			}
			argError(L, fn, "option betas must be a table of two numbers")
		}
		argError(L, fn, "unknown option %s", key)
	})
}

type stepper interface {
	Step() error
	ZeroGrad()
	Params() []*core.Tensor
	StateDict() (map[string]*core.Tensor, map[string]float64)
	LoadStateDict(map[string]*core.Tensor, map[string]float64) error
}

// optimizer is what Lua's optimizer table stands for.
type optimizer struct {
	o  stepper
	lr *float32
}

func pushOptimizer(L *lua.LState, env *Env, o stepper, lr *float32) int {
	tbl := L.NewTable()
	if env.optims == nil {
		env.optims = map[*lua.LTable]optimizer{}
	}
	env.optims[tbl] = optimizer{o: o, lr: lr}
	L.SetFuncs(tbl, map[string]lua.LGFunction{
		"state_dict": func(L *lua.LState) int {
			tensors, nums := o.StateDict()
			out := L.NewTable()
			for k, t := range tensors {
				out.RawSetString(k, env.push(L, t))
			}
			for k, v := range nums {
				out.RawSetString(k, lua.LNumber(v))
			}
			L.Push(out)
			return 1
		},
		"load_state_dict": func(L *lua.LState) int {
			tensors, nums := map[string]*core.Tensor{}, map[string]float64{}
			L.CheckTable(2).ForEach(func(k, v lua.LValue) {
				switch x := v.(type) {
				case lua.LNumber:
					nums[k.String()] = float64(x)
				case *lua.LUserData:
					t, ok := x.Value.(*core.Tensor)
					if !ok {
						argError(L, "load_state_dict", "%s is not a tensor", k.String())
					}
					tensors[k.String()] = t
				default:
					argError(L, "load_state_dict", "%s is a %s, expected a tensor or a number", k.String(), luaTypeName(v))
				}
			})
			raise(L, o.LoadStateDict(tensors, nums))
			return 0
		},
		"step":      func(L *lua.LState) int { raise(L, o.Step()); return 0 },
		"zero_grad": func(L *lua.LState) int { o.ZeroGrad(); return 0 },
		"get_lr":    func(L *lua.LState) int { L.Push(lua.LNumber(*lr)); return 1 },
		"set_lr": func(L *lua.LState) int {
			v := L.CheckNumber(2)
			if v < 0 {
				argError(L, "set_lr", "learning rate must be >= 0, got %g", float64(v))
			}
			*lr = float32(v)
			return 0
		},
		"parameters": func(L *lua.LState) int {
			out := L.NewTable()
			for _, p := range o.Params() {
				out.Append(env.push(L, p))
			}
			L.Push(out)
			return 1
		},
	})
	L.Push(tbl)
	return 1
}

func openOptim(L *lua.LState, env *Env) {
	lib := L.NewTable()
	sgd := func(L *lua.LState) int {
		ps := paramsArg(L, "optim.sgd")
		o := core.SGDOptions{LR: 0.01}
		options(L, "optim.sgd", 2, map[string]*float32{"lr": &o.LR, "momentum": &o.Momentum, "dampening": &o.Dampening, "weight_decay": &o.WeightDecay},
			map[string]*bool{"nesterov": &o.Nesterov})
		opt, err := core.NewSGD(env.Engine, ps, o)
		raise(L, err)
		return pushOptimizer(L, env, opt, &opt.Opts.LR)
	}
	adam := func(name string, decoupled bool, wd float32) lua.LGFunction {
		return func(L *lua.LState) int {
			ps := paramsArg(L, name)
			o := core.AdamOptions{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: wd, Decoupled: decoupled}
			options(L, name, 2, map[string]*float32{"lr": &o.LR, "eps": &o.Eps, "weight_decay": &o.WeightDecay, "beta1": &o.Beta1, "beta2": &o.Beta2}, nil)
			opt, err := core.NewAdam(env.Engine, ps, o)
			raise(L, err)
			return pushOptimizer(L, env, opt, &opt.Opts.LR)
		}
	}
	L.SetFuncs(lib, map[string]lua.LGFunction{
		"sgd":   sgd,
		"adam":  adam("optim.adam", false, 0),
		"adamw": adam("optim.adamw", true, 0.01),
	})
	openOptimExtras(L, env, lib)
	L.SetGlobal("optim", lib)
}

// checkOptimizer finds the optimizer behind a Lua optimizer table.
func checkOptimizer(L *lua.LState, env *Env, fn string, n int) optimizer {
	tbl, ok := L.Get(n).(*lua.LTable)
	o, found := env.optims[tbl]
	if !ok || !found {
		argError(L, fn, "argument %d: expected an optimizer (optim.sgd, optim.adam, ...), got %s", n, luaTypeName(L.Get(n)))
	}
	return o
}

func pushScheduler(L *lua.LState, s *core.Scheduler, err error) int {
	raise(L, err)
	tbl := L.NewTable()
	L.SetFuncs(tbl, map[string]lua.LGFunction{
		"step":   func(L *lua.LState) int { s.Step(); return 0 },
		"get_lr": func(L *lua.LState) int { L.Push(lua.LNumber(s.LR())); return 1 },
	})
	L.Push(tbl)
	return 1
}

func openOptimExtras(L *lua.LState, env *Env, lib *lua.LTable) {
	num := func(L *lua.LState, fn string, opts *lua.LTable, key string, def float64, required bool) float64 {
		v := opts.RawGetString(key)
		if v == lua.LNil {
			if required {
				argError(L, fn, "option %s is required", key)
			}
			return def
		}
		n, ok := v.(lua.LNumber)
		if !ok {
			argError(L, fn, "option %s must be a number, got %s", key, luaTypeName(v))
		}
		return float64(n)
	}
	sched := func(name string, keys []string, make func(L *lua.LState, o optimizer, opt func(string, float64, bool) float64) (*core.Scheduler, error)) lua.LGFunction {
		return func(L *lua.LState) int {
			fn := "optim.lr_scheduler." + name
			o := checkOptimizer(L, env, fn, 1)
			opts := L.OptTable(2, L.NewTable())
			allowed := map[string]bool{}
			for _, k := range keys {
				allowed[k] = true
			}
			opts.ForEach(func(k, _ lua.LValue) {
				if !allowed[k.String()] {
					argError(L, fn, "unknown option %s", k.String())
				}
			})
			s, err := make(L, o, func(k string, def float64, req bool) float64 { return num(L, fn, opts, k, def, req) })
			return pushScheduler(L, s, err)
		}
	}
	sl := L.NewTable()
	L.SetFuncs(sl, map[string]lua.LGFunction{
		"step": sched("step", []string{"step_size", "gamma"}, func(L *lua.LState, o optimizer, opt func(string, float64, bool) float64) (*core.Scheduler, error) {
			return core.StepLR(o.lr, int(opt("step_size", 0, true)), opt("gamma", 0.1, false))
		}),
		"cosine": sched("cosine", []string{"t_max", "eta_min"}, func(L *lua.LState, o optimizer, opt func(string, float64, bool) float64) (*core.Scheduler, error) {
			return core.CosineLR(o.lr, int(opt("t_max", 0, true)), opt("eta_min", 0, false))
		}),
		"warmup_cosine": sched("warmup_cosine", []string{"warmup", "total", "eta_min"}, func(L *lua.LState, o optimizer, opt func(string, float64, bool) float64) (*core.Scheduler, error) {
			return core.WarmupCosineLR(o.lr, int(opt("warmup", 0, true)), int(opt("total", 0, true)), opt("eta_min", 0, false))
		}),
		"one_cycle": sched("one_cycle", []string{"max_lr", "total", "pct_start", "div_factor", "final_div_factor"}, func(L *lua.LState, o optimizer, opt func(string, float64, bool) float64) (*core.Scheduler, error) {
			return core.OneCycleLR(o.lr, opt("max_lr", 0, true), int(opt("total", 0, true)), opt("pct_start", 0.3, false), opt("div_factor", 25, false), opt("final_div_factor", 1e4, false))
		}),
	})
	L.SetField(lib, "lr_scheduler", sl)
	L.SetFuncs(lib, map[string]lua.LGFunction{
		"clip_grad_norm": func(L *lua.LState) int {
			n, err := env.Engine.ClipGradNorm(paramsArg(L, "optim.clip_grad_norm"), float32(L.CheckNumber(2)))
			return env.pushResult(L, n, err)
		},
		"clip_grad_value": func(L *lua.LState) int {
			raise(L, env.Engine.ClipGradValue(paramsArg(L, "optim.clip_grad_value"), float32(L.CheckNumber(2))))
			return 0
		},
	})
}
