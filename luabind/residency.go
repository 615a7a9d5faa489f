package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Residency: the globals to_gpu and to_cpu, and the residency library
// (stats, reset, limit) over the engine's two pools.

func (env *Env) residencyFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"limit": env.limit,
		"reset": env.reset,
		"stats": env.stats,
	}
}

func openResidency(L *lua.LState, env *Env) {
	L.SetGlobal("to_gpu", newFunction(L, "to_gpu", env.toGPU))
	L.SetGlobal("to_cpu", newFunction(L, "to_cpu", env.toCPU))
	L.SetGlobal("residency", L.SetFuncs(L.NewTable(), functions("residency.", env.residencyFunctions())))
}

// to_gpu(x [, scope | {scope=, dtype=}]) copies x into a pool of the
// device; a parameter moves itself, so modules and optimizers keep it.
func (env *Env) toGPU(L *lua.LState) int {
	t := checkTensor(L, "to_gpu", 1)
	scope, dtype := toGPUOptions(L, t.Dtype())
	if t.IsParam() { // frozen ones too: a parameter moves in place
		raise(L, t.MoveToDeviceAs(env.Engine, scope, dtype))
		L.Push(L.Get(1))
		return 1
	}
	d, err := t.ToDevice(env.Engine, scope, dtype)
	if err != nil {
		raise(L, fmt.Errorf("to_gpu: %w", err))
	}
	L.Push(env.push(L, d))
	return 1
}

// toGPUOptions reads to_gpu's second argument: nil, a scope string, or a
// table {scope=, dtype=}.
func toGPUOptions(L *lua.LState, dtype ggmlcgo.Type) (residency.Scope, ggmlcgo.Type) {
	scope := "pass"
	switch v := L.Get(2).(type) {
	case lua.LString:
		scope = string(v)
	case *lua.LNilType, *lua.LTable:
		r := readOpts(L, "to_gpu", 2)
		scope = r.str("scope", scope)
		if r.has("dtype") {
			dtype = parseDtype(L, "to_gpu", r.str("dtype", ""))
		} else {
			r.get("dtype")
		}
		r.done()
	default:
		argError(L, "to_gpu", "argument 2: expected a scope string or an options table, got %s", luaTypeName(v))
	}
	sc, err := residency.ParseScope(scope)
	if err != nil {
		argError(L, "to_gpu", "%s", err.Error())
	}
	return sc, dtype
}

// to_cpu(x) is a host copy of x.
func (env *Env) toCPU(L *lua.LState) int {
	x := checkTensor(L, "to_cpu", 1)
	if x.OnDevice() {
		env.checkHost(L, "to_cpu", x.Numel()) // before the copy is made
	}
	h, err := x.ToHost()
	if err != nil {
		raise(L, fmt.Errorf("to_cpu: %w", err))
	}
	L.Push(env.push(L, h))
	return 1
}

// stats() is the ledger and the engine's counters (and the process's RSS).
// p_free_bytes is the part of p_buffer_bytes no tensor uses: room left, and
// the memory of persistent tensors the script dropped (taken back once the
// garbage collector finds them unreachable; collectgarbage() runs it).
func (env *Env) stats(L *lua.LState) int {
	tbl := L.NewTable()
	for k, v := range env.Engine.Residency().Ledger().Map() {
		tbl.RawSetString(k, lua.LNumber(v))
	}
	st := env.Engine.Stats()
	tbl.RawSetString("graph_computes", lua.LNumber(st.GraphComputes))
	tbl.RawSetString("nodes_computed", lua.LNumber(st.NodesComputed))
	tbl.RawSetString("pass_bytes_placed", lua.LNumber(st.PassBytes))
	tbl.RawSetString("graph_replays", lua.LNumber(st.GraphReplays))
	tbl.RawSetString("compute_seconds", lua.LNumber(st.ComputeTime.Seconds()))
	tbl.RawSetString("grad_reduce_seconds", lua.LNumber(st.ReduceTime.Seconds()))
	if rss, peak, ok := processMemory(); ok {
		tbl.RawSetString("rss_bytes", lua.LNumber(rss))
		tbl.RawSetString("peak_rss_bytes", lua.LNumber(peak))
	}
	L.Push(tbl)
	return 1
}

// reset([scope]) frees a pool ("pass", "persistent" or "all", the default).
func (env *Env) reset(L *lua.LState) int {
	scopes, err := residency.ParseResetScope(L.OptString(1, "all"))
	if err != nil {
		argError(L, "residency.reset", "%s", err.Error())
	}
	raise(L, env.Engine.Reset(scopes...))
	return 0
}

// limit([bytes]) reads or sets the budget; setting returns the old one.
func (env *Env) limit(L *lua.LState) int {
	res := env.Engine.Residency()
	if L.GetTop() == 0 {
		L.Push(lua.LNumber(res.Limit()))
		return 1
	}
	n, ok := L.Get(1).(lua.LNumber)
	if !ok {
		argError(L, "residency.limit", "expected a number of bytes, got %s", luaTypeName(L.Get(1)))
	}
	if top := env.deviceCeiling; top > 0 && (n <= 0 || float64(n) > float64(top)) {
		argError(L, "residency.limit", "a sandbox's device budget is at most the %d bytes its host gave, not %.0f", top, float64(n))
	}
	prev, err := res.SetLimit(int64(n))
	if err != nil {
		argError(L, "residency.limit", "%s", err.Error())
	}
	L.Push(lua.LNumber(prev))
	return 1
}
