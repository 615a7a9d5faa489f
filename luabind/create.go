package luabind

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Constructors: tensor{...}, zeros, ones, full, rand, randn, arange, eye,
// param. An options table may close any of them:
// {dtype="f16", requires_grad=true}.

type createOpts struct {
	dtype        ggmlcgo.Type
	dtypeGiven   bool // the options named a dtype (the *_like ones keep x's otherwise)
	requiresGrad bool
}

// isOptions reports whether v is an options table (string keys only) rather
// than a shape or data table.
func isOptions(v lua.LValue) bool {
	tbl, ok := v.(*lua.LTable)
	if !ok || tbl.Len() > 0 {
		return false
	}
	has := false
	tbl.ForEach(func(k, _ lua.LValue) {
		if _, isStr := k.(lua.LString); isStr {
			has = true
		}
	})
	return has
}

// trailingOpts reads an options table at the end of the arguments; it
// returns the options and the index of the last argument before them.
func trailingOpts(L *lua.LState, fn string) (createOpts, int) {
	o := createOpts{dtype: ggmlcgo.F32}
	top := L.GetTop()
	if top == 0 || !isOptions(L.Get(top)) {
		return o, top
	}
	r := readOpts(L, fn, top)
	o.dtypeGiven = r.has("dtype")
	o.dtype = parseDtype(L, fn, r.str("dtype", "f32"))
	o.requiresGrad = r.boolean("requires_grad", false)
	r.done()
	return o, top - 1
}

// finish applies creation options to a new host tensor and pushes it.
func (env *Env) finish(L *lua.LState, fn string, t *core.Tensor, o createOpts) int {
	if o.dtype == ggmlcgo.I32 && t.Dtype() != ggmlcgo.I32 {
		v, err := t.Float64s()
		raise(L, err)
		return env.finishExact(L, fn, t.Shape(), o, func(i int) float64 { return v[i] })
	}
	if o.dtype != ggmlcgo.F32 && t.Dtype() != o.dtype {
		raise(L, t.SetHostDtype(o.dtype))
	}
	if o.requiresGrad {
		raise(L, t.SetRequiresGrad(true))
	}
	L.Push(env.push(L, t))
	return 1
}

// finishExact makes a host tensor of shape whose element i is value(i),
// read without rounding through f32 when the dtype is i32 (integers past
// 2^24 stay exact), then finishes it.
func (env *Env) finishExact(L *lua.LState, fn string, shape []int, o createOpts, value func(i int) float64) int {
	n := elements(shape)
	env.checkHost(L, fn, n)
	var t *core.Tensor
	var err error
	if o.dtype == ggmlcgo.I32 {
		ints := make([]int32, n)
		for i := range ints {
			if ints[i], err = core.Int32FromFloat(value(i)); err != nil {
				argError(L, fn, "element %d: %s", i+1, strings.TrimPrefix(err.Error(), "i32: "))
			}
		}
		t, err = core.FromInt32(ints, shape...)
	} else {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(value(i))
		}
		t, err = core.FromFloat32(v, shape...)
	}
	if err != nil {
		argError(L, fn, "%s", strings.TrimPrefix(err.Error(), "tensor: "))
	}
	return env.finish(L, fn, t, o)
}

// filled binds a constructor whose elements are value(env), drawn in order.
func (env *Env) filled(name string, value func(*Env) float32) lua.LGFunction {
	return func(L *lua.LState) int {
		o, last := trailingOpts(L, name)
		shape := shapeUpTo(L, name, 1, last)
		env.checkHost(L, name, elements(shape))
		t, err := core.Zeros(shape...)
		if err != nil {
			argError(L, name, "%s", strings.TrimPrefix(err.Error(), "tensor: "))
		}
		v, _ := t.Float32s()
		for i := range v {
			v[i] = value(env)
		}
		return env.finish(L, name, t, o)
	}
}

// full(shape, value).
func (env *Env) full(L *lua.LState) int {
	o, _ := trailingOpts(L, "tensor.full")
	shape := shapeUpTo(L, "tensor.full", 1, 1)
	v := float64(L.CheckNumber(2))
	return env.finishExact(L, "tensor.full", shape, o, func(int) float64 { return v })
}

