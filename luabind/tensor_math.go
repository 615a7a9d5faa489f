package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Bindings of the math and mask ops (core/ops_elementwise.go's math,
// core/ops_compare.go). Masks are float32 tensors of 0s and 1s; an op that
// reads one takes any nonzero value as true.

// compare binds x:gt(y) and friends: a tensor or a number on either side.
func (env *Env) compare(op core.CompareOp) lua.LGFunction {
	return func(L *lua.LState) int {
		name := op.String()
		t, err := env.Engine.Compare(op, checkOperand(L, name, 1), checkOperand(L, name, 2))
		return env.pushResult(L, t, err)
	}
}

// logical binds x:logical_and(y) and friends.
func (env *Env) logical(op core.LogicalOp) lua.LGFunction {
	return func(L *lua.LState) int {
		name := op.String()
		t, err := env.Engine.Logical(op, checkOperand(L, name, 1), checkOperand(L, name, 2))
		return env.pushResult(L, t, err)
	}
}

// where binds tensor.where(cond, a, b): a and b tensors or numbers.
func (env *Env) where(L *lua.LState) int {
	cond := checkTensor(L, "where", 1)
	t, err := env.Engine.Where(cond, checkOperand(L, "where", 2), checkOperand(L, "where", 3))
	return env.pushResult(L, t, err)
}

// maskedFill binds x:masked_fill(mask, value).
func (env *Env) maskedFill(L *lua.LState) int {
	L.Push(env.push(L, env.maskedFillValue(L, checkTensor(L, "masked_fill", 1))))
	return 1
}

// maskedFillValue is masked_fill's result (masked_fill_ writes it into x).
func (env *Env) maskedFillValue(L *lua.LState, x *core.Tensor) *core.Tensor {
	mask := checkTensor(L, "masked_fill", 2)
	v, ok := L.Get(3).(lua.LNumber)
	if !ok {
		argError(L, "masked_fill", "argument 3: expected a number, got %s", luaTypeName(L.Get(3)))
	}
	t, err := env.Engine.MaskedFill(x, mask, float64(v))
	raise(L, err)
	return t
}

// triangle binds x:tril([k]) and x:triu([k]) (k = 0: the main diagonal).
func (env *Env) triangle(name string, f func(*core.Engine, *core.Tensor, int) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x := checkTensor(L, name, 1)
		k := 0
		if L.Get(2) != lua.LNil {
			k = checkInteger(L, name, 2)
		}
		t, err := f(env.Engine, x, k)
		return env.pushResult(L, t, err)
	}
}
