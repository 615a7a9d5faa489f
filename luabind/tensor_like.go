package luabind

import (
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// PyTorch's tensor methods that take their shape or type from a tensor:
// x:expand_as(y), x:view_as(y), x:new_zeros(size), x:new_ones(size),
// x:new_full(size, value), and #x (the size of dim 1, as len(x)); and
// x:roll(shifts, dims) and x:repeat_interleave(repeats, dim).

// expand_as(x, other) is x:expand(other:size()).
func (env *Env) expandAs(L *lua.LState) int {
	x, other := checkTensor(L, "expand_as", 1), checkTensor(L, "expand_as", 2)
	t, err := env.Engine.Expand(x, other.Shape())
	return env.pushResult(L, t, err)
}

// view_as(x, other) is x:view(other:size()).
func (env *Env) viewAs(L *lua.LState) int {
	x, other := checkTensor(L, "view_as", 1), checkTensor(L, "view_as", 2)
	t, err := env.Engine.View(x, other.Shape()...)
	return env.pushResult(L, t, err)
}

// newFilled makes x:new_zeros(size...), x:new_ones(size...) and
// x:new_full(size, value): a tensor of x's dtype (or the dtype option)
// filled with value, as PyTorch's new_* (which take x's dtype too).
func (env *Env) newFilled(name string, value float64, valueArg bool) lua.LGFunction {
	fn := "x:" + name
	return func(L *lua.LState) int {
		x := checkTensor(L, fn, 1)
		o, last := trailingOpts(L, fn)
		if !o.dtypeGiven {
			o.dtype = x.Dtype()
		}
		v := value
		if valueArg {
			if last < 3 {
				argError(L, fn, "expected a size and a fill value")
			}
			v = float64(L.CheckNumber(last))
			last--
		}
		shape := shapeUpTo(L, fn, 2, last)
		return env.finishExact(L, fn, shape, o, func(int) float64 { return v })
	}
}

// length is #x: the size of x's first dim, as len(x) in PyTorch (a 0-d
// tensor has no length).
func length(L *lua.LState) int {
	x := checkTensor(L, "#", 1)
	if x.Dim() == 0 || x.Scalar() {
		argError(L, "#", "a 0-d tensor has no length")
	}
	L.Push(lua.LNumber(x.Shape()[0]))
	return 1
}

// roll(x, shifts [, dims]): x's elements shifted along dims (1-based) by
// shifts (numbers or tables of them), wrapping around, as torch.roll; with
// no dims, along x flattened.
func (env *Env) roll(L *lua.LState) int {
	x := checkTensor(L, "roll", 1)
	if L.GetTop() > 3 {
		argError(L, "roll", "takes shifts and dims, each a number or a table")
	}
	var shifts []int
	if _, ok := L.Get(2).(*lua.LTable); ok {
		shifts = intsArg(L, "roll", 2)
	} else {
		shifts = []int{checkInteger(L, "roll", 2)}
	}
	var dims []int
	if L.Get(3) != lua.LNil {
		dims = dimsArg(L, "roll", 3)
	}
	t, err := env.Engine.Roll(x, shifts, dims)
	return env.pushResult(L, t, err)
}

// repeat_interleave(x, repeats [, dim]): each element repeated in place
// along dim (1-based; without dim, along x flattened), as PyTorch's:
// repeats is a number, or a 1-d tensor of per-element counts (one for each
// slice along dim, or one for all). The gradient sums the copies.
func (env *Env) repeatInterleave(L *lua.LState) int {
	const fn = "repeat_interleave"
	x := checkTensor(L, fn, 1)
	counts := toTensor(L.Get(2))
	if _, ok := L.Get(2).(lua.LNumber); !ok && counts == nil {
		argError(L, fn, "repeats must be a number or a 1-d tensor of counts, got %s", luaTypeName(L.Get(2)))
	}
	e := env.Engine
	var d int
	if L.Get(3) == lua.LNil {
		flat, err := e.Reshape(x, int(x.Numel()))
		raise(L, err)
		x, d = flat, 0
	} else if d = checkDim(L, fn, 3); d < 0 {
		d += x.Dim()
	}
	if d < 0 || d >= x.Dim() {
		argError(L, fn, "dim %d is out of range for a %d-d tensor", L.CheckInt(3), x.Dim())
	}
	if counts != nil {
		idx := repeatIndex(L, fn, counts, x.Shape()[d])
		y, err := e.IndexSelect(x, d, idx)
		return env.pushResult(L, y, err)
	}
	n := checkInteger(L, fn, 2)
	if n < 0 || n > 1<<24 {
		argError(L, fn, "repeats must be from 0 to %d, got %d", 1<<24, n)
	}
	if n == 0 { // no slices: an empty result, as PyTorch's
		y, err := e.IndexSelect(x, d, nil)
		return env.pushResult(L, y, err)
	}
	// As [A, m, 1, B] (the dims before d, d, the new one, the dims after:
	// four at most, as ggml holds), expanded to [A, m, n, B] and merged.
	shape := x.Shape()
	a, b := 1, 1
	for _, s := range shape[:d] {
		a *= s
	}
	for _, s := range shape[d+1:] {
		b *= s
	}
	out := append([]int(nil), shape...)
	out[d] *= n
	y, err := e.Reshape(x, a, shape[d], 1, b)
	if err == nil {
		y, err = e.Expand(y, []int{a, shape[d], n, b})
	}
	if err == nil {
		y, err = e.Reshape(y, out...)
	}
	return env.pushResult(L, y, err)
}

// repeatIndex reads per-slice counts (a 1-d tensor of whole numbers >= 0,
// size slices or 1) into the 0-based index of each slice of the result.
func repeatIndex(L *lua.LState, fn string, counts *core.Tensor, size int) []int {
	if counts.Dim() != 1 || (counts.Numel() != int64(size) && counts.Numel() != 1) {
		argError(L, fn, "repeats of shape %s: expected a 1-d tensor of %d counts (one for each slice along dim) or of one",
			core.ShapeString(counts.Shape()), size)
	}
	v, err := counts.Float64s()
	raise(L, err)
	var idx []int
	for i := 0; i < size; i++ {
		c := v[0]
		if len(v) > 1 {
			c = v[i]
		}
		if c != math.Trunc(c) || c < 0 || c > 1<<24 {
			argError(L, fn, "repeats[%d] is %g: counts are whole numbers from 0 to %d", i+1, c, 1<<24)
		}
		if len(idx)+int(c) > 1<<28 {
			argError(L, fn, "repeats total more than %d slices", 1<<28)
		}
		for range int(c) {
			idx = append(idx, i)
		}
	}
	return idx
}
