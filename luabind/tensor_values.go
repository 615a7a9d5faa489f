package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Tensor values in and out of Lua: the accessors (shape, size, item,
// totable, ...), tensor{...} from nested tables, and printing.

func tensorShape(L *lua.LState) int {
	L.Push(shapeList(L, checkTensor(L, "shape", 1).Shape())) // prints as [2, 3] (help.go)
	return 1
}

// size(x [, dim]): the shape, or one size (dim 1-based).
func tensorSize(L *lua.LState) int {
	t := checkTensor(L, "size", 1)
	if L.GetTop() < 2 {
		L.Push(shapeList(L, t.Shape())) // prints as a shape, as shape() does
		return 1
	}
	d := checkDim(L, "size", 2) // 1-based, or negative from the end, as PyTorch's size(-1)
	if d < 0 {
		d += t.Dim()
	}
	if d < 0 || d >= t.Dim() {
		argError(L, "size", "dim %d out of range for a %d-d tensor of shape %s (dims are 1..%d, or -1..-%d from the end)", int(L.CheckNumber(2)), t.Dim(), core.ShapeString(t.Shape()), t.Dim(), t.Dim())
	}
	L.Push(lua.LNumber(t.Shape()[d]))
	return 1
}

func tensorDim(L *lua.LState) int { L.Push(lua.LNumber(checkTensor(L, "dim", 1).Dim())); return 1 }
func tensorNumel(L *lua.LState) int {
	L.Push(lua.LNumber(checkTensor(L, "numel", 1).Numel()))
	return 1
}
func tensorDtype(L *lua.LState) int {
	L.Push(lua.LString(checkTensor(L, "dtype", 1).Dtype().String()))
	return 1
}
func tensorDevice(L *lua.LState) int {
	L.Push(lua.LString(checkTensor(L, "device", 1).Device()))
	return 1
}
func tensorScope(L *lua.LState) int {
	L.Push(lua.LString(checkTensor(L, "scope", 1).Scope()))
	return 1
}

func tensorItem(L *lua.LState) int {
	t := checkTensor(L, "item", 1)
	if t.Numel() != 1 {
		_, err := t.Item() // its error names the shape
		raise(L, err)
	}
	v, err := t.Float64s() // exact for i32
	raise(L, err)
	L.Push(lua.LNumber(v[0]))
	return 1
}

func tensorTotable(L *lua.LState) int {
	t := checkTensor(L, "totable", 1)
	if t.Dtype() == ggmlcgo.I32 {
		v, err := t.Float64s() // exact past 2^24
		if err != nil {
			raise(L, fmt.Errorf("totable: %w", err))
		}
		L.Push(nestedTable(L, v, t.Shape()))
		return 1
	}
	v, err := t.Float32s() // no float64 copy of a big tensor
	if err != nil {
		raise(L, fmt.Errorf("totable: %w", err))
	}
	L.Push(nestedTable(L, v, t.Shape()))
	return 1
}

// totableCheckEvery is how many values totable converts between two looks
// at the script's context: a table of 10^8 numbers takes seconds.
const totableCheckEvery = 1 << 16

// requires_grad(x) reads the flag; requires_grad(x, on) sets it on a leaf.
func tensorRequiresGrad(L *lua.LState) int {
	x := checkTensor(L, "requires_grad", 1)
	if L.GetTop() >= 2 {
		raise(L, x.SetRequiresGrad(L.ToBool(2)))
		L.Push(L.Get(1))
		return 1
	}
	L.Push(lua.LBool(x.RequiresGrad()))
	return 1
}

func tensorZeroGrad(L *lua.LState) int {
	zeroGrads(L, "tensor.zero_grad", paramsArg(L, "tensor.zero_grad"), 2)
	return 0
}

func tensorToString(L *lua.LState) int {
	L.Push(lua.LString(formatTensor(checkTensor(L, "tostring", 1))))
	return 1
}

// fromTable is tensor{...} (argument 1 is the tensor library itself).
func (env *Env) fromTable(L *lua.LState) int {
	o, _ := trailingOpts(L, "tensor")
	vals, shape := valuesFromLua(L, "tensor", L.Get(2))
	return env.finishExact(L, "tensor", shape, o, func(i int) float64 { return vals[i] })
}

func intList(L *lua.LState, v []int) *lua.LTable {
	t := L.CreateTable(len(v), 0)
	for _, x := range v {
		t.Append(lua.LNumber(x))
	}
	return t
}

// tensorFromLua builds a host f32 tensor from a number or a (nested) table
// of numbers.
func tensorFromLua(L *lua.LState, fn string, v lua.LValue) *core.Tensor {
	vals, shape := valuesFromLua(L, fn, v)
	data := make([]float32, len(vals))
	for i, x := range vals {
		data[i] = float32(x)
	}
	t, err := core.FromFloat32(data, shape...)
	if err != nil {
		raise(L, fmt.Errorf("%s: %w", fn, err))
	}
	return t
}

// valuesFromLua reads a number or a (nested) table of numbers, exactly, and
// its shape. Ragged nesting and non-numbers are errors.
func valuesFromLua(L *lua.LState, fn string, v lua.LValue) ([]float64, []int) {
	if n, ok := v.(lua.LNumber); ok {
		return []float64{float64(n)}, []int{1}
	}
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(L, fn, "expected a number or a nested table of numbers, got %s", luaTypeName(v))
	}
	var shape []int
	for cur := lua.LValue(tbl); ; {
		ct, ok := cur.(*lua.LTable)
		if !ok {
			break
		}
		shape = append(shape, ct.Len())
		if len(shape) > 4 {
			argError(L, fn, "more than 4 levels of nesting; tensors have at most 4 dims")
		}
		if ct.Len() == 0 { // {} is an empty tensor, {{}, {}} one of 2x0, as torch.tensor's
			break
		}
		cur = ct.RawGetInt(1)
	}
	total := int64(1)
	for _, n := range shape {
		if total *= int64(n); total > core.MaxHostElements {
			argError(L, fn, "a table of shape %s is more than a tensor may hold (%d elements)", core.ShapeString(shape), core.MaxHostElements)
		}
	}
	data := make([]float64, 0, total)
	// An element's place is written out only for an error (a Sprintf an
	// element made 4e7 numbers take minutes); the walk stops with the
	// script's call.
	var walk func(t *lua.LTable, depth int, path func() string)
	walk = func(t *lua.LTable, depth int, path func() string) {
		if t.Len() != shape[depth] {
			argError(L, fn, "ragged table: %s has %d elements, expected %d", path(), t.Len(), shape[depth])
		}
		for i := 1; i <= t.Len(); i++ {
			el := t.RawGetInt(i)
			where := func() string { return fmt.Sprintf("%s[%d]", path(), i) }
			if depth == len(shape)-1 {
				n, ok := el.(lua.LNumber)
				if !ok {
					argError(L, fn, "%s is a %s, expected a number", where(), luaTypeName(el))
				}
				if len(data)%(1<<16) == 0 {
					stopIfEnded(L, fn)
				}
				data = append(data, float64(n))
				continue
			}
			sub, ok := el.(*lua.LTable)
			if !ok {
				argError(L, fn, "ragged table: %s is a %s, expected a table", where(), luaTypeName(el))
			}
			walk(sub, depth+1, where)
		}
	}
	walk(tbl, 0, func() string { return "t" })
	return data, shape
}

