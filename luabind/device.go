package luabind

import (
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// The device library: list, use, current, and clock for timing runs.

func (env *Env) deviceFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"clock":   deviceClock,
		"current": env.currentDevice,
		"list":    deviceList,
		"use":     env.useDevice,
	}
}

func openDevice(L *lua.LState, env *Env) {
	L.SetGlobal("device", L.SetFuncs(L.NewTable(), functions("device.", env.deviceFunctions())))
}

// list() describes every ggml device: name, description, type, free, total.
func deviceList(L *lua.LState) int {
	out := L.NewTable()
	for _, d := range ggmlcgo.Devices() {
		e := L.NewTable()
		e.RawSetString("name", lua.LString(d.Name))
		e.RawSetString("description", lua.LString(d.Description))
		e.RawSetString("type", lua.LString(d.Type))
		e.RawSetString("free", lua.LNumber(d.FreeBytes))
		e.RawSetString("total", lua.LNumber(d.TotalBytes))
		out.Append(e)
	}
	L.Push(out)
	return 1
}

var clockStart = time.Now()

// clock() is wall-clock seconds on a monotonic clock.
func deviceClock(L *lua.LState) int {
	L.Push(lua.LNumber(time.Since(clockStart).Seconds()))
	return 1
}

func (env *Env) currentDevice(L *lua.LState) int {
	L.Push(lua.LString(env.Engine.DeviceName()))
	return 1
}

// use(name) switches the runtime to another device. Tensors on the old one
// become stale (reading them is an error), never dangling.
func (env *Env) useDevice(L *lua.LState) int {
	e, err := core.NewEngine(core.EngineOptions{Device: L.CheckString(1), Threads: env.Threads})
	if err != nil {
		argError(L, "device.use", "%s", err.Error())
	}
	if limit := env.Engine.Residency().Limit(); limit > 0 {
		e.Residency().SetLimit(limit)
	}
	// The sums a data-parallel backward left for the next compute run
	// before the engine goes, as the other processes' will.
	if err := env.Engine.FinishCollectives(); err != nil {
		e.Close()
		argError(L, "device.use", "%s", err.Error())
	}
	e.SetContext(env.Engine.Context())
	e.TakeRand(env.Engine)
	e.TakeAutocast(env.Engine)
	env.Engine.Close()
	env.Engine = e
	L.Push(lua.LString(e.DeviceName()))
	return 1
}
