package luabind

import (
	"io"
	"os"
	goruntime "runtime"
	"strings"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Env is what the Lua libraries share: the engine, which device.use may
// replace with one on another device.
type Env struct {
	Engine  *core.Engine
	Threads int
	Sandbox bool      // no file access from Lua (data.csv, tensor.save/load)
	Stdout  io.Writer // where progress bars go
	Stderr  io.Writer // where warnings go
	// HostLimit bounds the bytes of host tensors a script holds at once
	// (0: none). The Go heap cannot refuse an allocation, it can only die,
	// so a sandboxed runtime counts what it hands out.
	HostLimit int64
	hostBytes atomic.Int64

	params map[*core.Tensor]*lua.LUserData // see push
	optims map[*lua.LTable]optimizer       // the optimizer behind each Lua optimizer table
}

// Open installs the gglua globals into L.
func Open(L *lua.LState, env *Env) {
	openTensor(L, env)
	openAutograd(L, env)
	openLosses(L, env)
	openNN(L)
	openOptim(L, env)
	openResidency(L, env)
	openDevice(L, env)
	openData(L, env)
	out := env.Stdout
	if out == nil {
		out = os.Stdout
	}
	openProgress(L, env, out)
}

// argError raises "fn: message" as a Lua error at the caller's line.
func argError(L *lua.LState, fn, format string, args ...any) {
	L.RaiseError(fn+": "+format, args...)
}

// luaTypeName is the type of v as a Lua user would name it.
func luaTypeName(v lua.LValue) string {
	if ud, ok := v.(*lua.LUserData); ok {
		if _, ok := ud.Value.(*core.Tensor); ok {
			return "tensor"
		}
	}
	return v.Type().String()
}

func stringReader(s string) *strings.Reader { return strings.NewReader(s) }

func (env *Env) stderr() io.Writer {
	if env.Stderr == nil {
		return os.Stderr
	}
	return env.Stderr
}

// checkHost refuses, before anything is allocated, a host tensor of n
// elements that the limit cannot take.
func (env *Env) checkHost(L *lua.LState, fn string, n int64) {
	if env.HostLimit > 0 && 4*n > env.HostLimit-env.hostBytes.Load() {
		goruntime.GC()
		if 4*n > env.HostLimit-env.hostBytes.Load() {
			argError(L, fn, "host memory limit exceeded: a tensor of %d bytes with %d held, limit %d", 4*n, env.hostBytes.Load(), env.HostLimit)
		}
	}
}

// chargeHost counts a new host tensor against HostLimit; the count drops
// when the tensor is garbage collected.
func (env *Env) chargeHost(L *lua.LState, t *core.Tensor) {
	if env.HostLimit <= 0 || !t.ChargeOnce() {
		return
	}
	n := 4 * t.Numel()
	if env.hostBytes.Load()+n > env.HostLimit {
		goruntime.GC() // let collected tensors give their bytes back first
		if env.hostBytes.Load()+n > env.HostLimit {
			L.RaiseError("host memory limit exceeded: a tensor of %d bytes with %d held, limit %d", n, env.hostBytes.Load(), env.HostLimit)
		}
	}
	env.hostBytes.Add(n)
	goruntime.AddCleanup(t, func(n int64) { env.hostBytes.Add(-n) }, n)
}
