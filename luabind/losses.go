package luabind

import (
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The losses of nn (core/losses.go): nn.mse_loss, nn.bce_loss,
// nn.cross_entropy. The nn modules themselves are written in Lua (nn.lua).

func (env *Env) lossFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"bce_loss":      env.binaryTensors("bce_loss", (*core.Engine).BCELoss),
		"cross_entropy": env.crossEntropy,
		"mse_loss":      env.binaryTensors("mse_loss", (*core.Engine).MSELoss),
	}
}

// cross_entropy(logits, target): target is 1-based labels (a table or a 1-d
// tensor) or class probabilities shaped like the logits.
func (env *Env) crossEntropy(L *lua.LState) int {
	logits := checkTensor(L, "cross_entropy", 1)
	labels, probs := labelsArg(L, 2)
	if probs != nil {
		t, err := env.Engine.CrossEntropy(logits, probs)
		return env.pushResult(L, t, err)
	}
	t, err := env.Engine.CrossEntropyLabels(logits, labels)
	return env.pushResult(L, t, err)
}

// labelsArg reads cross_entropy's target: 0-based labels, or nil and a
// tensor of probabilities.
func labelsArg(L *lua.LState, n int) ([]int, *core.Tensor) {
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
	if t.Dim() != 1 {
		return nil, t
	}
	vals, err := t.Float32s()
	raise(L, err)
	labels := make([]int, len(vals))
	for i, x := range vals {
		labels[i] = int(x) - 1
	}
	return labels, nil
}
