package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// paramsArg reads a table (sequence) of parameter tensors.
func paramsArg(L *lua.LState, fn string) []*core.Tensor {
	tbl, ok := L.Get(1).(*lua.LTable)
	if !ok {
		argError(L, fn, "argument 1: expected a table of parameters, got %s", luaTypeName(L.Get(1)))
	}
	var ps []*core.Tensor
	for i := 1; i <= tbl.Len(); i++ {
		ud, ok := tbl.RawGetInt(i).(*lua.LUserData)
		t, isT := (*core.Tensor)(nil), false
		if ok {
			t, isT = ud.Value.(*core.Tensor)
		}
		if !isT {
			argError(L, fn, "parameter %d is a %s, expected a tensor", i, luaTypeName(tbl.RawGetInt(i)))
		}
		ps = append(ps, t)
	}
	return ps
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
}

func pushOptimizer(L *lua.LState, env *Env, o stepper, lr *float32) int {
	tbl := L.NewTable()
	L.SetFuncs(tbl, map[string]lua.LGFunction{
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
	L.SetGlobal("optim", lib)
}
