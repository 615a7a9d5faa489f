package luabind

import (
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The losses of nn (core/losses.go): nn.mse_loss, nn.bce_loss,
// nn.cross_entropy, nn.nll_loss, nn.binary_cross_entropy_with_logits,
// nn.l1_loss, nn.smooth_l1_loss, nn.huber_loss, nn.kl_div. The nn modules
// themselves are written in Lua (nn.lua).

func (env *Env) lossFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"bce_loss":                         env.bceLoss,
		"bce_with_logits":                  env.bceWithLogits, // the short name (the issue's, Torch users')
		"binary_cross_entropy_with_logits": env.bceWithLogits,
		"cross_entropy":                    env.crossEntropy,
		"huber_loss":                       env.thresholdLoss("huber_loss", "delta", (*core.Engine).HuberLoss),
		"kl_div":                           env.klDiv,
		"l1_loss":                          env.reducedLoss("l1_loss", (*core.Engine).L1Loss),
		"mse_loss":                         env.reducedLoss("mse_loss", (*core.Engine).MSELoss),
		"nll_loss":                         env.nllLoss,
		"smooth_l1_loss":                   env.thresholdLoss("smooth_l1_loss", "beta", (*core.Engine).SmoothL1Loss),
	}
}

// lossArgs reads a loss's input, target and options table.
func lossArgs(L *lua.LState, fn string) (x, y *core.Tensor, o *optReader) {
	return checkTensor(L, fn, 1), checkTensor(L, fn, 2), readOpts(L, fn, 3)
}

// tensorOpt reads an option holding a tensor (nil when absent).
func tensorOpt(o *optReader, key string) *core.Tensor {
	v := o.get(key)
	if v == lua.LNil {
		return nil
	}
	t := toTensor(v)
	if t == nil {
		argError(o.L, o.fn, "option %s must be a tensor, got %s", key, luaTypeName(v))
	}
	return t
}

// ignoreIndexOpt reads ignore_index, a 1-based label, returned 0-based.
func ignoreIndexOpt(o *optReader) *int {
	if !o.has("ignore_index") {
		o.get("ignore_index")
		return nil
	}
	v := o.number("ignore_index", 0)
	if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
		argError(o.L, o.fn, "option ignore_index must be an integer (a 1-based label), got %g", v)
	}
	ig := int(v) - 1
	return &ig
}

// nll_loss(logp, labels [, {reduction=, weight=, ignore_index=}]): logp
// [batch, classes] log-probabilities, labels 1-based (a table or a 1-d
// tensor), ignore_index a 1-based label, as cross_entropy takes them.
func (env *Env) nllLoss(L *lua.LState) int {
	const fn = "nll_loss"
	logp := checkTensor(L, fn, 1)
	labels, probs := labelsArg(L, fn, 2)
	if probs != nil {
		argError(L, fn, "target must be 1-based labels (a table or a 1-d tensor), got a tensor of shape %s", core.ShapeString(probs.Shape()))
	}
	o := readOpts(L, fn, 3)
	opts := core.NLLLossOptions{Reduction: o.str("reduction", "mean"), IgnoreIndex: ignoreIndexOpt(o), Weight: tensorOpt(o, "weight")}
	o.done()
	t, err := env.Engine.NLLLoss(logp, labels, opts)
	return env.pushResult(L, t, err)
}

// binary_cross_entropy_with_logits(logits, target [, {reduction=,
// pos_weight=, weight=}]).
func (env *Env) bceWithLogits(L *lua.LState) int {
	x, y, o := lossArgs(L, "binary_cross_entropy_with_logits")
	opts := core.BCEWithLogitsOptions{Reduction: o.str("reduction", "mean"), PosWeight: tensorOpt(o, "pos_weight"), Weight: tensorOpt(o, "weight")}
	o.done()
	t, err := env.Engine.BCEWithLogits(x, y, opts)
	return env.pushResult(L, t, err)
}

