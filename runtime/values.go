package runtime

import (
	"errors"
	"fmt"
	"sort"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// toGo converts a Lua value: numbers to float64, strings, booleans, tensors
// to *core.Tensor, sequences to []any and other tables to map[string]any.
// Nesting deeper than 32 (a cycle) becomes nil.
func toGo(v lua.LValue, depth int) any {
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x)
	case lua.LString:
		return string(x)
	case lua.LBool:
		return bool(x)
	case *lua.LUserData:
		return x.Value
	case *lua.LTable:
		if depth > 32 {
			return nil
		}
		if n := x.Len(); n > 0 {
			s := make([]any, n)
			for i := range s {
				s[i] = toGo(x.RawGetInt(i+1), depth+1)
			}
			return s
		}
		m := map[string]any{}
		x.ForEach(func(k, val lua.LValue) { m[k.String()] = toGo(val, depth+1) })
		return m
	}
	return nil
}

// toLua converts a Go value for a script: numbers, strings, booleans, nil,
// *core.Tensor (a host tensor copied, as SetTensor does), []float32, []any
// and map[string]any.
func (rt *Runtime) toLua(v any, depth int) (lua.LValue, error) {
	if depth > 32 {
		return nil, errors.New("value nested more than 32 deep")
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
		c, err := scriptCopy(x)
		if err != nil {
			return nil, err
		}
		return rt.env.Push(rt.L, c), nil
	case []float32:
		t := rt.L.CreateTable(len(x), 0)
		for _, f := range x {
			t.Append(lua.LNumber(f))
		}
		return t, nil
	case []any:
		t := rt.L.CreateTable(len(x), 0)
		for _, e := range x {
			lv, err := rt.toLua(e, depth+1)
			if err != nil {
				return nil, err
			}
			t.Append(lv)
		}
		return t, nil
	case map[string]any:
		t := rt.L.NewTable()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lv, err := rt.toLua(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	}
	return nil, fmt.Errorf("cannot pass a %T to Lua", v)
}

// SetTensor makes t the value of the global name. A host tensor is copied
// (values, dtype, requires_grad): a Go slice given to core.FromFloat32 and
// rewritten later is never seen by the script, half-way or at all, and the
// script's in-place changes stay in its copy; read them back with Tensor.
// A device tensor has no Go slice and is shared.
func (rt *Runtime) SetTensor(name string, t *core.Tensor) error {
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

// Register makes fn callable from Lua as the global name.
func (rt *Runtime) Register(name string, fn Func) {
	rt.L.SetGlobal(name, rt.L.NewFunction(func(L *lua.LState) int {
		args := make([]any, L.GetTop())
		for i := range args {
			args[i] = toGo(L.Get(i+1), 0)
		}
		results, err := fn(args)
		if err != nil {
			L.RaiseError("%s: %s", name, err.Error())
		}
		for _, r := range results {
			lv, err := rt.toLua(r, 0)
			if err != nil {
				L.RaiseError("%s: %s", name, err.Error())
			}
			L.Push(lv)
		}
		return len(results)
	}))
}

// SetGlobal sets a global to a Go value (see Register for the conversions).
func (rt *Runtime) SetGlobal(name string, v any) error {
	lv, err := rt.toLua(v, 0)
	if err != nil {
		return err
	}
	rt.L.SetGlobal(name, lv)
	return nil
}
