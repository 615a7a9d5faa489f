package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// toGPUOptions reads to_gpu's second argument: nil, a scope string, or a
// table {scope=, dtype=}. Unknown keys are errors, not silently ignored.
func toGPUOptions(L *lua.LState, v lua.LValue, dtype ggmlcgo.Type) (residency.Scope, ggmlcgo.Type) {
	scope := residency.Pass
	parseScope := func(s string) {
		sc, err := residency.ParseScope(s)
		if err != nil {
			argError(L, "to_gpu", "%s", err.Error())
		}
		scope = sc
	}
	switch o := v.(type) {
	case *lua.LNilType:
	case lua.LString:
		parseScope(string(o))
	case *lua.LTable:
		o.ForEach(func(k, val lua.LValue) {
			key, _ := k.(lua.LString)
			s, isStr := val.(lua.LString)
			switch {
			case key == "scope" && isStr:
				parseScope(string(s))
			case key == "dtype" && isStr:
				dt, err := ggmlcgo.ParseType(string(s))
				if err != nil || dt == ggmlcgo.I32 {
					argError(L, "to_gpu", "unknown dtype %q (expected f32, f16 or bf16)", string(s))
				}
				dtype = dt
			case key == "scope" || key == "dtype":
				argError(L, "to_gpu", "option %s must be a string, got %s", key, luaTypeName(val))
			default:
				argError(L, "to_gpu", "unknown option %s (expected scope or dtype)", k.String())
			}
		})
	default:
		argError(L, "to_gpu", "argument 2: expected a scope string or an options table, got %s", luaTypeName(v))
	}
	return scope, dtype
}

func openResidency(L *lua.LState, env *Env) {
	L.SetGlobal("to_gpu", L.NewFunction(func(L *lua.LState) int {
		t := checkTensor(L, "to_gpu", 1)
		scope, dtype := toGPUOptions(L, L.Get(2), t.Dtype())
		if t.IsLeaf() && t.RequiresGrad() {
			// A parameter moves itself: modules and optimizers keep holding it.
			raise(L, t.MoveToDeviceAs(env.Engine, scope, dtype))
			L.Push(L.Get(1))
			return 1
		}
		d, err := t.ToDevice(env.Engine, scope, dtype)
		if err != nil {
			L.RaiseError("to_gpu: %s", err.Error())
		}
		L.Push(env.push(L, d))
		return 1
	}))
	L.SetGlobal("to_cpu", L.NewFunction(func(L *lua.LState) int {
		h, err := checkTensor(L, "to_cpu", 1).ToHost()
		if err != nil {
			L.RaiseError("to_cpu: %s", err.Error())
		}
		L.Push(env.push(L, h))
		return 1
	}))

	lib := L.SetFuncs(L.NewTable(), map[string]lua.LGFunction{
		"stats": func(L *lua.LState) int {
			tbl := L.NewTable()
			for k, v := range env.Engine.Residency().Ledger().Map() {
				tbl.RawSetString(k, lua.LNumber(v))
			}
			st := env.Engine.Stats()
			tbl.RawSetString("graph_computes", lua.LNumber(st.GraphComputes))
			tbl.RawSetString("nodes_computed", lua.LNumber(st.NodesComputed))
			tbl.RawSetString("pass_bytes_placed", lua.LNumber(st.PassBytes))
			if rss, peak, ok := processMemory(); ok {
				tbl.RawSetString("rss_bytes", lua.LNumber(rss))
				tbl.RawSetString("peak_rss_bytes", lua.LNumber(peak))
			}
			L.Push(tbl)
			return 1
		},
		"reset": func(L *lua.LState) int {
			scopes, err := residency.ParseResetScope(L.OptString(1, "all"))
			if err != nil {
				argError(L, "residency.reset", "%s", err.Error())
			}
			raise(L, env.Engine.Reset(scopes...))
			return 0
		},
		"limit": func(L *lua.LState) int {
			res := env.Engine.Residency()
			if L.GetTop() == 0 {
				L.Push(lua.LNumber(res.Limit()))
				return 1
			}
			n, ok := L.Get(1).(lua.LNumber)
			if !ok {
				argError(L, "residency.limit", "expected a number of bytes, got %s", luaTypeName(L.Get(1)))
			}
			prev, err := res.SetLimit(int64(n))
			if err != nil {
				argError(L, "residency.limit", "%s", err.Error())
			}
			L.Push(lua.LNumber(prev))
			return 1
		},
	})
	L.SetGlobal("residency", lib)
}
