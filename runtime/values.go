package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Conversions between Lua and Go values walk tables once each: a table
// reached twice (shared) converts once, and both places get the same Go
// slice or map (a Go []any or map reached twice becomes one Lua table); a
// table that contains itself (a cycle) is an error, ErrConvert, as is
// nesting deeper than maxConvertDepth or more than maxConvertValues values
// in all. The walk stops with the call's context.
const (
	maxConvertDepth  = 100
	maxConvertValues = 1 << 24
)

// toGo converts Lua values: numbers to float64, strings, booleans, tensors
// to *core.Tensor, a table whose keys are positive integers (at least half
// of 1..n, holes nil) to []any, other tables to map[string]any with every
// key (keys that are one string in Go, 1 and "1", are refused, as are
// tables and functions as keys).
// A table shared between values converts once too. ctx (may be nil) stops
// a long walk.
func toGo(ctx context.Context, vs ...lua.LValue) ([]any, error) {
	c := &goConverter{ctx: ctx}
	out := make([]any, len(vs))
	for i, v := range vs {
		var err error
		if out[i], err = c.convert(v); err != nil {
			return nil, &convertError{i + 1, err}
		}
	}
	return out, nil
}

// convertError is the failed conversion of value i (1-based) of a list.
type convertError struct {
	i   int
	err error
}

func (e *convertError) Error() string { return e.err.Error() }
func (e *convertError) Unwrap() error { return e.err }

type goConverter struct {
	ctx   context.Context
	done  map[*lua.LTable]any  // tables converted
	open  map[*lua.LTable]bool // tables being converted: met again, a cycle
	path  []lua.LValue         // the keys from the root to the value converted
	count int
}

func (c *goConverter) convert(v lua.LValue) (any, error) {
	if c.count++; c.count > maxConvertValues {
		return nil, fmt.Errorf("%w: a value of more than %d elements", ErrConvert, maxConvertValues)
	}
	if c.count%(1<<14) == 0 && c.ctx != nil && c.ctx.Err() != nil {
		return nil, fmt.Errorf("converting a value: %w", context.Cause(c.ctx))
	}
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x), nil
	case lua.LString:
		return string(x), nil
	case lua.LBool:
		return bool(x), nil
	case *lua.LUserData:
		return x.Value, nil
	case *lua.LTable:
		return c.table(x)
	}
	return nil, nil
}

