package luabind

import (
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// plusOne turns 0-based indices (a host tensor) into Lua's 1-based ones.
func plusOne(L *lua.LState, t *core.Tensor) *core.Tensor {
	v, err := t.Float32s()
	raise(L, err)
	for i := range v {
		v[i]++
	}
	return t
}

func checkIndices(L *lua.LState, fn string, n int) []int {
	var vals []float32
	switch v := L.Get(n).(type) {
	case *lua.LTable:
		for i := 1; i <= v.Len(); i++ {
			x, ok := v.RawGetInt(i).(lua.LNumber)
			if !ok {
				argError(L, fn, "index %d is a %s, expected a number", i, luaTypeName(v.RawGetInt(i)))
			}
			vals = append(vals, float32(x))
		}
	default:
		t := checkTensor(L, fn, n)
		var err error
		vals, err = t.Float32s()
		raise(L, err)
	}
	idx := make([]int, len(vals))
	for i, x := range vals {
		if float64(x) != math.Trunc(float64(x)) {
			argError(L, fn, "index %g at position %d is not an integer", x, i+1)
		}
		idx[i] = int(x) - 1
	}
	return idx
}

// inPlace builds x_(...): the value of f(x, ...) written into x itself.
func inPlace(env *Env, name string, f func(L *lua.LState, x *core.Tensor) *core.Tensor) lua.LGFunction {
	return func(L *lua.LState) int {
		x := checkTensor(L, name, 1)
		v := f(L, x)
		if err := env.Engine.Assign(x, v); err != nil {
			argError(L, name, "%s", err.Error())
		}
		L.Push(L.Get(1))
		return 1
	}
}

func moreMethods(env *Env) map[string]lua.LGFunction {
	// The engine is looked up at each call: device.use replaces it.
	extreme := func(name string, all func(*core.Engine, *core.Tensor) (*core.Tensor, error), dim func(*core.Engine, *core.Tensor, int, bool) (*core.Tensor, error)) lua.LGFunction {
		return func(L *lua.LState) int {
			e := env.Engine
			x := checkTensor(L, name, 1)
			if L.Get(2) == lua.LNil {
				t, err := all(e, x)
				return env.pushResult(L, t, err)
			}
			d := optDim(L, name, 2, 0)
			vals, err := dim(e, x, d, L.OptBool(3, false))
			raise(L, err)
			L.Push(env.push(L, vals))
			src := x
			if name == "min" {
				src, err = e.Neg(x)
				raise(L, err)
			}
			idx, err := e.ArgmaxDim(src, d)
			raise(L, err)
			L.Push(env.push(L, plusOne(L, idx)))
			return 2
		}
	}
	return map[string]lua.LGFunction{
		"linear": func(L *lua.LState) int {
			e := env.Engine
			t, err := e.Linear(checkTensor(L, "linear", 1), checkTensor(L, "linear", 2))
			return env.pushResult(L, t, err)
		},
		"layer_norm": func(L *lua.LState) int {
			e := env.Engine
			x := checkTensor(L, "layer_norm", 1)
			var w, b *core.Tensor
			if L.Get(2) != lua.LNil {
				w = checkTensor(L, "layer_norm", 2)
			}
			if L.Get(3) != lua.LNil {
				b = checkTensor(L, "layer_norm", 3)
			}
			t, err := e.LayerNorm(x, w, b, float32(L.OptNumber(4, 1e-5)))
			return env.pushResult(L, t, err)
		},
		"dropout": func(L *lua.LState) int {
			e := env.Engine
			x := checkTensor(L, "dropout", 1)
			t, err := e.Dropout(x, float64(L.OptNumber(2, 0.5)), L.OptBool(3, true))
			return env.pushResult(L, t, err)
		},
		"max": extreme("max", (*core.Engine).Max, (*core.Engine).MaxDim),
		"min": extreme("min", (*core.Engine).Min, (*core.Engine).MinDim),
		"argmax": func(L *lua.LState) int {
			e := env.Engine
			x := checkTensor(L, "argmax", 1)
			if L.Get(2) == lua.LNil {
				flat, err := e.Reshape(x, int(x.Numel()))
				raise(L, err)
				idx, err := e.ArgmaxDim(flat, 0)
				return env.pushResult(L, plusOne(L, idx), err)
			}
			idx, err := e.ArgmaxDim(x, optDim(L, "argmax", 2, 0))
			raise(L, err)
			return env.pushResult(L, plusOne(L, idx), nil)
		},
		"narrow": func(L *lua.LState) int {
			e := env.Engine
			x := checkTensor(L, "narrow", 1)
			t, err := e.Narrow(x, optDim(L, "narrow", 2, 0), L.CheckInt(3)-1, L.CheckInt(4))
			return env.pushResult(L, t, err)
		},
		"index_select": func(L *lua.LState) int {
			e := env.Engine
			x := checkTensor(L, "index_select", 1)
			t, err := e.IndexSelect(x, optDim(L, "index_select", 2, 0), checkIndices(L, "index_select", 3))
			return env.pushResult(L, t, err)
		},
		"cat": func(L *lua.LState) int {
			e := env.Engine
			a := checkTensor(L, "cat", 1)
			b := checkTensor(L, "cat", 2)
			t, err := e.Cat([]*core.Tensor{a, b}, optDim(L, "cat", 3, 0))
			return env.pushResult(L, t, err)
		},
		"zero_": inPlace(env, "zero_", func(L *lua.LState, x *core.Tensor) *core.Tensor {
			z, err := core.Zeros(x.Shape()...)
			raise(L, err)
			return z
		}),
		"fill_": inPlace(env, "fill_", func(L *lua.LState, x *core.Tensor) *core.Tensor {
			z, err := core.Full(float32(L.CheckNumber(2)), x.Shape()...)
			raise(L, err)
			return z
		}),
		"copy_": inPlace(env, "copy_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return checkTensor(L, "copy_", 2) }),
		"add_":  inPlace(env, "add_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return binary(L, env, "add") }),
		"sub_":  inPlace(env, "sub_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return binary(L, env, "sub") }),
		"mul_":  inPlace(env, "mul_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return binary(L, env, "mul") }),
		"div_":  inPlace(env, "div_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return binary(L, env, "div") }),
	}
}