// scalar_tensor(v [, {dtype=, requires_grad=}]) is PyTorch's scalar_tensor:
// gglua has no 0-d tensors, so a 1-element tensor that checkpoints write
// as 0-d (core's Tensor.Scalar), as a PyTorch scalar buffer is.
func (env *Env) scalarTensor(L *lua.LState) int {
	o, _ := trailingOpts(L, "tensor.scalar_tensor")
	v := float64(L.CheckNumber(1))
	n := env.finishExact(L, "tensor.scalar_tensor", []int{1}, o, func(int) float64 { return v })
	raise(L, checkTensor(L, "tensor.scalar_tensor", -1).MarkScalar())
	return n
}

// arange([start,] stop [, step]) as PyTorch: stop excluded.
func (env *Env) arange(L *lua.LState) int {
	o, last := trailingOpts(L, "tensor.arange")
	start, stop, step := 0.0, float64(L.CheckNumber(1)), 1.0
	if last >= 2 {
		start, stop = float64(L.CheckNumber(1)), float64(L.CheckNumber(2))
	}
	if last >= 3 {
		step = float64(L.CheckNumber(3))
	}
	for _, v := range []float64{start, stop, step} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			argError(L, "tensor.arange", "start, stop and step must be finite, got %g to %g by %g", start, stop, step)
		}
	}
	if step == 0 {
		argError(L, "tensor.arange", "step must be nonzero")
	}
	if (stop-start)*step < 0 { // start = stop is an empty tensor, as PyTorch's
		argError(L, "tensor.arange", "range %g to %g is inconsistent with the step %g's sign", start, stop, step)
	}
	n := math.Ceil((stop - start) / step)
	if n > 1<<30 || math.IsNaN(n) {
		argError(L, "tensor.arange", "range %g to %g by %g has too many values", start, stop, step)
	}
	return env.finishExact(L, "tensor.arange", []int{int(n)}, o, func(i int) float64 { return start + float64(i)*step })
}

// eye(n [, m]).
func (env *Env) eye(L *lua.LState) int {
	o, last := trailingOpts(L, "tensor.eye")
	n := checkInteger(L, "tensor.eye", 1)
	m := n
	if last >= 2 {
		m = checkInteger(L, "tensor.eye", 2)
	}
	env.checkHost(L, "tensor.eye", elements([]int{n, m}))
	t, err := core.Zeros(n, m)
	raise(L, err)
	v, _ := t.Float32s()
	for i := 0; i < n && i < m; i++ {
		v[i*m+i] = 1
	}
	return env.finish(L, "tensor.eye", t, o)
}

// manual_seed(n) seeds the engine's generator (rand, randn, dropout,
// shuffling).
func (env *Env) manualSeed(L *lua.LState) int {
	env.Engine.Rand().Seed(int64(L.CheckNumber(1)))
	return 0
}

// param(x) marks a leaf as a parameter (requires grad) and returns it.
func (env *Env) param(L *lua.LState) int {
	x := checkTensor(L, "tensor.param", 1)
	if !x.IsLeaf() {
		argError(L, "tensor.param", "expected a leaf tensor; this one was computed by an op (detach it first)")
	}
	ud := L.Get(1).(*lua.LUserData)
	if x.IsView() || (x.OnDevice() && x.Scope() == "pass") {
		// A view shares storage a parameter cannot own, and a value
		// computed on the device lives in the pass pool, which the next
		// step frees: a parameter made of either starts as a host copy.
		h, err := x.ToHost()
		raise(L, err)
		x, ud = h, L.NewUserData()
		ud.Value = h
		L.SetMetatable(ud, L.GetTypeMetatable(tensorTypeName))
	}
	raise(L, x.SetRequiresGrad(true))
	x.MarkParam()
	L.Push(env.adopt(ud))
	return 1
}

// elements is the element count of a shape, saturating instead of
// overflowing (bad sizes are refused later, with a better message).
func elements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d <= 0 {
			return 0
		}
		if n > math.MaxInt64/int64(d) {
			return math.MaxInt64
		}
		n *= int64(d)
	}
	return n
}
