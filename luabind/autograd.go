package luabind

import (
	"fmt"
	"math"

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
	// detect_anomaly("warn" | "stop" | "off"): what an optimizer step does
	// when a gradient holds NaN or Inf.
	L.SetGlobal("detect_anomaly", L.NewFunction(func(L *lua.LState) int {
		m, err := core.ParseAnomalyMode(L.OptString(1, "warn"))
		if err != nil {
			argError(L, "detect_anomaly", "%s", err.Error())
		}
		env.Engine.SetAnomalyMode(m, func(msg string) { fmt.Fprintln(env.stderr(), "gglua: warning: "+msg) })
		return 0
	}))
	L.SetGlobal("sync", L.NewFunction(func(L *lua.LState) int {
		raise(L, env.Engine.Realize())
		return 0
	}))

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
	pair := func(name string, f func(e *core.Engine, a, b *core.Tensor) (*core.Tensor, error)) lua.LGFunction {
		return func(L *lua.LState) int {
			t, err := f(env.Engine, checkTensor(L, name, 1), checkTensor(L, name, 2))
			return env.pushResult(L, t, err)
		}
	}
	L.SetFuncs(nn, map[string]lua.LGFunction{
		"mse_loss": pair("mse_loss", (*core.Engine).MSELoss),
		"bce_loss": pair("bce_loss", (*core.Engine).BCELoss),
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
