package luabind

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Bindings of the core ops (core/ops_*.go), grouped as core groups them.
// They read Lua arguments, call env.Engine (looked up at each call:
// device.use replaces it) and push the result; the math is all in core.

// ---- elementwise ----

// unary binds a one-tensor op: x:exp(), -x.
func (env *Env) unary(name string, f func(*core.Engine, *core.Tensor) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		t, err := f(env.Engine, checkTensor(L, name, 1))
		return env.pushResult(L, t, err)
	}
}

// arith binds an arithmetic op; a number may stand on either side.
func (env *Env) arith(op core.ArithOp) lua.LGFunction {
	return func(L *lua.LState) int {
		L.Push(env.push(L, env.arithValue(op)(L, nil)))
		return 1
	}
}

// arithValue computes arguments 1 op 2.
func (env *Env) arithValue(op core.ArithOp) func(L *lua.LState, _ *core.Tensor) *core.Tensor {
	return func(L *lua.LState, _ *core.Tensor) *core.Tensor {
		name := op.String()
		t, err := env.Engine.Arith(op, checkOperand(L, name, 1), checkOperand(L, name, 2))
		raise(L, err)
		return t
	}
}

// clamp(x [, min [, max]]): a missing bound is no bound.
func (env *Env) clamp(L *lua.LState) int {
	L.Push(env.push(L, env.clampValue(L, checkTensor(L, "clamp", 1))))
	return 1
}

// clampValue is clamp's result (clamp_ writes it into x).
func (env *Env) clampValue(L *lua.LState, x *core.Tensor) *core.Tensor {
	lo := float32(L.OptNumber(2, lua.LNumber(math.Inf(-1))))
	hi := float32(L.OptNumber(3, lua.LNumber(math.Inf(1))))
	t, err := env.Engine.Clamp(x, lo, hi)
	raise(L, err)
	return t
}

// ---- in place ----

// inPlace builds x:name_(...): the value of f(x, ...) written into x itself.
func (env *Env) inPlace(name string, f func(L *lua.LState, x *core.Tensor) *core.Tensor) lua.LGFunction {
	return func(L *lua.LState) int {
		x := checkTensor(L, name, 1)
		if err := env.Engine.Assign(x, f(L, x)); err != nil {
			if name != "copy_" { // Assign's messages already name copy_
				err = fmt.Errorf("%s: %w", name, err)
			}
			raise(L, err) // keeps the cause: a shape mismatch stays an ErrShape
		}
		L.Push(L.Get(1))
		return 1
	}
}

func fillValue(L *lua.LState, x *core.Tensor) *core.Tensor {
	v, err := core.Full(float32(L.CheckNumber(2)), x.Shape()...)
	raise(L, err)
	return v
}

func zeroValue(L *lua.LState, x *core.Tensor) *core.Tensor {
	v, err := core.Zeros(x.Shape()...)
	raise(L, err)
	return v
}

// ---- reductions ----

// reduction binds x:name() (all elements) and x:name(dim [, keepdim]).
func (env *Env) reduction(name string, all func(*core.Engine, *core.Tensor) (*core.Tensor, error),
	along func(*core.Engine, *core.Tensor, int, bool) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x := checkTensor(L, name, 1)
		if L.Get(2) == lua.LNil {
			t, err := all(env.Engine, x)
			return env.pushResult(L, t, err)
		}
		if _, ok := L.Get(2).(*lua.LTable); ok {
			t, err := env.alongDims(L, name, x, all, along)
			return env.pushResult(L, t, err)
		}
		t, err := along(env.Engine, x, checkDim(L, name, 2), L.OptBool(3, false))
		return env.pushResult(L, t, err)
	}
}

