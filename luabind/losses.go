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

// cross_entropy(logits, target [, {reduction=, label_smoothing=,
// ignore_index=, weight=}]): target is 1-based labels (a table or a 1-d
// tensor) or class probabilities shaped like the logits; ignore_index is a
// 1-based label value; weight a tensor of one weight per class.
func (env *Env) crossEntropy(L *lua.LState) int {
	logits := checkTensor(L, "cross_entropy", 1)
	labels, probs := labelsArg(L, 2)
	o := readOpts(L, "cross_entropy", 3)
	opts := core.CrossEntropyOptions{
		Reduction:      o.str("reduction", "mean"),
		LabelSmoothing: o.number("label_smoothing", 0),
	}
	if o.has("ignore_index") {
		v := o.number("ignore_index", 0)
		if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
			argError(L, "cross_entropy", "option ignore_index must be an integer (a 1-based label), got %g", v)
		}
		ig := int(v) - 1
		opts.IgnoreIndex = &ig
	} else {
		o.get("ignore_index")
	}
	if w := o.get("weight"); w != lua.LNil {
		if opts.Weight = toTensor(w); opts.Weight == nil {
			argError(L, "cross_entropy", "option weight must be a tensor, got %s", luaTypeName(w))
		}
	}
	o.done()
	if probs != nil {
		t, err := env.Engine.CrossEntropy(logits, probs, opts)
		return env.pushResult(L, t, err)
	}
	t, err := env.Engine.CrossEntropyLabels(logits, labels, opts)
	return env.pushResult(L, t, err)
}

// labelsArg reads cross_entropy's target: 1-based labels, returned
// 0-based, or nil and a tensor of probabilities. A label that is not an
// integer is an error naming its row.
func labelsArg(L *lua.LState, n int) ([]int, *core.Tensor) {
	var vals []float64
	if tbl, ok := L.Get(n).(*lua.LTable); ok {
		vals = make([]float64, tbl.Len())
		for i := range vals {
			x, ok := tbl.RawGetInt(i + 1).(lua.LNumber)
			if !ok {
				argError(L, "cross_entropy", "label at row %d is a %s, expected an integer", i+1, luaTypeName(tbl.RawGetInt(i+1)))
			}
			vals[i] = float64(x)
		}
	} else {
		t := checkTensor(L, "cross_entropy", n)
		if t.Dim() != 1 {
			return nil, t
		}
		f, err := t.Float32s()
		raise(L, err)
		vals = make([]float64, len(f))
		for i, x := range f {
			vals[i] = float64(x)
		}
	}
	labels := make([]int, len(vals))
	for i, x := range vals {
		if x != math.Trunc(x) || math.Abs(x) > 1<<31 {
			argError(L, "cross_entropy", "label %g at row %d is not an integer (labels are 1-based class numbers)", x, i+1)
		}
		labels[i] = int(x) - 1
	}
	return labels, nil
}
