package luabind

import (
	"math"
	"math/rand"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// callLua calls fn with no arguments inside run and returns its results; a
// Lua error in fn comes back as the error of run.
func callLua(L *lua.LState, fn *lua.LFunction, run func(func() error) error) []lua.LValue {
	var results []lua.LValue
	err := run(func() error {
		base := L.GetTop()
		L.Push(fn)
		if err := L.PCall(0, lua.MultRet, nil); err != nil {
			return err
		}
		for i := base + 1; i <= L.GetTop(); i++ {
			results = append(results, L.Get(i))
		}
		L.SetTop(base)
		return nil
	})
	if err != nil {
		if apiErr, ok := err.(*lua.ApiError); ok {
			L.Error(apiErr.Object, 0) // re-raise the script's own error unchanged
		}
		raise(L, err)
	}
	return results
}

func openAutograd(L *lua.LState, env *Env) {
	returning := func(L *lua.LState, vals []lua.LValue) int {
		for _, v := range vals {
			L.Push(v)
		}
		return len(vals)
	}
	L.SetGlobal("with_grad_tape", L.NewFunction(func(L *lua.LState) int {
		return returning(L, callLua(L, L.CheckFunction(1), env.Engine.WithGradTape))
	}))
	L.SetGlobal("no_grad", L.NewFunction(func(L *lua.LState) int {
		return returning(L, callLua(L, L.CheckFunction(1), env.Engine.NoGrad))
	}))
	L.SetGlobal("backward", L.NewFunction(func(L *lua.LState) int { return backward(L, env) }))
	L.SetGlobal("sync", L.NewFunction(func(L *lua.LState) int {
		raise(L, env.Engine.Realize())
		return 0
	}))

	lib := L.GetGlobal("tensor").(*lua.LTable)
	env.rng = rand.New(rand.NewSource(0))
	random := func(name string, draw func() float64) lua.LGFunction {
		return func(L *lua.LState) int {
			shape := checkShapeArgs(L, name, 1)
			t, err := core.Zeros(shape...)
			raise(L, err)
			v, _ := t.Float32s()
			for i := range v {
				v[i] = float32(draw())
			}
			L.Push(env.push(L, t))
			return 1
		}
	}
	L.SetFuncs(lib, map[string]lua.LGFunction{
		"randn": random("tensor.randn", func() float64 { return env.rng.NormFloat64() }),
		"rand":  random("tensor.rand", func() float64 { return env.rng.Float64() }),
		"ones":  random("tensor.ones", func() float64 { return 1 }),
		"manual_seed": func(L *lua.LState) int {
			env.rng.Seed(int64(L.CheckNumber(1)))
			return 0
		},
		"full": func(L *lua.LState) int {
			v := float32(L.CheckNumber(2))
			tbl, ok := L.Get(1).(*lua.LTable)
			if !ok {
				argError(L, "tensor.full", "argument 1: expected a shape table, got %s", luaTypeName(L.Get(1)))
			}
			L.Push(tbl)
			shape := checkShapeArgs(L, "tensor.full", L.GetTop())
			t, err := core.Full(v, shape...)
			raise(L, err)
			L.Push(env.push(L, t))
			return 1
		},
		"param": func(L *lua.LState) int {
			x := checkTensor(L, "tensor.param", 1)
			if !x.IsLeaf() {
				argError(L, "tensor.param", "expected a leaf tensor; this one was computed by an op (detach it first)")
			}
			raise(L, x.SetRequiresGrad(true))
			L.Push(env.push(L, x))
			return 1
		},
	})
}

// labelsArg reads cross_entropy's target: a table of 1-based labels, a 1-d
// tensor of 1-based labels, or a tensor of class probabilities shaped like
// the logits.
func labelsArg(L *lua.LState, logits *core.Tensor, n int) ([]int, *core.Tensor) {
	v := L.Get(n)
	if tbl, ok := v.(*lua.LTable); ok {
		labels := make([]int, tbl.Len())
		for i := range labels {
			x, ok := tbl.RawGetInt(i + 1).(lua.LNumber)
			if !ok || float64(x) != math.Trunc(float64(x)) {
				argError(L, "cross_entropy", "label %d is not an integer", i+1)
			}
			labels[i] = int(x) - 1
		}
		return labels, nil
	}
	t := checkTensor(L, "cross_entropy", n)
	if t.Dim() == 1 {
		vals, err := t.Float32s()
		raise(L, err)
		labels := make([]int, len(vals))
		for i, x := range vals {
			labels[i] = int(x) - 1
		}
		return labels, nil
	}
	return nil, t
}

func openLosses(L *lua.LState, env *Env) {
	nn := L.NewTable()
	pair := func(name string, f func(a, b *core.Tensor) (*core.Tensor, error)) lua.LGFunction {
		return func(L *lua.LState) int {
			t, err := f(checkTensor(L, name, 1), checkTensor(L, name, 2))
			return env.pushResult(L, t, err)
		}
	}
	L.SetFuncs(nn, map[string]lua.LGFunction{
		"mse_loss": pair("mse_loss", env.Engine.MSELoss),
		"bce_loss": pair("bce_loss", env.Engine.BCELoss),
		"cross_entropy": func(L *lua.LState) int {
			logits := checkTensor(L, "cross_entropy", 1)
			labels, probs := labelsArg(L, logits, 2)
			if probs != nil {
				t, err := env.Engine.CrossEntropy(logits, probs)
				return env.pushResult(L, t, err)
			}
			t, err := env.Engine.CrossEntropyLabels(logits, labels)
			return env.pushResult(L, t, err)
		},
	})
	L.SetGlobal("nn", nn)
}
