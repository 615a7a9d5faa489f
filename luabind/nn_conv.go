package luabind

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The convolution, pooling and normalisation functions of nn
// (core/ops_conv.go, core/ops_norm.go): nn.conv1d, nn.conv2d,
// nn.max_pool2d, nn.avg_pool2d, nn.adaptive_avg_pool2d, nn.batch_norm,
// nn.group_norm, nn.rms_norm. Their modules are in nn.lua.

func (env *Env) convFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"adaptive_avg_pool2d": env.adaptiveAvgPool2d,
		"avg_pool1d":          env.pool("avg_pool1d", (*core.Engine).AvgPool1d),
		"avg_pool2d":          env.pool("avg_pool2d", (*core.Engine).AvgPool2d),
		"batch_norm":          env.batchNorm,
		"conv1d":              env.conv("conv1d"),
		"conv2d":              env.conv("conv2d"),
		"conv_transpose1d":    env.conv("conv_transpose1d"),
		"conv_transpose2d":    env.conv("conv_transpose2d"),
		"group_norm":          env.groupNorm,
		"interpolate":         env.interpolate,
		"max_pool1d":          env.pool("max_pool1d", (*core.Engine).MaxPool1d),
		"max_pool2d":          env.pool("max_pool2d", (*core.Engine).MaxPool2d),
		"rms_norm":            env.rmsNorm,
	}
}

// intPair reads v as an integer or a table of two integers ({h, w}).
func intPair(L *lua.LState, fn, what string, v lua.LValue) [2]int {
	integer := func(x lua.LValue) (int, bool) {
		n, ok := x.(lua.LNumber)
		f := float64(n)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<30 {
			return 0, false
		}
		return int(f), true
	}
	if n, ok := integer(v); ok {
		return [2]int{n, n}
	}
	if t, ok := v.(*lua.LTable); ok && t.Len() == 2 {
		a, ok1 := integer(t.RawGetInt(1))
		b, ok2 := integer(t.RawGetInt(2))
		if ok1 && ok2 {
			return [2]int{a, b}
		}
	}
	argError(L, fn, "%s must be an integer or a table of two integers, got %s", what, luaTypeName(v))
	return [2]int{}
}

// pairOpt is option key as an integer pair, def when absent.
func pairOpt(o *optReader, key string, def [2]int) [2]int {
	v := o.get(key)
	if v == lua.LNil {
		return def
	}
	return intPair(o.L, o.fn, "option "+key, v)
}

// conv: nn.conv2d(x, w [, b] [, {stride=, padding=, dilation=, groups=}]),
// each of stride, padding and dilation an integer or {h, w}; nn.conv1d
// the same with integers. nn.conv_transpose2d and conv_transpose1d take
// output_padding too.
func (env *Env) conv(fn string) lua.LGFunction {
	transposed := strings.HasPrefix(fn, "conv_transpose")
	oneD := strings.HasSuffix(fn, "1d")
	return func(L *lua.LState) int {
		x := checkTensor(L, fn, 1)
		w := checkTensor(L, fn, 2)
		var b *core.Tensor
		optsAt := 4
		switch v := L.Get(3).(type) {
		case *lua.LNilType:
		case *lua.LTable:
			optsAt = 3 // no bias: the options follow the weight
		default:
			if b = toTensor(v); b == nil {
				argError(L, fn, "argument 3 (bias): expected a tensor, nil or an options table, got %s", luaTypeName(v))
			}
		}
		o := readOpts(L, fn, optsAt)
		opts := core.ConvOptions{
			Stride: pairOpt(o, "stride", [2]int{1, 1}), Padding: pairOpt(o, "padding", [2]int{0, 0}),
			Dilation: pairOpt(o, "dilation", [2]int{1, 1}),
		}
		g := o.number("groups", 1)
		if g != math.Trunc(g) || g < 1 || g > 1<<20 {
			argError(L, fn, "option groups must be a positive integer, got %g", g)
		}
		opts.Groups = int(g)
		topts := core.ConvTransposeOptions{ConvOptions: opts}
		if transposed {
			topts.OutputPadding = pairOpt(o, "output_padding", [2]int{0, 0})
		}
		o.done()
		if oneD {
			for _, p := range [][2]int{opts.Stride, opts.Padding, opts.Dilation, topts.OutputPadding} {
				if p[0] != p[1] {
					argError(L, fn, "stride, padding, dilation and output_padding are integers for a 1-d convolution")
				}
			}
		}
		var t *core.Tensor
		var err error
		switch fn {
		case "conv1d":
			t, err = env.Engine.Conv1d(x, w, b, opts)
		case "conv2d":
			t, err = env.Engine.Conv2d(x, w, b, opts)
		case "conv_transpose1d":
			t, err = env.Engine.ConvTranspose1d(x, w, b, topts)
		default:
			t, err = env.Engine.ConvTranspose2d(x, w, b, topts)
		}
		return env.pushResult(L, t, err)
	}
}