// alongDims is a reduction over a table of dims (argument 2), as
// PyTorch's sum(dim=(1, 2)): one dim after another, kept until the end
// (the mean of equal groups' means is the mean). An empty table reduces
// every dim, as PyTorch 1.13 does; a dim listed twice is an error.
func (env *Env) alongDims(L *lua.LState, name string, x *core.Tensor, all func(*core.Engine, *core.Tensor) (*core.Tensor, error),
	along func(*core.Engine, *core.Tensor, int, bool) (*core.Tensor, error)) (*core.Tensor, error) {
	dims := dimsArg(L, name, 2)
	keep := L.OptBool(3, false)
	if len(dims) == 0 {
		return all(env.Engine, x)
	}
	seen := map[int]bool{}
	for i, d := range dims {
		if d < 0 {
			d += x.Dim()
		}
		if d < 0 || d >= x.Dim() {
			argError(L, name, "dim %d is out of range for a %d-d tensor", dims[i]+1, x.Dim())
		}
		if seen[d] {
			argError(L, name, "dim %d appears more than once in the list of dims", d+1)
		}
		seen[d], dims[i] = true, d
	}
	t := x
	var err error
	for _, d := range dims {
		if t, err = along(env.Engine, t, d, true); err != nil {
			return nil, err
		}
	}
	if keep {
		return t, nil
	}
	var shape []int
	for i, n := range x.Shape() {
		if !seen[i] {
			shape = append(shape, n)
		}
	}
	if len(shape) == 0 {
		shape = []int{1}
	}
	return env.Engine.Reshape(t, shape...)
}

// extreme binds x:max() and x:max(dim [, keepdim]), which also returns the
// 1-based indices (the first of ties, the first NaN), as PyTorch's.
func (env *Env) extreme(name string, all func(*core.Engine, *core.Tensor) (*core.Tensor, error),
	along func(*core.Engine, *core.Tensor, int, bool) (*core.Tensor, *core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		e := env.Engine
		x := checkTensor(L, name, 1)
		if L.Get(2) == lua.LNil {
			t, err := all(e, x)
			return env.pushResult(L, t, err)
		}
		vals, idx, err := along(e, x, checkDim(L, name, 2), L.OptBool(3, false))
		raise(L, err)
		L.Push(env.push(L, vals))
		return 1 + env.pushResult(L, plusOne(L, e, idx), nil)
	}
}

// argmax(x [, dim]): 1-based indices of the largest elements.
func (env *Env) argmax(L *lua.LState) int {
	e := env.Engine
	x := checkTensor(L, "argmax", 1)
	d := 0
	if L.Get(2) == lua.LNil {
		if x.Numel() == 0 {
			argError(L, "argmax", "the tensor of shape %s has no elements, so no maximum (PyTorch's error too); give a dim", core.ShapeString(x.Shape()))
		}
		flat, err := e.Reshape(x, int(x.Numel()))
		raise(L, err)
		x = flat
	} else {
		d = checkDim(L, "argmax", 2)
	}
	idx, err := e.ArgmaxDim(x, d)
	raise(L, err)
	return env.pushResult(L, plusOne(L, e, idx), nil)
}

// plusOne turns 0-based indices into Lua's 1-based ones.
func plusOne(L *lua.LState, e *core.Engine, idx *core.Tensor) *core.Tensor {
	t, err := e.AddScalar(idx, 1)
	raise(L, err)
	return t
}

// ---- movement ----

// reshape(x, sizes...): one size may be -1; a view of a contiguous x, else
// a copy.
func (env *Env) reshape(L *lua.LState) int {
	x := checkTensor(L, "reshape", 1)
	t, err := env.Engine.Reshape(x, checkShapeArgs(L, "reshape", 2)...)
	return env.pushResult(L, t, err)
}

// view(x, sizes...): always a view (x must be contiguous).
func (env *Env) view(L *lua.LState) int {
	x := checkTensor(L, "view", 1)
	t, err := env.Engine.View(x, checkShapeArgs(L, "view", 2)...)
	return env.pushResult(L, t, err)
}

// permute(x, d1, ..., dn) (or one table of dims): dim i of the result is
// dim d_i of x.
func (env *Env) permute(L *lua.LState) int {
	x := checkTensor(L, "permute", 1)
	var dims []int
	if tbl, ok := L.Get(2).(*lua.LTable); ok && L.GetTop() == 2 {
		for i := 1; i <= tbl.Len(); i++ {
			L.Push(tbl.RawGetInt(i))
		}
		L.Remove(2)
	}
	for n := 2; n <= L.GetTop(); n++ {
		dims = append(dims, checkDim(L, "permute", n))
	}
	t, err := env.Engine.Permute(x, dims...)
	return env.pushResult(L, t, err)
}

