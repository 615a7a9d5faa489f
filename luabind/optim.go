package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The optim library: optimizers (core/optim.go), gradient clipping
// (core/clip.go) and, in lr_scheduler.go, the learning-rate schedulers.

func (env *Env) optimFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"adam":            env.adam("optim.adam", false, 0),
		"adamw":           env.adam("optim.adamw", true, 0.01),
		"clip_grad_norm":  env.clipGradNorm,
		"clip_grad_value": env.clipGradValue,
		"sgd":             env.sgd,
	}
}

func openOptim(L *lua.LState, env *Env) {
	lib := L.SetFuncs(L.NewTable(), functions("optim.", env.optimFunctions()))
	L.SetField(lib, "lr_scheduler", L.SetFuncs(L.NewTable(), functions("optim.lr_scheduler.", env.schedulerFunctions())))
	L.SetGlobal("optim", lib)
}

// sgd(params, {lr=0.01, momentum=0, dampening=0, weight_decay=0, nesterov=false}).
func (env *Env) sgd(L *lua.LState) int {
	ps := paramsArg(L, "optim.sgd")
	r := readOpts(L, "optim.sgd", 2)
	lr := r.number("lr", 0.01)
	o := core.SGDOptions{
		LR:          float32(lr),
		Momentum:    float32(r.number("momentum", 0)),
		Dampening:   float32(r.number("dampening", 0)),
		WeightDecay: float32(r.number("weight_decay", 0)),
		Nesterov:    r.boolean("nesterov", false),
	}
	r.done()
	opt, err := core.NewSGD(env.Engine, ps, o)
	raise(L, err)
	raise(L, opt.Rate().SetLR(lr)) // the rate as given, in float64, for the schedulers
	return env.pushOptimizer(L, opt)
}

// adam and adamw(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=}).
func (env *Env) adam(name string, decoupled bool, wd float64) lua.LGFunction {
	return func(L *lua.LState) int {
		ps := paramsArg(L, name)
		r := readOpts(L, name, 2)
		b1, b2 := r.pair("betas", 0.9, 0.999)
		lr := r.number("lr", 1e-3)
		o := core.AdamOptions{
			LR:          float32(lr),
			Beta1:       float32(b1),
			Beta2:       float32(b2),
			Eps:         float32(r.number("eps", 1e-8)),
			WeightDecay: float32(r.number("weight_decay", wd)),
			Decoupled:   decoupled,
		}
		r.done()
		opt, err := core.NewAdam(env.Engine, ps, o)
		raise(L, err)
		raise(L, opt.Rate().SetLR(lr))
		return env.pushOptimizer(L, opt)
	}
}

func (env *Env) clipGradNorm(L *lua.LState) int {
	n, err := env.Engine.ClipGradNorm(paramsArg(L, "optim.clip_grad_norm"), float32(L.CheckNumber(2)))
	return env.pushResult(L, n, err)
}

func (env *Env) clipGradValue(L *lua.LState) int {
	raise(L, env.Engine.ClipGradValue(paramsArg(L, "optim.clip_grad_value"), float32(L.CheckNumber(2))))
	return 0
}

// stepper is what every core optimizer does.
type stepper interface {
	Step() error
	ZeroGrad()
	Params() []*core.Tensor
	StateDict() (map[string]*core.Tensor, map[string]float64, error)
	LoadStateDict(map[string]*core.Tensor, map[string]float64) error
	Rate() *core.Rate
}

// optimizer is what a Lua optimizer table stands for.
type optimizer struct {
	o stepper
}

// optimizerField is the metatable field of an optimizer table that holds
// the optimizer (in a userdata). Nothing but the table refers to the
// optimizer, so it and its state go when the script drops the table.
const optimizerField = "__optimizer"

// pushOptimizer pushes the Lua face of o: a table of methods.
func (env *Env) pushOptimizer(L *lua.LState, o stepper) int {
	tbl := L.NewTable()
	opt := optimizer{o: o}
	ud := L.NewUserData()
	ud.Value = opt
	mt := L.NewTable()
	mt.RawSetString("__name", lua.LString("optimizer"))
	mt.RawSetString(optimizerField, ud)
	tbl.Metatable = mt
	L.SetFuncs(tbl, functions("optimizer:", map[string]lua.LGFunction{
		"get_lr":          opt.getLR,
		"load_state_dict": opt.loadStateDict,
		"parameters":      env.optimParameters(o),
		"set_lr":          opt.setLR,
		"state_dict":      env.optimStateDict(o),
		"step":            opt.step,
		"zero_grad":       opt.zeroGrad,
	}))
	L.Push(tbl)
	return 1
}

func (o optimizer) step(L *lua.LState) int     { raise(L, o.o.Step()); return 0 }
func (o optimizer) zeroGrad(L *lua.LState) int { o.o.ZeroGrad(); return 0 }
func (o optimizer) getLR(L *lua.LState) int    { L.Push(lua.LNumber(o.o.Rate().LR())); return 1 }

func (o optimizer) setLR(L *lua.LState) int {
	raise(L, o.o.Rate().SetLR(float64(L.CheckNumber(2))))
	return 0
}

func (o optimizer) loadStateDict(L *lua.LState) int {
	tensors, nums := map[string]*core.Tensor{}, map[string]float64{}
	L.CheckTable(2).ForEach(func(k, v lua.LValue) {
		if n, ok := v.(lua.LNumber); ok {
			nums[k.String()] = float64(n)
			return
		}
		t := toTensor(v)
		if t == nil {
			argError(L, "load_state_dict", "%s is a %s, expected a tensor or a number", k.String(), luaTypeName(v))
		}
		tensors[k.String()] = t
	})
	raise(L, o.o.LoadStateDict(tensors, nums))
	return 0
}

// optimStateDict is opt:state_dict(): torch's names ("state.1.exp_avg",
// step, lr, initial_lr), taken after any queued step has run, as host
// copies that later steps leave alone (torch hands out the live state).
func (env *Env) optimStateDict(o stepper) lua.LGFunction {
	return func(L *lua.LState) int {
		tensors, nums, err := o.StateDict()
		raise(L, err)
		out := L.NewTable()
		for k, t := range tensors {
			out.RawSetString(k, env.push(L, t))
		}
		for k, v := range nums {
			out.RawSetString(k, lua.LNumber(v))
		}
		L.Push(out)
		return 1
	}
}

func (env *Env) optimParameters(o stepper) lua.LGFunction {
	return func(L *lua.LState) int {
		out := L.NewTable()
		for _, p := range o.Params() {
			out.Append(env.push(L, p))
		}
		L.Push(out)
		return 1
	}
}

// checkOptimizer finds the optimizer behind a Lua optimizer table.
func (env *Env) checkOptimizer(L *lua.LState, fn string, n int) optimizer {
	var o optimizer
	found := false
	if tbl, ok := L.Get(n).(*lua.LTable); ok {
		if mt, ok := tbl.Metatable.(*lua.LTable); ok {
			if ud, ok := mt.RawGetString(optimizerField).(*lua.LUserData); ok {
				o, found = ud.Value.(optimizer)
			}
		}
	}
	if !found {
		argError(L, fn, "argument %d: expected an optimizer (optim.sgd, optim.adam, ...), got %s", n, luaTypeName(L.Get(n)))
	}
	return o
}
