package luabind

import (
	"fmt"
	"slices"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Shape ops and indexing (core/ops_shape.go): select, unsqueeze, squeeze,
// flatten, unflatten, expand, flip, stack, chunk, split, tile; x[i] and
// Torch7's range tables x[{ {}, {2, 3} }], read and assigned. Dims and
// indices are 1-based, negative from the end.

// intsArg reads the integers from argument n on: a table of them, or the
// remaining arguments.
func intsArg(L *lua.LState, fn string, n int) []int {
	var out []int
	if tbl, ok := L.Get(n).(*lua.LTable); ok {
		for i := 1; i <= tbl.Len(); i++ {
			v, isNum := tbl.RawGetInt(i).(lua.LNumber)
			if !isNum || float64(v) != float64(int64(v)) {
				argError(L, fn, "element %d of argument %d: expected an integer, got %s", i, n, luaTypeName(tbl.RawGetInt(i)))
			}
			out = append(out, int(v))
		}
		return out
	}
	for i := n; i <= L.GetTop(); i++ {
		out = append(out, checkInteger(L, fn, i))
	}
	return out
}

// dimsArg reads 1-based dims from argument n on (a table or the remaining
// arguments) as 0-based ones.
func dimsArg(L *lua.LState, fn string, n int) []int {
	var out []int
	for _, d := range intsArg(L, fn, n) {
		switch {
		case d == 0:
			argError(L, fn, "dim 0 does not exist: dims are 1-based (1 is the first, -1 the last)")
		case d > 0:
			d--
		}
		out = append(out, d)
	}
	return out
}

// position reads a 1-based index (negative from the end) of a dim of size
// n as 0-based; 0 and out-of-range indices are errors.
func position(L *lua.LState, fn string, v lua.LValue, n int) int {
	x, ok := v.(lua.LNumber)
	if !ok || float64(x) != float64(int64(x)) {
		argError(L, fn, "expected an integer index, got %s", luaTypeName(v))
	}
	i := int64(x)
	if i < 0 {
		i += int64(n) + 1
	}
	if i < 1 || i > int64(n) {
		argError(L, fn, "index %d is out of range for a dim of size %d (indices are 1..%d, or -1..-%d from the end)", int64(x), n, n, n)
	}
	return int(i - 1)
}

// pushList pushes ts as a Lua list.
func (env *Env) pushList(L *lua.LState, ts []*core.Tensor, err error) int {
	raise(L, err)
	tbl := L.CreateTable(len(ts), 0)
	for _, t := range ts {
		tbl.Append(env.push(L, t))
	}
	L.Push(tbl)
	return 1
}

// select(x, dim, i): the slice at i along dim, that dim removed (a view).
func (env *Env) selectOp(L *lua.LState) int {
	x := checkTensor(L, "select", 1)
	dim := checkDim(L, "select", 2)
	d := dim
	if d < 0 {
		d += x.Dim()
	}
	if d < 0 || d >= x.Dim() {
		t, err := env.Engine.Select(x, dim, 0) // for its error
		return env.pushResult(L, t, err)
	}
	t, err := env.Engine.Select(x, d, position(L, "select", L.Get(3), x.Shape()[d]))
	return env.pushResult(L, t, err)
}

// unsqueeze(x, dim): a new dim of size 1 at dim (1..dim()+1, or -1 for last).
func (env *Env) unsqueeze(L *lua.LState) int {
	x := checkTensor(L, "unsqueeze", 1)
	t, err := env.Engine.Unsqueeze(x, checkDim(L, "unsqueeze", 2))
	return env.pushResult(L, t, err)
}

// squeeze(x [, dims...]): without the dims of size 1 (all, or those given).
func (env *Env) squeeze(L *lua.LState) int {
	x := checkTensor(L, "squeeze", 1)
	t, err := env.Engine.Squeeze(x, dimsArg(L, "squeeze", 2)...)
	return env.pushResult(L, t, err)
}

// flatten(x [, start=1 [, end=-1]]).
func (env *Env) flatten(L *lua.LState) int {
	x := checkTensor(L, "flatten", 1)
	t, err := env.Engine.Flatten(x, optDim(L, "flatten", 2, 0), optDim(L, "flatten", 3, -1))
	return env.pushResult(L, t, err)
}

// unflatten(x, dim, {sizes}).
func (env *Env) unflatten(L *lua.LState) int {
	x := checkTensor(L, "unflatten", 1)
	t, err := env.Engine.Unflatten(x, checkDim(L, "unflatten", 2), intsArg(L, "unflatten", 3))
	return env.pushResult(L, t, err)
}

// expand(x, sizes...) or expand(x, {sizes}); -1 keeps a size.
func (env *Env) expand(L *lua.LState) int {
	x := checkTensor(L, "expand", 1)
	t, err := env.Engine.Expand(x, intsArg(L, "expand", 2))
	return env.pushResult(L, t, err)
}

// flip(x, dims...) or flip(x, {dims}).
func (env *Env) flip(L *lua.LState) int {
	x := checkTensor(L, "flip", 1)
	t, err := env.Engine.Flip(x, dimsArg(L, "flip", 2)...)
	return env.pushResult(L, t, err)
}

// tile(x, reps...) or tile(x, {reps}).
func (env *Env) tile(L *lua.LState) int {
	x := checkTensor(L, "tile", 1)
	t, err := env.Engine.Tile(x, intsArg(L, "tile", 2))
	return env.pushResult(L, t, err)
}

// tensor.stack({tensors} [, dim=1]).
func (env *Env) stack(L *lua.LState) int {
	ts := tensorList(L, "stack", 1, "element")
	dim := 0
	if L.Get(2) != lua.LNil {
		dim = checkDim(L, "stack", 2)
	}
	t, err := env.Engine.Stack(ts, dim)
	return env.pushResult(L, t, err)
}

// chunk(x, n [, dim=1]): a list of at most n views.
func (env *Env) chunk(L *lua.LState) int {
	x := checkTensor(L, "chunk", 1)
	ts, err := env.Engine.Chunk(x, checkInteger(L, "chunk", 2), optDim(L, "chunk", 3, 0))
	return env.pushList(L, ts, err)
}

// split(x, size [, dim=1]) or split(x, {sizes} [, dim=1]): a list of views.
func (env *Env) split(L *lua.LState) int {
	x := checkTensor(L, "split", 1)
	dim := optDim(L, "split", 3, 0)
	if _, ok := L.Get(2).(*lua.LTable); ok {
		ts, err := env.Engine.SplitSizes(x, intsArg(L, "split", 2), dim)
		return env.pushList(L, ts, err)
	}
	ts, err := env.Engine.Split(x, checkInteger(L, "split", 2), dim)
	return env.pushList(L, ts, err)
}

// indexed is x[key] for a number (select along dim 1) or a range table.
func (env *Env) indexed(L *lua.LState, x *core.Tensor, key lua.LValue) *core.Tensor {
	if _, ok := key.(lua.LNumber); ok {
		t, err := env.Engine.Select(x, 0, position(L, "index", key, x.Shape()[0]))
		raise(L, err)
		return t
	}
	specs := key.(*lua.LTable)
	if specs.Len() > x.Dim() {
		argError(L, "index", "%d dims indexed in a %d-d tensor of shape %s", specs.Len(), x.Dim(), core.ShapeString(x.Shape()))
	}
	cur, d := x, 0
	for k := 1; k <= specs.Len(); k++ {
		var err error
		switch spec := specs.RawGetInt(k).(type) {
		case lua.LNumber: // one index: the dim goes
			cur, err = env.Engine.Select(cur, d, position(L, "index", spec, cur.Shape()[d]))
		case *lua.LTable: // {} all, {a} one kept, {a, b} a..b
			n := cur.Shape()[d]
			if spec.Len() == 0 {
				d++
				continue
			}
			from := position(L, "index", spec.RawGetInt(1), n)
			to := from
			if spec.Len() >= 2 {
				to = position(L, "index", spec.RawGetInt(2), n)
			}
			if to < from {
				argError(L, "index", "range {%d, %d} of dim %d is empty", from+1, to+1, k)
			}
			cur, err = env.Engine.Narrow(cur, d, from, to-from+1)
			d++
		default:
			argError(L, "index", "element %d of the index table is a %s; expected a number or a {from, to} table", k, luaTypeName(spec))
		}
		raise(L, err)
	}
	return cur
}

// setIndexed is x[key] = v: v (a number, or a tensor that broadcasts)
// written into the view x[key], as PyTorch's x[i] = v.
func (env *Env) setIndexed(L *lua.LState) int {
	x := checkTensor(L, "index", 1)
	key := L.Get(2)
	switch key.(type) {
	case lua.LNumber, *lua.LTable:
	default:
		if mask := toTensor(key); mask != nil { // x[mask] = v, PyTorch's boolean-mask assignment
			env.setMasked(L, x, mask)
			return 0
		}
		argError(L, "index", "cannot assign field %s of a tensor: only x[i] = v, x[{...}] = v and x[mask] = v", luaTypeName(key))
	}
	dst := env.indexed(L, x, key)
	var src *core.Tensor
	var err error
	switch v := L.Get(3).(type) {
	case lua.LNumber:
		src, err = core.Full(float32(v), dst.Shape()...)
	default:
		if src = toTensor(v); src == nil {
			argError(L, "index", "cannot assign a %s to a tensor's elements; expected a number or a tensor", luaTypeName(v))
		}
		if !slices.Equal(src.Shape(), dst.Shape()) {
			src, err = env.Engine.Expand(src, dst.Shape())
		}
	}
	if err == nil {
		err = env.Engine.Assign(dst, src)
	}
	if err != nil {
		raise(L, fmt.Errorf("index: %w", err))
	}
	return 0
}

// setMasked is x[mask] = v, PyTorch's assignment through a boolean mask
// (of x's shape, or broadcast to it): v a number or a one-element tensor
// (masked_fill_), or a 1-d tensor of one value for each selected element,
// in order.
func (env *Env) setMasked(L *lua.LState, x, mask *core.Tensor) {
	if mask.Dtype() == ggmlcgo.I32 {
		argError(L, "index", "x[t] = v with an i32 tensor t of indices is not supported (a mask is a comparison's 1/0 result; for indices use index_add_ or a loop)")
	}
	var t *core.Tensor
	var err error
	switch val := L.Get(3).(type) {
	case lua.LNumber:
		t, err = env.Engine.MaskedFill(x, mask, float64(val))
	default:
		v := toTensor(val)
		if v == nil {
			argError(L, "index", "x[mask] = v takes a number or a tensor of values; got %s", luaTypeName(val))
		}
		t, err = env.Engine.MaskedPut(x, mask, v)
	}
	if err == nil {
		err = env.Engine.Assign(x, t)
	}
	if err != nil {
		raise(L, fmt.Errorf("index: %w", err))
	}
}