// transpose(x [, d1 [, d2]]) swaps two dims (default 1 and 2).
func (env *Env) transpose(L *lua.LState) int {
	x := checkTensor(L, "transpose", 1)
	t, err := env.Engine.Transpose(x, optDim(L, "transpose", 2, 0), optDim(L, "transpose", 3, 1))
	return env.pushResult(L, t, err)
}

// t(x) is the transpose of a matrix.
func (env *Env) t(L *lua.LState) int {
	x := checkTensor(L, "t", 1)
	if x.Dim() != 2 {
		argError(L, "t", "expected a 2-d tensor, got shape %s", core.ShapeString(x.Shape()))
	}
	t, err := env.Engine.Transpose(x, 0, 1)
	return env.pushResult(L, t, err)
}

// narrow(x, dim, start, length), start 1-based.
func (env *Env) narrow(L *lua.LState) int {
	x := checkTensor(L, "narrow", 1)
	dim, start, length := checkDim(L, "narrow", 2), checkInteger(L, "narrow", 3), checkInteger(L, "narrow", 4)
	t, err := env.Engine.Narrow(x, dim, start-1, length)
	return env.pushResult(L, t, err)
}

// cat(a, b [, dim]) joins two tensors; tensor.cat({...} [, dim]) a list.
func (env *Env) cat(L *lua.LState) int {
	if _, ok := L.Get(1).(*lua.LTable); ok {
		return env.catList(L)
	}
	ts := []*core.Tensor{checkTensor(L, "cat", 1), checkTensor(L, "cat", 2)}
	t, err := env.Engine.Cat(ts, optDim(L, "cat", 3, 0))
	return env.pushResult(L, t, err)
}

func (env *Env) catList(L *lua.LState) int {
	ts := tensorList(L, "cat", 1, "element")
	t, err := env.Engine.Cat(ts, optDim(L, "cat", 2, 0))
	return env.pushResult(L, t, err)
}

// tensor.einsum(equation, a, b, ...) or tensor.einsum(equation, {a, b,
// ...}), as torch.einsum.
func (env *Env) einsum(L *lua.LState) int {
	const fn = "einsum"
	eq, ok := L.Get(1).(lua.LString)
	if !ok {
		argError(L, fn, "argument 1 must be the equation (a string such as \"ij,jk->ik\"), got %s", luaTypeName(L.Get(1)))
	}
	var ts []*core.Tensor
	if _, isList := L.Get(2).(*lua.LTable); isList && L.GetTop() == 2 {
		ts = tensorList(L, fn, 2, "operand")
	} else {
		for i := 2; i <= L.GetTop(); i++ {
			ts = append(ts, checkTensor(L, fn, i))
		}
	}
	if len(ts) == 0 {
		argError(L, fn, "needs at least one tensor")
	}
	t, err := env.Engine.Einsum(string(eq), ts...)
	return env.pushResult(L, t, err)
}

// index_select(x, dim, indices), indices 1-based.
func (env *Env) indexSelect(L *lua.LState) int {
	x := checkTensor(L, "index_select", 1)
	t, err := env.Engine.IndexSelect(x, optDim(L, "index_select", 2, 0), checkIndices(L, "index_select", 3))
	return env.pushResult(L, t, err)
}

// ---- matmul ----

// binaryTensors binds an op of two tensors: matmul(a, b), linear(x, w).
func (env *Env) binaryTensors(name string, f func(*core.Engine, *core.Tensor, *core.Tensor) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		if n := L.GetTop(); n > 2 {
			argError(L, name, "takes two tensors, got %d arguments (an option or argument it does not take is refused, never ignored)", n)
		}
		t, err := f(env.Engine, checkTensor(L, name, 1), checkTensor(L, name, 2))
		return env.pushResult(L, t, err)
	}
}