func (c *goConverter) table(x *lua.LTable) (any, error) {
	if c.done == nil {
		c.done, c.open = map[*lua.LTable]any{}, map[*lua.LTable]bool{}
	}
	if out, ok := c.done[x]; ok {
		return out, nil
	}
	if c.open[x] {
		return nil, fmt.Errorf("%w: the table at %s contains itself (a cycle)", ErrConvert, pathString(c.path))
	}
	if len(c.path) >= maxConvertDepth {
		return nil, fmt.Errorf("%w: tables nested more than %d deep (at %s)", ErrConvert, maxConvertDepth, pathString(c.path))
	}
	c.open[x] = true
	defer delete(c.open, x)
	var out any
	if n := arrayLen(x); n > 0 {
		s := make([]any, n)
		for i := range s {
			c.path = append(c.path, lua.LNumber(i+1))
			v, err := c.convert(x.RawGetInt(i + 1))
			c.path = c.path[:len(c.path)-1]
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		out = s
	} else {
		m := map[string]any{}
		from := map[string]lua.LValue{} // the Lua key each Go key came from
		var err error
		x.ForEach(func(k, val lua.LValue) {
			if err != nil {
				return
			}
			name := k.String()
			if other, ok := from[name]; ok { // 1 and "1", true and "true"
				err = fmt.Errorf("%w: the table at %s has keys %s and %s, which are both %q in Go", ErrConvert, pathString(c.path), keyText(other), keyText(k), name)
				return
			}
			if _, ok := k.(*lua.LTable); ok || k.Type() == lua.LTFunction || k.Type() == lua.LTUserData {
				err = fmt.Errorf("%w: the table at %s has a key of type %s, which Go's string keys cannot hold", ErrConvert, pathString(c.path), k.Type())
				return
			}
			from[name] = k
			c.path = append(c.path, k)
			var v any
			v, err = c.convert(val)
			c.path = c.path[:len(c.path)-1]
			m[name] = v
		})
		if err != nil {
			return nil, err
		}
		out = m
	}
	c.done[x] = out
	return out, nil
}

// arrayLen is the length of the slice t converts to: the largest key,
// when every key is a positive integer and at least half of 1..that are
// there (holes become nil elements); else 0, and t converts to a map
// keeping every key (Len, a border, dropped what was past a hole, and a
// mixed table's names).
func arrayLen(t *lua.LTable) int {
	keys, top, ints := 0, 0, true
	t.ForEach(func(k, _ lua.LValue) {
		keys++
		f, ok := k.(lua.LNumber)
		if !ok || float64(f) != math.Trunc(float64(f)) || f < 1 || f > 1<<40 {
			ints = false
			return
		}
		top = max(top, int(f))
	})
	if !ints || keys == 0 || top > 2*keys {
		return 0
	}
	return top
}

// keyText is a Lua key as a script writes it: 1, "1", true.
func keyText(k lua.LValue) string {
	if s, ok := k.(lua.LString); ok {
		return fmt.Sprintf("%q", string(s))
	}
	return k.String()
}

// pathString writes keys as an index path: value[1].name["a b"].
func pathString(path []lua.LValue) string {
	var b strings.Builder
	b.WriteString("value")
	for _, k := range path {
		switch k := k.(type) {
		case lua.LNumber:
			fmt.Fprintf(&b, "[%v]", k)
		case lua.LString:
			if isName(string(k)) {
				b.WriteString("." + string(k))
			} else {
				fmt.Fprintf(&b, "[%q]", string(k))
			}
		default:
			fmt.Fprintf(&b, "[%s]", k.String())
		}
	}
	return b.String()
}

func isName(s string) bool {
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return s != ""
}

// toLua converts a Go value for a script: numbers, strings, booleans, nil,
// *core.Tensor (a host tensor copied, as SetTensor does), []float32, []any
// and map[string]any. ctx (may be nil) stops a long walk.
func (rt *Runtime) toLua(ctx context.Context, v any) (lua.LValue, error) {
	c := &luaConverter{rt: rt, ctx: ctx}
	return c.convert(v, 0)
}

// goRef is the identity of a Go slice or map.
type goRef struct {
	p   unsafe.Pointer
	len int
}

type luaConverter struct {
	rt    *Runtime
	ctx   context.Context
	done  map[goRef]*lua.LTable
	open  map[goRef]bool
	count int
}

func (c *luaConverter) convert(v any, depth int) (lua.LValue, error) {
	if c.count++; c.count > maxConvertValues {
		return nil, fmt.Errorf("%w: a value of more than %d elements", ErrConvert, maxConvertValues)
	}
	if c.count%(1<<14) == 0 && c.ctx != nil && c.ctx.Err() != nil {
		return nil, fmt.Errorf("converting a value: %w", context.Cause(c.ctx))
	}
	switch x := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(x), nil
	case string:
		return lua.LString(x), nil
	case int:
		return lua.LNumber(x), nil
	case int64:
		return lua.LNumber(x), nil
	case float32:
		return lua.LNumber(x), nil
	case float64:
		return lua.LNumber(x), nil
	case *core.Tensor:
		if x == nil { // a nil tensor is nil, as an untyped nil is
			return lua.LNil, nil
		}
		t, err := scriptCopy(x)
		if err != nil {
			return nil, err
		}
		return c.rt.env.Push(c.rt.L, t), nil
	case []float32:
		t := c.rt.L.CreateTable(len(x), 0)
		for _, f := range x {
			t.Append(lua.LNumber(f))
		}
		return t, nil
	case []any:
		var ref goRef
		if len(x) > 0 {
			ref = goRef{unsafe.Pointer(&x[0]), len(x)}
		}
		return c.table(ref, depth, func(t *lua.LTable) error {
			for i, e := range x { // a nil element stays a hole at its index (Append closed it up)
				lv, err := c.convert(e, depth+1)
				if err != nil {
					return err
				}
				t.RawSetInt(i+1, lv)
			}
			return nil
		})
	case map[string]any:
		var ref goRef
		if x != nil {
			ref = goRef{reflect.ValueOf(x).UnsafePointer(), -1}
		}
		return c.table(ref, depth, func(t *lua.LTable) error {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				lv, err := c.convert(x[k], depth+1)
				if err != nil {
					return err
				}
				t.RawSetString(k, lv)
			}
			return nil
		})
	}
	return nil, fmt.Errorf("%w: cannot pass a %T to Lua", ErrConvert, v)
}