// pool: nn.max_pool2d(x, kernel [, {stride=kernel, padding=0, dilation=1,
// ceil_mode=false}]) and nn.avg_pool2d(x, kernel [, {stride=kernel,
// padding=0, ceil_mode=false, count_include_pad=true,
// divisor_override=nil}]), PyTorch's options; kernel, stride, padding and
// dilation are integers or {h, w}. The 1-d forms take integers.
func (env *Env) pool(fn string, f func(*core.Engine, *core.Tensor, core.PoolOptions) (*core.Tensor, error)) lua.LGFunction {
	oneD := fn == "max_pool1d" || fn == "avg_pool1d"
	isMax := fn == "max_pool1d" || fn == "max_pool2d"
	return func(L *lua.LState) int {
		x := checkTensor(L, fn, 1)
		k := intPair(L, fn, "argument 2 (kernel size)", L.Get(2))
		o := readOpts(L, fn, 3)
		opts := core.PoolOptions{Kernel: k, Padding: pairOpt(o, "padding", [2]int{})}
		opts.Stride = pairOpt(o, "stride", k)
		opts.CeilMode = o.boolean("ceil_mode", false)
		opts.Dilation = [2]int{1, 1}
		if isMax {
			opts.Dilation = pairOpt(o, "dilation", opts.Dilation)
		} else {
			opts.ExcludePadding = !o.boolean("count_include_pad", true)
			if o.has("divisor_override") {
				d := o.number("divisor_override", 0)
				if d != math.Trunc(d) || d < 1 || d > 1<<30 {
					argError(L, fn, "option divisor_override must be a positive integer, got %g", d)
				}
				opts.DivisorOverride = int(d)
			} else {
				o.get("divisor_override")
			}
		}
		o.done()
		for _, p := range [][2]int{opts.Kernel, opts.Stride, opts.Dilation} {
			if p[0] < 1 || p[1] < 1 {
				argError(L, fn, "kernel size, stride and dilation must be positive, got %v, %v and %v", opts.Kernel, opts.Stride, opts.Dilation)
			}
		}
		if oneD {
			for _, p := range [][2]int{opts.Kernel, opts.Stride, opts.Padding, opts.Dilation} {
				if p[0] != p[1] {
					argError(L, fn, "kernel size, stride, padding and dilation are integers for a 1-d pooling")
				}
			}
		}
		t, err := f(env.Engine, x, opts)
		return env.pushResult(L, t, err)
	}
}

// nn.interpolate(x, {size= | scale_factor=, mode="nearest",
// align_corners=false, recompute_scale_factor=false, antialias=false}):
// F.interpolate of [N, C, L] or [N, C, H, W]. size and scale_factor are a
// number for every spatial dim or a table of one each.
func (env *Env) interpolate(L *lua.LState) int {
	const fn = "interpolate"
	x := checkTensor(L, fn, 1)
	o := readOpts(L, fn, 2)
	spatial := max(x.Dim()-2, 1) // core refuses other ranks
	each := func(key string) []float64 {
		switch v := o.get(key).(type) {
		case *lua.LNilType:
			return nil
		case lua.LNumber:
			out := make([]float64, spatial)
			for i := range out {
				out[i] = float64(v)
			}
			return out
		case *lua.LTable:
			var out []float64
			for i := 1; i <= v.Len(); i++ {
				n, ok := v.RawGetInt(i).(lua.LNumber)
				if !ok {
					argError(L, fn, "%s[%d] must be a number, got %s", key, i, luaTypeName(v.RawGetInt(i)))
				}
				out = append(out, float64(n))
			}
			return out
		default:
			argError(L, fn, "option %s must be a number or a table of numbers, got %s", key, luaTypeName(v))
			return nil
		}
	}
	opts := core.InterpolateOptions{Mode: o.str("mode", "nearest"), AlignCorners: o.boolean("align_corners", false), Scale: each("scale_factor")}
	if size := each("size"); size != nil {
		for _, n := range size {
			if n != math.Trunc(n) || n < 0 || n > 1<<30 {
				argError(L, fn, "option size must hold whole numbers, got %g", n)
			}
			opts.Size = append(opts.Size, int(n))
		}
	}
	opts.RecomputeScale = o.boolean("recompute_scale_factor", false)
	if o.boolean("antialias", false) {
		argError(L, fn, "antialias=true is not supported")
	}
	o.done()
	t, err := env.Engine.Interpolate(x, opts)
	return env.pushResult(L, t, err)
}