// linear(x, w [, b]) is F.linear: x wᵀ, plus b when given.
func (env *Env) linear(L *lua.LState) int {
	if L.GetTop() > 3 {
		argError(L, "linear", "takes x, weight and an optional bias, got %d arguments", L.GetTop())
	}
	if L.Get(3) == lua.LNil {
		return env.binaryTensors("linear", (*core.Engine).Linear)(L)
	}
	return env.linearWith((*core.Engine).LinearBias)(L)
}

// ---- nn ----

// linearThen binds then(x:linear(w), b) for nn.lua's Linear layers
// (core's LinearThen: the product gets no memory of its own).
func (env *Env) linearThen(then func(*core.Engine, *core.Tensor, *core.Tensor) (*core.Tensor, error)) lua.LGFunction {
	return env.linearWith(func(e *core.Engine, x, w, b *core.Tensor) (*core.Tensor, error) { return e.LinearThen(x, w, b, then) })
}

// linearWith binds f(x, w, b), a Linear layer with its bias.
func (env *Env) linearWith(f func(e *core.Engine, x, w, b *core.Tensor) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x, w, b := checkTensor(L, "linear", 1), checkTensor(L, "linear", 2), checkTensor(L, "linear", 3)
		t, err := f(env.Engine, x, w, b)
		return env.pushResult(L, t, err)
	}
}

// alongDim binds x:name([dim]) for ops along a dim (default the last).
func (env *Env) alongDim(name string, f func(*core.Engine, *core.Tensor, int) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x := checkTensor(L, name, 1)
		t, err := f(env.Engine, x, optDim(L, name, 2, -1))
		return env.pushResult(L, t, err)
	}
}

// layer_norm(x [, weight [, bias [, eps]]]) over the last dim.
func (env *Env) layerNorm(L *lua.LState) int {
	x := checkTensor(L, "layer_norm", 1)
	var w, b *core.Tensor
	if L.Get(2) != lua.LNil {
		w = checkTensor(L, "layer_norm", 2)
	}
	if L.Get(3) != lua.LNil {
		b = checkTensor(L, "layer_norm", 3)
	}
	t, err := env.Engine.LayerNorm(x, w, b, float32(L.OptNumber(4, 1e-5)))
	return env.pushResult(L, t, err)
}

// dropout(x [, p [, training]]).
func (env *Env) dropout(L *lua.LState) int {
	x := checkTensor(L, "dropout", 1)
	t, err := env.Engine.Dropout(x, float64(L.OptNumber(2, 0.5)), L.OptBool(3, true))
	return env.pushResult(L, t, err)
}

// ---- autograd ----

// backward(loss) runs the reverse pass and returns a table param -> grad.
func (env *Env) backward(L *lua.LState) int {
	grads, err := env.Engine.Backward(checkTensor(L, "backward", 1))
	raise(L, err)
	out := L.NewTable()
	for p, g := range grads {
		out.RawSet(env.push(L, p), env.push(L, g))
	}
	L.Push(out)
	return 1
}

// detach(x) shares x's storage without its history: a view that no
// gradient flows through, as PyTorch's detach.
func tensorDetach(L *lua.LState) int {
	env := envOf(L)
	d := checkTensor(L, "detach", 1).Detach()
	d.Carry() // it may be carried into the next step (an RNN's state)
	L.Push(env.push(L, d))
	return 1
}

// gelu(x [, approximate]): exact (erf) by default, as PyTorch; "tanh" (or
// {approximate="tanh"}) the tanh approximation.
func (env *Env) gelu(L *lua.LState) int {
	x := checkTensor(L, "gelu", 1)
	approximate := "none"
	switch v := L.Get(2).(type) {
	case *lua.LNilType:
	case lua.LString:
		approximate = string(v)
	case *lua.LTable:
		o := readOpts(L, "gelu", 2)
		approximate = o.str("approximate", "none")
		o.done()
	default:
		argError(L, "gelu", "argument 2: expected \"none\", \"tanh\" or an options table, got %s", luaTypeName(v))
	}
	t, err := env.Engine.Gelu(x, approximate)
	return env.pushResult(L, t, err)
}
