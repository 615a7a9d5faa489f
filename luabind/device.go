package luabind

import (
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

var clockStart = time.Now()

func openDevice(L *lua.LState, env *Env) {
	lib := L.SetFuncs(L.NewTable(), map[string]lua.LGFunction{
		"list": func(L *lua.LState) int {
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
		},
		// clock is wall-clock seconds on a monotonic clock, for timing runs.
		"clock": func(L *lua.LState) int {
			L.Push(lua.LNumber(time.Since(clockStart).Seconds()))
			return 1
		},
		"current": func(L *lua.LState) int {
			L.Push(lua.LString(env.Engine.DeviceName()))
			return 1
		},
		// use switches the runtime to another device. Tensors on the old one
		// become stale (reading them is an error), never dangling.
		"use": func(L *lua.LState) int {
			name := L.CheckString(1)
			e, err := core.NewEngine(core.EngineOptions{Device: name, Threads: env.Threads})
			if err != nil {
				argError(L, "device.use", "%s", err.Error())
			}
			if limit := env.Engine.Residency().Limit(); limit > 0 {
				e.Residency().SetLimit(limit)
			}
			e.SetContext(env.Engine.Context())
			e.TakeRand(env.Engine)
			env.Engine.Close()
			env.Engine = e
			L.Push(lua.LString(e.DeviceName()))
			return 1
		},
	})
	L.SetGlobal("device", lib)
}
