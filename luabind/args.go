package luabind

import (
	"fmt"
	"math"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Reading Lua arguments. Every reader names the function and the argument
// in its error, so a script's mistake reads "fn: argument 2: expected ...".

// checkTensor returns argument n as a tensor or raises an error naming fn.
func checkTensor(L *lua.LState, fn string, n int) *core.Tensor {
	v := L.Get(n)
	if t := toTensor(v); t != nil {
		return t
	}
	argError(L, fn, "argument %d: expected a tensor, got %s", n, luaTypeName(v))
	return nil
}

// toTensor is v's tensor, or nil when v is not one.
func toTensor(v lua.LValue) *core.Tensor {
	if ud, ok := v.(*lua.LUserData); ok {
		if t, ok := ud.Value.(*core.Tensor); ok {
			return t
		}
	}
	return nil
}

// checkOperand reads argument n as a tensor or a number (arithmetic).
func checkOperand(L *lua.LState, fn string, n int) core.Operand {
	if num, ok := L.Get(n).(lua.LNumber); ok {
		return core.Operand{N: float64(num)}
	}
	return core.Operand{T: checkTensor(L, fn, n)}
}

// optDim reads an optional 1-based dim at n and returns it 0-based (def if
// absent); negative dims count from the end.
func optDim(L *lua.LState, fn string, n int, def int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkDim(L, fn, n)
}

// checkDim reads a 1-based dim at n (negative: from the end) as 0-based;
// dim 0 is an error, never silently dim 1.
func checkDim(L *lua.LState, fn string, n int) int {
	v := L.Get(n)
	d, ok := v.(lua.LNumber)
	if !ok {
		argError(L, fn, "argument %d: expected a dim (an integer, 1-based), got %s", n, luaTypeName(v))
	}
	if float64(d) != math.Trunc(float64(d)) || math.Abs(float64(d)) > 64 {
		argError(L, fn, "argument %d: expected a dim (an integer, 1-based), got %g", n, float64(d))
	}
	switch {
	case d == 0:
		argError(L, fn, "argument %d: dim 0 does not exist: dims are 1-based (1 is the first, -1 the last)", n)
	case d > 0:
		return int(d) - 1
	}
	return int(d)
}

// checkInteger reads argument n as an integer: a number with a whole value
// within ±2^53, so NaN, infinities and fractions are errors naming fn,
// never truncated.
func checkInteger(L *lua.LState, fn string, n int) int {
	v := L.Get(n)
	x, ok := v.(lua.LNumber)
	if !ok {
		argError(L, fn, "argument %d: expected an integer, got %s", n, luaTypeName(v))
	}
	if f := float64(x); f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		argError(L, fn, "argument %d: expected an integer, got %g", n, f)
	}
	return int(x)
}

// checkIndices reads 1-based indices (a table or a tensor) as 0-based ints.
func checkIndices(L *lua.LState, fn string, n int) []int {
	var vals []float64
	switch v := L.Get(n).(type) {
	case *lua.LTable:
		for i := 1; i <= v.Len(); i++ {
			x, ok := v.RawGetInt(i).(lua.LNumber)
			if !ok {
				argError(L, fn, "index %d is a %s, expected a number", i, luaTypeName(v.RawGetInt(i)))
			}
			vals = append(vals, float64(x))
		}
	default:
		var err error
		vals, err = checkTensor(L, fn, n).Float64s()
		raise(L, err)
	}
	return zeroBased(L, fn, vals)
}

// zeroBased turns 1-based integer indices into 0-based ints.
func zeroBased(L *lua.LState, fn string, vals []float64) []int {
	idx := make([]int, len(vals))
	for i, x := range vals {
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			argError(L, fn, "index %g at position %d is not an integer", x, i+1)
		}
		idx[i] = int(x) - 1
	}
	return idx
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

// tensorList reads argument n, a table (sequence) of tensors; what names an
// element in errors.
func tensorList(L *lua.LState, fn string, n int, what string) []*core.Tensor {
	tbl, ok := L.Get(n).(*lua.LTable)
	if !ok {
		argError(L, fn, "argument %d: expected a table of %ss, got %s", n, what, luaTypeName(L.Get(n)))
	}
	var ts []*core.Tensor
	for i := 1; i <= tbl.Len(); i++ {
		t := toTensor(tbl.RawGetInt(i))
		if t == nil {
			argError(L, fn, "%s %d is a %s, expected a tensor", what, i, luaTypeName(tbl.RawGetInt(i)))
		}
		ts = append(ts, t)
	}
	return ts
}

// paramsArg reads argument 1, a table (sequence) of parameter tensors.
func paramsArg(L *lua.LState, fn string) []*core.Tensor { return tensorList(L, fn, 1, "parameter") }