// nestedTable turns flat values of shape into nested Lua tables.
func nestedTable[T float32 | float64](L *lua.LState, v []T, shape []int) *lua.LTable {
	tbl := L.CreateTable(shape[0], 0)
	if len(shape) == 1 {
		for i := 0; i < len(v); i += totableCheckEvery {
			stopIfEnded(L, "totable")
			for _, x := range v[i:min(i+totableCheckEvery, len(v))] {
				tbl.Append(lua.LNumber(x))
			}
		}
		return tbl
	}
	step := 1 // the values of one entry (0 in an empty tensor: {{}, {}} for 2x0)
	for _, d := range shape[1:] {
		step *= d
	}
	for i := 0; i < shape[0]; i++ {
		if i%max(1, totableCheckEvery/max(1, step)) == 0 {
			stopIfEnded(L, "totable")
		}
		tbl.Append(nestedTable(L, v[i*step:(i+1)*step], shape[1:]))
	}
	return tbl
}

// formatTensor prints values like PyTorch (summarised above 1000 elements)
// followed by a footer such as [tensor f32 2x3 cpu pass].
func formatTensor(t *core.Tensor) string {
	footer := fmt.Sprintf("[tensor %s %s %s %s]", t.Dtype(), core.ShapeString(t.Shape()), t.Device(), t.Scope())
	var body string
	var err error
	if t.Dtype() == ggmlcgo.I32 {
		var v []float64
		if v, err = t.Float64s(); err == nil { // exact past 2^24
			body = formatValues(v, t.Shape(), "%.0f") // every digit of an index
		}
	} else {
		var v []float32
		if v, err = t.Float32s(); err == nil { // no float64 copy of a big tensor
			body = formatValues(v, t.Shape(), "%.4g")
		}
	}
	if err != nil {
		return fmt.Sprintf("<%s>\n%s", err.Error(), footer)
	}
	return body + "\n" + footer
}

// formatValues prints values of shape as nested brackets, each with verb,
// summarised (three first and last along each dim) above 1000 values.
func formatValues[T float32 | float64](v []T, shape []int, verb string) string {
	if len(v) == 0 { // an empty tensor (its shape is in the footer), as PyTorch prints one
		return "[]"
	}
	var b strings.Builder
	summarise := len(v) > 1000
	var rec func(v []T, shape []int, indent int)
	rec = func(v []T, shape []int, indent int) {
		b.WriteString("[")
		n := shape[0]
		step := len(v) / n
		for i := 0; i < n; i++ {
			if summarise && n > 6 && i == 3 {
				b.WriteString("...")
				i = n - 3
				if len(shape) > 1 {
					b.WriteString(",\n" + strings.Repeat(" ", indent+1))
				} else {
					b.WriteString(", ")
				}
			}
			if len(shape) == 1 {
				fmt.Fprintf(&b, verb, v[i])
			} else {
				rec(v[i*step:(i+1)*step], shape[1:], indent+1)
			}
			if i < n-1 {
				if len(shape) > 1 {
					b.WriteString(",\n" + strings.Repeat(" ", indent+1))
				} else {
					b.WriteString(", ")
				}
			}
		}
		b.WriteString("]")
	}
	rec(v, shape, 0)
	return b.String()
}

// toDtype binds x:float(), x:half(), x:bfloat16() (dtype fixed) and
// x:to(dtype) (dtype "" : read from argument 2).
func (env *Env) toDtype(name string, dtype ggmlcgo.Type, fromArg bool) lua.LGFunction {
	return func(L *lua.LState) int {
		x := checkTensor(L, name, 1)
		dt := dtype
		if fromArg {
			dt = parseDtype(L, name, L.CheckString(2))
		}
		t, err := env.Engine.To(x, dt)
		return env.pushResult(L, t, err)
	}
}