// bce_loss(input, target [, {reduction=, weight=}]).
func (env *Env) bceLoss(L *lua.LState) int {
	x, y, o := lossArgs(L, "bce_loss")
	opts := core.BCELossOptions{Reduction: o.str("reduction", "mean"), Weight: tensorOpt(o, "weight")}
	o.done()
	t, err := env.Engine.BCELoss(x, y, opts)
	return env.pushResult(L, t, err)
}

// reducedLoss binds a loss that takes only a reduction: mse_loss and
// l1_loss(input, target [, {reduction=}]).
func (env *Env) reducedLoss(fn string, f func(e *core.Engine, x, y *core.Tensor, reduction string) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x, y, o := lossArgs(L, fn)
		red := o.str("reduction", "mean")
		o.done()
		t, err := f(env.Engine, x, y, red)
		return env.pushResult(L, t, err)
	}
}

// thresholdLoss binds smooth_l1_loss(input, target [, {reduction=,
// beta=1}]) and huber_loss(input, target [, {reduction=, delta=1}]): a
// loss with one threshold setting, named param, default 1.
func (env *Env) thresholdLoss(name, param string, f func(*core.Engine, *core.Tensor, *core.Tensor, string, float64) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x, y, o := lossArgs(L, name)
		red, v := o.str("reduction", "mean"), o.number(param, 1)
		o.done()
		t, err := f(env.Engine, x, y, red, v)
		return env.pushResult(L, t, err)
	}
}

// kl_div(input, target [, {reduction="mean"|"batchmean"|"sum"|"none",
// log_target=false}]): input log-probabilities, target probabilities (or
// log-probabilities with log_target).
func (env *Env) klDiv(L *lua.LState) int {
	x, y, o := lossArgs(L, "kl_div")
	red, logTarget := o.str("reduction", "mean"), o.boolean("log_target", false)
	o.done()
	t, err := env.Engine.KLDiv(x, y, red, logTarget)
	return env.pushResult(L, t, err)
}

// cross_entropy(logits, target [, {reduction=, label_smoothing=,
// ignore_index=, weight=}]): target is 1-based labels (a table or a 1-d
// tensor) or class probabilities shaped like the logits; ignore_index is a
// 1-based label value; weight a tensor of one weight per class.
func (env *Env) crossEntropy(L *lua.LState) int {
	logits := checkTensor(L, "cross_entropy", 1)
	labels, probs := labelsArg(L, "cross_entropy", 2)
	o := readOpts(L, "cross_entropy", 3)
	opts := core.CrossEntropyOptions{
		Reduction:      o.str("reduction", "mean"),
		LabelSmoothing: o.number("label_smoothing", 0),
		IgnoreIndex:    ignoreIndexOpt(o),
		Weight:         tensorOpt(o, "weight"),
	}
	o.done()
	if probs != nil {
		t, err := env.Engine.CrossEntropy(logits, probs, opts)
		return env.pushResult(L, t, err)
	}
	t, err := env.Engine.CrossEntropyLabels(logits, labels, opts)
	return env.pushResult(L, t, err)
}

// labelsArg reads the target of fn (cross_entropy, nll_loss): 1-based
// labels, returned 0-based, or nil and a tensor of probabilities. A label
// that is not an integer is an error naming its row.
func labelsArg(L *lua.LState, fn string, n int) ([]int, *core.Tensor) {
	var vals []float64
	if tbl, ok := L.Get(n).(*lua.LTable); ok {
		vals = make([]float64, tbl.Len())
		for i := range vals {
			x, ok := tbl.RawGetInt(i + 1).(lua.LNumber)
			if !ok {
				argError(L, fn, "label at row %d is a %s, expected an integer", i+1, luaTypeName(tbl.RawGetInt(i+1)))
			}
			vals[i] = float64(x)
		}
	} else {
		t := checkTensor(L, fn, n)
		if t.Dim() != 1 {
			return nil, t
		}
		var err error
		vals, err = t.Float64s()
		raise(L, err)
	}
	labels := make([]int, len(vals))
	for i, x := range vals {
		if x != math.Trunc(x) || math.Abs(x) > 1<<31 {
			argError(L, fn, "label %g at row %d is not an integer (labels are 1-based class numbers)", x, i+1)
		}
		labels[i] = int(x) - 1
	}
	return labels, nil
}