// table makes the Lua table of the Go slice or map ref (nil: an empty one)
// with fill, or returns the one made before.
func (c *luaConverter) table(ref goRef, depth int, fill func(*lua.LTable) error) (lua.LValue, error) {
	if c.done == nil {
		c.done, c.open = map[goRef]*lua.LTable{}, map[goRef]bool{}
	}
	if t, ok := c.done[ref]; ok && ref.p != nil {
		return t, nil
	}
	if c.open[ref] && ref.p != nil {
		return nil, fmt.Errorf("%w: a Go value that contains itself (a cycle)", ErrConvert)
	}
	if depth >= maxConvertDepth {
		return nil, fmt.Errorf("%w: values nested more than %d deep", ErrConvert, maxConvertDepth)
	}
	c.open[ref] = true
	defer delete(c.open, ref)
	t := c.rt.L.NewTable()
	if err := fill(t); err != nil {
		return nil, err
	}
	if ref.p != nil {
		c.done[ref] = t
	}
	return t, nil
}

// SetTensor makes t the value of the global name. A host tensor is copied
// (values, dtype, requires_grad): a Go slice given to core.FromFloat32 and
// rewritten later is never seen by the script, half-way or at all, and the
// script's in-place changes stay in its copy; read them back with Tensor.
// A device tensor has no Go slice and is shared.
//
// A nil t makes the global nil.
func (rt *Runtime) SetTensor(name string, t *core.Tensor) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	if t == nil {
		rt.L.SetGlobal(name, lua.LNil)
		return nil
	}
	c, err := scriptCopy(t)
	if err != nil {
		return err
	}
	rt.L.SetGlobal(name, rt.env.Push(rt.L, c))
	return nil
}

// scriptCopy is what a script gets for t: a copy of a host tensor, t
// itself on a device. A host tensor's storage may be a Go slice that the
// host rewrites, and a pass keeps its upload of a host tensor until the
// pass ends, so sharing it would let a script see old values in one
// expression and new ones in the next.
func scriptCopy(t *core.Tensor) (*core.Tensor, error) {
	if t == nil || t.OnDevice() {
		return t, nil
	}
	vals, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	c, err := core.FromFloat32(append([]float32(nil), vals...), t.Shape()...)
	if err != nil {
		return nil, err
	}
	if t.Dtype() != c.Dtype() {
		if err := c.SetHostDtype(t.Dtype()); err != nil {
			return nil, err
		}
	}
	if t.RequiresGrad() {
		if err := c.SetRequiresGrad(true); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Tensor returns the tensor held by the global name.
func (rt *Runtime) Tensor(name string) (*core.Tensor, error) {
	if err := rt.enter(); err != nil {
		return nil, err
	}
	defer rt.leave()
	ud, ok := rt.L.GetGlobal(name).(*lua.LUserData)
	if ok {
		if t, ok := ud.Value.(*core.Tensor); ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("global %q is a %s, not a tensor", name, rt.L.GetGlobal(name).Type())
}

// Func is a Go function a script can call: it gets the Lua arguments as Go
// values (see DoString) and returns values for Lua, or an error that the
// script sees as a Lua error.
type Func func(args []any) ([]any, error)

// Register makes fn callable from Lua as the global name. Its arguments
// are converted as DoString's results are; an argument that cannot be (a
// table with a cycle) is a Lua error, as is an error fn returns, and the
// host gets either back from DoString with errors.Is reaching it.
func (rt *Runtime) Register(name string, fn Func) {
	if rt.enter() != nil {
		return // closed, or in use: nothing to register into now
	}
	defer rt.leave()
	rt.L.SetGlobal(name, rt.L.NewFunction(func(L *lua.LState) int {
		in := make([]lua.LValue, L.GetTop())
		for i := range in {
			in[i] = L.Get(i + 1)
		}
		args, err := toGo(L.Context(), in...)
		if ce := (*convertError)(nil); errors.As(err, &ce) {
			rt.causes.raise(L, fmt.Errorf("%s: argument %d: %w", name, ce.i, ce.err))
		}
		results, err := fn(args)
		if err != nil {
			rt.causes.raise(L, fmt.Errorf("%s: %w", name, err))
		}
		c := &luaConverter{rt: rt, ctx: L.Context()} // shared between results too
		out := make([]lua.LValue, len(results))
		for i, r := range results {
			if out[i], err = c.convert(r, 0); err != nil {
				rt.causes.raise(L, fmt.Errorf("%s: %w", name, err))
			}
		}
		for _, lv := range out {
			L.Push(lv)
		}
		return len(results)
	}))
}

// SetGlobal sets a global to a Go value (see Register for the conversions).
func (rt *Runtime) SetGlobal(name string, v any) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	lv, err := rt.toLua(nil, v)
	if err != nil {
		return err
	}
	rt.L.SetGlobal(name, lv)
	return nil
}
