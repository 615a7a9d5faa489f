package luabind

import (
	"errors"
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The autograd globals: with_grad_tape, no_grad, autocast, backward,
// detect_anomaly and sync.

func (env *Env) autogradGlobals() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"autocast":       env.autocast,
		"backward":       env.backward,
		"detect_anomaly": env.detectAnomaly,
		"no_grad":        env.noGrad,
		"sync":           env.sync,
		"with_grad_tape": env.withGradTape,
	}
}

func openAutograd(L *lua.LState, env *Env) {
	env.pcall, _ = L.GetGlobal("pcall").(*lua.LFunction)
	for name, f := range env.autogradGlobals() {
		L.SetGlobal(name, newFunction(L, name, f))
	}
}

// with_grad_tape(fn) resets the pass pool, records fn's ops and returns
// fn's results.
func (env *Env) withGradTape(L *lua.LState) int {
	return pushAll(L, env.callLua(L, L.CheckFunction(1), env.Engine.WithGradTape))
}

// no_grad(fn) runs fn without recording.
func (env *Env) noGrad(L *lua.LState) int {
	return pushAll(L, env.callLua(L, L.CheckFunction(1), env.Engine.NoGrad))
}

// autocast([dtype,] fn) runs fn with matmul, bmm, linear and conv computed
// from operands rounded to dtype: "bf16" (the default), or "f32" to turn
// autocast off inside fn.
func (env *Env) autocast(L *lua.LState) int {
	dtype, fn := "bf16", 1
	if L.Get(1).Type() == lua.LTString {
		dtype, fn = L.CheckString(1), 2
	}
	t := parseDtype(L, "autocast", dtype)
	f, ok := L.Get(fn).(*lua.LFunction)
	if !ok {
		argError(L, "autocast", "expected a function to run (autocast([dtype,] fn)), got %s", L.Get(fn).Type())
	}
	// A device.use inside fn replaces the engine, which takes the setting
	// over; once fn is done (or failed), the engine then current goes back
	// to the setting outside, as the first one does by itself.
	start := env.Engine
	defer func() {
		if env.Engine != start {
			env.Engine.TakeAutocast(start)
		}
	}()
	return pushAll(L, env.callLua(L, f, func(run func() error) error { return start.Autocast(t, run) }))
}

// detect_anomaly("warn" | "stop" | "off"): what an optimizer step does when
// a gradient holds NaN or Inf.
func (env *Env) detectAnomaly(L *lua.LState) int {
	m, err := core.ParseAnomalyMode(L.OptString(1, "warn"))
	if err != nil {
		argError(L, "detect_anomaly", "%s", err.Error())
	}
	env.Engine.SetAnomalyMode(m, func(msg string) { fmt.Fprintln(env.stderr(), "gglua: warning: "+msg) })
	return 0
}

// sync() computes everything pending now, and waits for the device.
func (env *Env) sync(L *lua.LState) int {
	raise(L, env.Engine.Sync())
	return 0
}

func pushAll(L *lua.LState, vals []lua.LValue) int {
	for _, v := range vals {
		L.Push(v)
	}
	return len(vals)
}

// callLua calls fn with no arguments inside run and returns its results; a
// Lua error in fn comes back as the error of run and is raised again as it
// was. fn runs through the state's own pcall when it has one (the runtime
// installs gglua's, which keeps the caller's upvalues intact across errors
// and refuses coroutine.yield inside, as Lua 5.1 does across a C call).
func (env *Env) callLua(L *lua.LState, fn *lua.LFunction, run func(func() error) error) []lua.LValue {
	var results []lua.LValue
	var luaErr lua.LValue
	err := run(func() error {
		base := L.GetTop()
		if env.pcall == nil {
			L.Push(fn)
			if err := L.PCall(0, lua.MultRet, nil); err != nil {
				if apiErr, ok := err.(*lua.ApiError); ok {
					luaErr = apiErr.Object
				}
				return err
			}
			results = append(results, stackFrom(L, base+1)...)
			L.SetTop(base)
			return nil
		}
		L.Push(env.pcall)
		L.Push(fn)
		L.Call(1, lua.MultRet)
		out := stackFrom(L, base+1)
		L.SetTop(base)
		if lua.LVAsBool(out[0]) {
			results = out[1:]
			return nil
		}
		luaErr = lua.LNil
		if len(out) > 1 {
			luaErr = out[1]
		}
		return errLuaError
	})
	if err != nil {
		if luaErr != nil {
			L.Error(luaErr, 0) // re-raise the script's own error unchanged
		}
		raise(L, err)
	}
	return results
}

var errLuaError = errors.New("lua error")

// stackFrom is L's values from index i to the top.
func stackFrom(L *lua.LState, i int) []lua.LValue {
	var out []lua.LValue
	for ; i <= L.GetTop(); i++ {
		out = append(out, L.Get(i))
	}
	return out
}