// nn.adaptive_avg_pool2d(x, output_size): an integer or {h, w}.
func (env *Env) adaptiveAvgPool2d(L *lua.LState) int {
	x := checkTensor(L, "adaptive_avg_pool2d", 1)
	out := intPair(L, "adaptive_avg_pool2d", "argument 2 (output size)", L.Get(2))
	t, err := env.Engine.AdaptiveAvgPool2d(x, out)
	return env.pushResult(L, t, err)
}

// optionalTensor is argument n as a tensor, or nil when it is nil.
func optionalTensor(L *lua.LState, fn string, n int) *core.Tensor {
	if L.Get(n) == lua.LNil {
		return nil
	}
	return checkTensor(L, fn, n)
}

// nn.batch_norm(x, running_mean, running_var [, weight, bias, training,
// momentum, eps | {weight=, bias=, training=false, momentum=0.1,
// eps=1e-5}]), as PyTorch's, positionally in its order or as options: in
// training the running statistics (either may be nil, then both) are
// updated in place.
func (env *Env) batchNorm(L *lua.LState) int {
	const fn = "batch_norm"
	x := checkTensor(L, fn, 1)
	rm, rv := optionalTensor(L, fn, 2), optionalTensor(L, fn, 3)
	var w, b *core.Tensor
	opts := core.BatchNormOptions{Momentum: 0.1, Eps: 1e-5}
	if optionsAt(L, fn, 4, 8) {
		o := readOpts(L, fn, 4)
		w, b = tensorOpt(o, "weight"), tensorOpt(o, "bias")
		opts = core.BatchNormOptions{Training: o.boolean("training", false), Momentum: o.number("momentum", 0.1), Eps: o.number("eps", 1e-5)}
		o.done()
	} else {
		w, b = optionalTensor(L, fn, 4), optionalTensor(L, fn, 5)
		opts.Training = positionalBool(L, fn, 6, "training", false)
		opts.Momentum = positionalNumber(L, fn, 7, "momentum", 0.1)
		opts.Eps = positionalNumber(L, fn, 8, "eps", 1e-5)
	}
	t, err := env.Engine.BatchNorm(x, rm, rv, w, b, opts)
	return env.pushResult(L, t, err)
}

// nn.group_norm(x, groups [, weight, bias, eps | {weight=, bias=,
// eps=1e-5}]), positionally in PyTorch's order or as options.
func (env *Env) groupNorm(L *lua.LState) int {
	const fn = "group_norm"
	x := checkTensor(L, fn, 1)
	g := checkInteger(L, fn, 2)
	var w, b *core.Tensor
	var eps float64
	if optionsAt(L, fn, 3, 5) {
		o := readOpts(L, fn, 3)
		w, b = tensorOpt(o, "weight"), tensorOpt(o, "bias")
		eps = o.number("eps", 1e-5)
		o.done()
	} else {
		w, b = optionalTensor(L, fn, 3), optionalTensor(L, fn, 4)
		eps = positionalNumber(L, fn, 5, "eps", 1e-5)
	}
	t, err := env.Engine.GroupNorm(x, g, w, b, eps)
	return env.pushResult(L, t, err)
}

// nn.rms_norm(x, normalized_shape [, {weight=, eps=}]): normalized_shape
// an integer or a table of sizes (the trailing dims); eps defaults to
// float32's machine epsilon, as PyTorch's.
func (env *Env) rmsNorm(L *lua.LState) int {
	const fn = "rms_norm"
	x := checkTensor(L, fn, 1)
	var shape []int
	switch v := L.Get(2).(type) {
	case lua.LNumber:
		shape = []int{checkInteger(L, fn, 2)}
	case *lua.LTable:
		for i := 1; i <= v.Len(); i++ {
			n, ok := v.RawGetInt(i).(lua.LNumber)
			if !ok || float64(n) != math.Trunc(float64(n)) || n < 1 || n > 1<<30 {
				argError(L, fn, "normalized_shape must hold positive integers, got %s at %d", luaTypeName(v.RawGetInt(i)), i)
			}
			shape = append(shape, int(n))
		}
	default:
		argError(L, fn, "argument 2 (normalized_shape): expected an integer or a table of sizes, got %s", luaTypeName(v))
	}
	o := readOpts(L, fn, 3)
	w := tensorOpt(o, "weight")
	var eps *float64
	if o.has("eps") {
		v := o.number("eps", 0)
		eps = &v
	} else {
		o.get("eps")
	}
	o.done()
	t, err := env.Engine.RMSNorm(x, shape, w, eps)
	return env.pushResult(L, t, err)
}
