package luabind

import (
	"math"
	"math/rand"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// creation options close any constructor: {dtype="f16", requires_grad=true}.
type createOpts struct {
	dtype        ggmlcgo.Type
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
	L.Get(top).(*lua.LTable).ForEach(func(k, v lua.LValue) {
		switch k.String() {
		case "dtype":
			dt, err := ggmlcgo.ParseType(v.String())
			if err != nil || dt == ggmlcgo.I32 {
				argError(L, fn, "unknown dtype %q (expected f32, f16 or bf16)", v.String())
			}
			o.dtype = dt
		case "requires_grad":
			o.requiresGrad = lua.LVAsBool(v)
		default:
			argError(L, fn, "unknown option %s (expected dtype or requires_grad)", k.String())
		}
	})
	return o, top - 1
}

// finish applies creation options to a new host tensor and pushes it.
func (env *Env) finish(L *lua.LState, fn string, t *core.Tensor, o createOpts) int {
	if o.dtype != ggmlcgo.F32 {
		raise(L, t.SetHostDtype(o.dtype))
	}
	if o.requiresGrad {
		raise(L, t.SetRequiresGrad(true))
	}
	L.Push(env.push(L, t))
	return 1
}

// shapeUpTo reads the shape given as numbers (or one table) in args from..to.
func shapeUpTo(L *lua.LState, fn string, from, to int) []int {
	var vals []lua.LValue
	if tbl, ok := L.Get(from).(*lua.LTable); ok && to == from {
		for i := 1; i <= tbl.Len(); i++ {
			vals = append(vals, tbl.RawGetInt(i))
		}
	} else {
		for i := from; i <= to; i++ {
			vals = append(vals, L.Get(i))
		}
	}
	if len(vals) == 0 {
		argError(L, fn, "expected a shape (sizes as numbers or a table), got nothing")
	}
	shape := make([]int, len(vals))
	for i, v := range vals {
		n, ok := v.(lua.LNumber)
		if !ok || float64(n) != math.Trunc(float64(n)) || math.Abs(float64(n)) > 1<<40 {
			argError(L, fn, "size %d must be an integer, got %s", i+1, v.String())
		}
		shape[i] = int(n)
	}
	return shape
}

// checkShapeArgs reads a shape from argument from to the end.
func checkShapeArgs(L *lua.LState, fn string, from int) []int {
	return shapeUpTo(L, fn, from, L.GetTop())
}

func openCreate(L *lua.LState, env *Env, lib *lua.LTable) {
	filled := func(name string, value func() float32) lua.LGFunction {
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
				v[i] = value()
			}
			return env.finish(L, name, t, o)
		}
	}
	rng := func() *rand.Rand { return env.Engine.Rand() } // device.use replaces the engine
	L.SetFuncs(lib, map[string]lua.LGFunction{
		"zeros": filled("tensor.zeros", func() float32 { return 0 }),
		"ones":  filled("tensor.ones", func() float32 { return 1 }),
		"randn": filled("tensor.randn", func() float32 { return float32(rng().NormFloat64()) }),
		"rand":  filled("tensor.rand", func() float32 { return float32(rng().Float64()) }),
		"full": func(L *lua.LState) int {
			o, _ := trailingOpts(L, "tensor.full")
			shape := shapeUpTo(L, "tensor.full", 1, 1)
			env.checkHost(L, "tensor.full", elements(shape))
			t, err := core.Full(float32(L.CheckNumber(2)), shape...)
			raise(L, err)
			return env.finish(L, "tensor.full", t, o)
		},
		"arange": func(L *lua.LState) int {
			o, last := trailingOpts(L, "tensor.arange")
			start, stop, step := 0.0, float64(L.CheckNumber(1)), 1.0
			if last >= 2 {
				start, stop = float64(L.CheckNumber(1)), float64(L.CheckNumber(2))
			}
			if last >= 3 {
				step = float64(L.CheckNumber(3))
			}
			n := math.Ceil((stop - start) / step)
			if step == 0 || n < 1 || n > 1<<30 || math.IsNaN(n) {
				argError(L, "tensor.arange", "empty or bad range %g to %g by %g", start, stop, step)
			}
			env.checkHost(L, "tensor.arange", int64(n))
			v := make([]float32, int(n))
			for i := range v {
				v[i] = float32(start + float64(i)*step)
			}
			t, err := core.FromFloat32(v, len(v))
			raise(L, err)
			return env.finish(L, "tensor.arange", t, o)
		},
		"eye": func(L *lua.LState) int {
			o, last := trailingOpts(L, "tensor.eye")
			n := L.CheckInt(1)
			m := n
			if last >= 2 {
				m = L.CheckInt(2)
			}
			env.checkHost(L, "tensor.eye", elements([]int{n, m}))
			t, err := core.Zeros(n, m)
			raise(L, err)
			v, _ := t.Float32s()
			for i := 0; i < n && i < m; i++ {
				v[i*m+i] = 1
			}
			return env.finish(L, "tensor.eye", t, o)
		},
		"manual_seed": func(L *lua.LState) int {
			rng().Seed(int64(L.CheckNumber(1)))
			return 0
		},
		"param": func(L *lua.LState) int {
			x := checkTensor(L, "tensor.param", 1)
			if !x.IsLeaf() {
				argError(L, "tensor.param", "expected a leaf tensor; this one was computed by an op (detach it first)")
			}
			ud := L.Get(1).(*lua.LUserData)
			if x.OnDevice() && x.Scope() == "pass" {
				// A value computed on the device lives in the pass pool, which
				// the next step frees: a parameter made of it starts on the host.
				h, err := x.ToHost()
				raise(L, err)
				x, ud = h, L.NewUserData()
				ud.Value = h
				L.SetMetatable(ud, L.GetTypeMetatable(tensorTypeName))
			}
			raise(L, x.SetRequiresGrad(true))
			L.Push(env.adopt(ud))
			return 1
		},
		"zero_grad": func(L *lua.LState) int {
			core.ZeroGrad(paramsArg(L, "tensor.zero_grad"))
			return 0
		},
		"cat": func(L *lua.LState) int {
			ts := tensorList(L, "cat", 1, "element")
			t, err := env.Engine.Cat(ts, optDim(L, "cat", 2, 0))
			return env.pushResult(L, t, err)
		},
		"save": func(L *lua.LState) int { return save(L, env) },
		"load": func(L *lua.LState) int { return load(L, env) },
	})
}

// adopt makes ud the userdata that push returns for its tensor from now on
// (a tensor that just became a parameter keeps the identity the script has).
func (env *Env) adopt(ud *lua.LUserData) *lua.LUserData {
	if env.params == nil {
		env.params = map[*core.Tensor]*lua.LUserData{}
	}
	if t, ok := ud.Value.(*core.Tensor); ok {
		if prev, ok := env.params[t]; ok {
			return prev
		}
		env.params[t] = ud
	}
	return ud
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
