package luabind

import (
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// raise turns a Go error into a Lua error at the script's line.
func raise(L *lua.LState, err error) {
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
}

func (env *Env) pushResult(L *lua.LState, t *core.Tensor, err error) int {
	raise(L, err)
	L.Push(env.push(L, t))
	return 1
}

// optDim reads an optional 1-based dim at n and returns it 0-based (def if absent).
func optDim(L *lua.LState, fn string, n int, def int) int {
	v := L.Get(n)
	if v == lua.LNil {
		return def
	}
	d, ok := v.(lua.LNumber)
	if !ok || float64(d) != math.Trunc(float64(d)) {
		argError(L, fn, "argument %d: expected a dim (an integer, 1-based), got %s", n, luaTypeName(v))
	}
	if d > 0 {
		return int(d) - 1
	}
	return int(d) // negative counts from the end
}

func unaryMethod(name string, f func(e *core.Engine, x *core.Tensor) (*core.Tensor, error)) func(env *Env) lua.LGFunction {
	return func(env *Env) lua.LGFunction {
		return func(L *lua.LState) int {
			x := checkTensor(L, name, 1)
			t, err := f(env.Engine, x)
			return env.pushResult(L, t, err)
		}
	}
}

var unaryMethods = map[string]func(env *Env) lua.LGFunction{
	"neg":     unaryMethod("neg", (*core.Engine).Neg),
	"exp":     unaryMethod("exp", (*core.Engine).Exp),
	"log":     unaryMethod("log", (*core.Engine).Log),
	"sqrt":    unaryMethod("sqrt", (*core.Engine).Sqrt),
	"abs":     unaryMethod("abs", (*core.Engine).Abs),
	"relu":    unaryMethod("relu", (*core.Engine).Relu),
	"sigmoid": unaryMethod("sigmoid", (*core.Engine).Sigmoid),
	"tanh":    unaryMethod("tanh", (*core.Engine).Tanh),
	"silu":    unaryMethod("silu", (*core.Engine).Silu),
	"gelu":    unaryMethod("gelu", (*core.Engine).Gelu),
}

// binary applies op to two operands, either of which may be a number.
func binary(L *lua.LState, env *Env, op string) *core.Tensor {
	e := env.Engine
	a, b := L.Get(1), L.Get(2)
	na, aNum := a.(lua.LNumber)
	nb, bNum := b.(lua.LNumber)
	var t *core.Tensor
	var err error
	switch {
	case aNum && bNum:
		argError(L, op, "expected at least one tensor, got two numbers")
	case bNum:
		x := checkTensor(L, op, 1)
		s := float32(nb)
		switch op {
		case "add":
			t, err = e.AddScalar(x, s)
		case "sub":
			t, err = e.AddScalar(x, -s)
		case "mul":
			t, err = e.Scale(x, s)
		case "div":
			t, err = e.Scale(x, 1/s)
		case "pow":
			t, err = e.Pow(x, float64(nb))
		}
	case aNum:
		x := checkTensor(L, op, 2)
		s := float32(na)
		switch op {
		case "add":
			t, err = e.AddScalar(x, s)
		case "sub":
			if t, err = e.Neg(x); err == nil {
				t, err = e.AddScalar(t, s)
			}
		case "mul":
			t, err = e.Scale(x, s)
		case "div":
			if t, err = e.Pow(x, -1); err == nil {
				t, err = e.Scale(t, s)
			}
		case "pow": // s^x = exp(x ln s)
			if t, err = e.Scale(x, float32(math.Log(float64(na)))); err == nil {
				t, err = e.Exp(t)
			}
		}
	default:
		x, y := checkTensor(L, op, 1), checkTensor(L, op, 2)
		switch op {
		case "add":
			t, err = e.Add(x, y)
		case "sub":
			t, err = e.Sub(x, y)
		case "mul":
			t, err = e.Mul(x, y)
		case "div":
			t, err = e.Div(x, y)
		case "pow":
			argError(L, op, "the exponent must be a number")
		}
	}
	raise(L, err)
	return t
}

func opsMethods(env *Env) map[string]lua.LGFunction {
	m := map[string]lua.LGFunction{}
	for name, mk := range unaryMethods {
		m[name] = mk(env)
	}
	for _, op := range []string{"add", "sub", "mul", "div", "pow"} {
		op := op
		m[op] = func(L *lua.LState) int { L.Push(env.push(L, binary(L, env, op))); return 1 }
	}
	m["matmul"] = func(L *lua.LState) int {
		t, err := env.Engine.Matmul(checkTensor(L, "matmul", 1), checkTensor(L, "matmul", 2))
		return env.pushResult(L, t, err)
	}
	m["transpose"] = func(L *lua.LState) int {
		x := checkTensor(L, "transpose", 1)
		t, err := env.Engine.Transpose(x, optDim(L, "transpose", 2, 0), optDim(L, "transpose", 3, 1))
		return env.pushResult(L, t, err)
	}
	m["t"] = func(L *lua.LState) int {
		x := checkTensor(L, "t", 1)
		if x.Dim() != 2 {
			argError(L, "t", "expected a 2-d tensor, got shape %s", core.ShapeString(x.Shape()))
		}
		t, err := env.Engine.Transpose(x, 0, 1)
		return env.pushResult(L, t, err)
	}
	reshape := func(L *lua.LState) int {
		x := checkTensor(L, "reshape", 1)
		t, err := env.Engine.Reshape(x, checkShapeArgs(L, "reshape", 2)...)
		return env.pushResult(L, t, err)
	}
	m["reshape"], m["view"] = reshape, reshape
	reduce := func(name string, all func(*core.Engine, *core.Tensor) (*core.Tensor, error), dim func(*core.Engine, *core.Tensor, int, bool) (*core.Tensor, error)) lua.LGFunction {
		return func(L *lua.LState) int {
			x := checkTensor(L, name, 1)
			if L.Get(2) == lua.LNil {
				t, err := all(env.Engine, x)
				return env.pushResult(L, t, err)
			}
			t, err := dim(env.Engine, x, optDim(L, name, 2, 0), L.OptBool(3, false))
			return env.pushResult(L, t, err)
		}
	}
	m["sum"] = reduce("sum", (*core.Engine).Sum, (*core.Engine).SumDim)
	m["mean"] = reduce("mean", (*core.Engine).Mean, (*core.Engine).MeanDim)
	m["clamp"] = func(L *lua.LState) int {
		x := checkTensor(L, "clamp", 1)
		lo := float32(L.OptNumber(2, lua.LNumber(math.Inf(-1))))
		hi := float32(L.OptNumber(3, lua.LNumber(math.Inf(1))))
		t, err := env.Engine.Clamp(x, lo, hi)
		return env.pushResult(L, t, err)
	}
	along := func(name string, f func(*core.Engine, *core.Tensor, int) (*core.Tensor, error)) lua.LGFunction {
		return func(L *lua.LState) int {
			x := checkTensor(L, name, 1)
			t, err := f(env.Engine, x, optDim(L, name, 2, -1))
			return env.pushResult(L, t, err)
		}
	}
	m["softmax"] = along("softmax", (*core.Engine).Softmax)
	m["log_softmax"] = along("log_softmax", (*core.Engine).LogSoftmax)
	m["backward"] = func(L *lua.LState) int { return backward(L, env) }
	for name, f := range moreMethods(env) {
		m[name] = f
	}
	m["requires_grad"] = func(L *lua.LState) int {
		x := checkTensor(L, "requires_grad", 1)
		if L.GetTop() >= 2 {
			raise(L, x.SetRequiresGrad(L.ToBool(2)))
			L.Push(L.Get(1))
			return 1
		}
		L.Push(lua.LBool(x.RequiresGrad()))
		return 1
	}
	m["detach"] = func(L *lua.LState) int {
		h, err := checkTensor(L, "detach", 1).ToHost()
		return env.pushResult(L, h, err)
	}
	m["clone"] = m["detach"]
	return m
}

// backward(loss) runs the reverse pass and returns a table param -> grad.
func backward(L *lua.LState, env *Env) int {
	loss := checkTensor(L, "backward", 1)
	grads, err := env.Engine.Backward(loss)
	raise(L, err)
	out := L.NewTable()
	for p, g := range grads {
		out.RawSet(env.push(L, p), env.push(L, g))
	}
	L.Push(out)
	return 1
}
