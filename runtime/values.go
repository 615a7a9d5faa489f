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
// *core.Tensor, []float32, []any and map[string]any.
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
		return rt.env.Push(rt.L, x), nil
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

// SetTensor makes t the value of the global name. The tensor is shared,
// not copied: a host tensor made by core.FromFloat32 keeps the Go slice.
func (rt *Runtime) SetTensor(name string, t *core.Tensor) {
	rt.L.SetGlobal(name, rt.env.Push(rt.L, t))
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