// parseDtype reads a dtype name (f32, f16, bf16, i32).
func parseDtype(L *lua.LState, fn string, name string) ggmlcgo.Type {
	dt, err := ggmlcgo.ParseType(name)
	if err != nil {
		argError(L, fn, "unknown dtype %q (expected f32, f16, bf16 or i32)", name)
	}
	return dt
}

// optReader reads an options table, {lr=0.1, betas={0.9, 0.999}}: typed
// getters with defaults, then done() refuses every key nothing asked for,
// so a misspelt option is an error instead of being ignored.
type optReader struct {
	L     *lua.LState
	fn    string
	tbl   *lua.LTable // nil when no options were given
	asked []string
}

// readOpts reads argument n as an options table (nil: all defaults).
func readOpts(L *lua.LState, fn string, n int) *optReader {
	o := &optReader{L: L, fn: fn}
	switch v := L.Get(n).(type) {
	case *lua.LNilType:
	case *lua.LTable:
		o.tbl = v
	default:
		argError(L, fn, "argument %d: expected an options table, got %s", n, luaTypeName(v))
	}
	return o
}

func (o *optReader) get(key string) lua.LValue {
	o.asked = append(o.asked, key)
	if o.tbl == nil {
		return lua.LNil
	}
	return o.tbl.RawGetString(key)
}

// has reports whether key was given.
func (o *optReader) has(key string) bool {
	return o.tbl != nil && o.tbl.RawGetString(key) != lua.LNil
}

func (o *optReader) number(key string, def float64) float64 {
	v := o.get(key)
	if v == lua.LNil {
		return def
	}
	n, ok := v.(lua.LNumber)
	if !ok {
		argError(o.L, o.fn, "option %s must be a number, got %s", key, luaTypeName(v))
	}
	return float64(n)
}

// required is a number option that must be given.
func (o *optReader) required(key string) float64 {
	if !o.has(key) {
		o.get(key)
		argError(o.L, o.fn, "option %s is required", key)
	}
	return o.number(key, 0)
}

func (o *optReader) boolean(key string, def bool) bool {
	v := o.get(key)
	if v == lua.LNil {
		return def
	}
	return lua.LVAsBool(v)
}

func (o *optReader) str(key, def string) string {
	v := o.get(key)
	if v == lua.LNil {
		return def
	}
	s, ok := v.(lua.LString)
	if !ok {
		argError(o.L, o.fn, "option %s must be a string, got %s", key, luaTypeName(v))
	}
	return string(s)
}

// pair is an option holding two numbers, such as betas={0.9, 0.999}.
func (o *optReader) pair(key string, a, b float64) (float64, float64) {
	v := o.get(key)
	if v == lua.LNil {
		return a, b
	}
	t, ok := v.(*lua.LTable)
	if ok {
		x, ok1 := t.RawGetInt(1).(lua.LNumber)
		y, ok2 := t.RawGetInt(2).(lua.LNumber)
		if ok1 && ok2 && t.Len() == 2 {
			return float64(x), float64(y)
		}
	}
	argError(o.L, o.fn, "option %s must be a table of two numbers", key)
	return 0, 0
}

// done refuses any key that no getter asked for.
func (o *optReader) done() { raise(o.L, o.unknown()) }

// unknown is the error done raises, or nil.
func (o *optReader) unknown() error {
	var err error
	if o.tbl != nil {
		o.tbl.ForEach(func(k, _ lua.LValue) {
			if s, ok := k.(lua.LString); err == nil && (!ok || !slices.Contains(o.asked, string(s))) {
				err = &argumentError{fmt.Sprintf("%s: unknown option %s (expected %s)", o.fn, k.String(), strings.Join(o.asked, ", "))}
			}
		})
	}
	return err
}

// optionsAt reports whether argument n is an options table (the last
// argument) rather than the first of PyTorch's positional ones, which
// may run to argument last; more arguments than that are an error.
func optionsAt(L *lua.LState, fn string, n, last int) bool {
	if L.GetTop() > last {
		argError(L, fn, "%d arguments given, at most %d", L.GetTop(), last)
	}
	_, ok := L.Get(n).(*lua.LTable)
	if ok && L.GetTop() > n {
		argError(L, fn, "argument %d is an options table: nothing may follow it", n)
	}
	return ok
}

// positionalBool and positionalNumber read argument n of PyTorch's
// positional form (nil: def).
func positionalBool(L *lua.LState, fn string, n int, name string, def bool) bool {
	switch v := L.Get(n).(type) {
	case *lua.LNilType:
		return def
	case lua.LBool:
		return bool(v)
	default:
		argError(L, fn, "argument %d (%s) must be a boolean, got %s", n, name, luaTypeName(v))
		return def
	}
}

func positionalNumber(L *lua.LState, fn string, n int, name string, def float64) float64 {
	switch v := L.Get(n).(type) {
	case *lua.LNilType:
		return def
	case lua.LNumber:
		return float64(v)
	default:
		argError(L, fn, "argument %d (%s) must be a number, got %s", n, name, luaTypeName(v))
		return def
	}
}
