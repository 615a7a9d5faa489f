package runtime

import (
	"context"
	"fmt"
	"io"
	"os"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/luabind"
)

// Options configure a Runtime. The zero value runs on the CPU with one thread
// per core and prints to os.Stdout.
type Options struct {
	Device   string    // "cpu" (default), "cuda", "auto" or a ggml device name
	Threads  int       // CPU threads (<= 0: one per core)
	MemLimit int64     // residency budget in bytes (0: none)
	Stdout   io.Writer // print and progress bars (default os.Stdout)
	Stderr   io.Writer // warnings (default os.Stderr); io.* (outside the sandbox) writes to the process's own files
	// Sandbox withholds io, os, debug, load*, dofile and require, and bounds
	// what a script can hold: strings from string.rep, host tensors
	// (HostLimit, default 1 GiB in a sandbox) and the call depth.
	Sandbox bool
	// HostLimit bounds the bytes of host tensors a script holds (0: none,
	// or 1 GiB with Sandbox).
	HostLimit int64
}

// Runtime is one Lua state with its device state.
type Runtime struct {
	closed bool
	L      *lua.LState
	env    *luabind.Env
	out    io.Writer
}

// New starts a runtime.
func New(opts Options) (*Runtime, error) {
	eng, err := core.NewEngine(core.EngineOptions{Device: opts.Device, Threads: opts.Threads})
	if err != nil {
		return nil, err
	}
	if _, err := eng.Residency().SetLimit(opts.MemLimit); err != nil {
		eng.Close()
		return nil, err
	}
	out := opts.Stdout
	if out == nil {
		out = os.Stdout
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 2000, RegistryMaxSize: 1 << 22})
	openStdlib(L, opts.Sandbox)
	hostLimit := opts.HostLimit
	if hostLimit == 0 && opts.Sandbox {
		hostLimit = 1 << 30
	}
	rt := &Runtime{L: L, env: &luabind.Env{Engine: eng, Threads: opts.Threads, Sandbox: opts.Sandbox, Stdout: out, Stderr: opts.Stderr, HostLimit: hostLimit}, out: out}
	L.SetGlobal("print", L.NewFunction(rt.print))
	luabind.Open(L, rt.env)
	return rt, nil
}

// openStdlib opens Lua's standard libraries; the sandbox leaves out those
// that reach the host (io, os, debug) and those that load code.
type stdlib struct {
	name string
	open lua.LGFunction
}

var (
	safeLibs = []stdlib{
		{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine},
	}
	hostLibs = []stdlib{{lua.IoLibName, lua.OpenIo}, {lua.OsLibName, lua.OpenOs}, {lua.DebugLibName, lua.OpenDebug}}
)

// openStdlib opens Lua's standard libraries; the sandbox leaves out those
// that reach the host (io, os, debug) and those that load code.
func openStdlib(L *lua.LState, sandbox bool) {
	libs := safeLibs
	if !sandbox {
		libs = append(append([]stdlib(nil), safeLibs...), hostLibs...)
	}
	for _, lib := range libs {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	if sandbox {
		for _, name := range []string{"load", "loadstring", "loadfile", "dofile", "require", "module", "package"} {
			L.SetGlobal(name, lua.LNil)
		}
		boundStringRep(L)
	}
	installProtectedCalls(L) // pcall/xpcall without gopher-lua's upvalue bug (pcall.go)
	installRandom(L)         // math.random on the runtime's own seeded generator (random.go)
}

// maxRepBytes bounds string.rep in a sandbox: string.rep("x", 1e12) would
// otherwise take the host down.
const maxRepBytes = 64 << 20

func boundStringRep(L *lua.LState) {
	str, ok := L.GetGlobal("string").(*lua.LTable)
	if !ok {
		return
	}
	rep := str.RawGetString("rep")
	str.RawSetString("rep", L.NewFunction(func(L *lua.LState) int {
		s, n := L.CheckString(1), L.CheckNumber(2)
		if float64(n)*float64(len(s)+len(L.OptString(3, ""))) > maxRepBytes {
			L.RaiseError("string.rep: a result of more than %d bytes is not allowed in a sandbox", maxRepBytes)
		}
		args := L.GetTop()
		L.Push(rep)
		for i := 1; i <= args; i++ {
			L.Push(L.Get(i))
		}
		L.Call(args, 1)
		return 1
	}))
}

// print writes to the runtime's Stdout, as Lua's print does.
func (rt *Runtime) print(L *lua.LState) int {
	top := L.GetTop()
	for i := 1; i <= top; i++ {
		if i > 1 {
			fmt.Fprint(rt.out, "\t")
		}
		fmt.Fprint(rt.out, L.ToStringMeta(L.Get(i)).String())
	}
	fmt.Fprintln(rt.out)
	return 0
}

// DoString runs a chunk and returns its results as Go values.
func (rt *Runtime) DoString(ctx context.Context, code string) ([]any, error) {
	if rt.closed {
		return nil, ErrClosed
	}
	fn, err := rt.L.LoadString(code)
	if err != nil {
		return nil, err
	}
	return rt.call(ctx, fn)
}

// DoFile runs a script with args in the global arg table, as the lua
// interpreter does (arg[0] is the script).
func (rt *Runtime) DoFile(ctx context.Context, path string, args ...string) ([]any, error) {
	if rt.closed {
		return nil, ErrClosed
	}
	fn, err := rt.L.LoadFile(path)
	if err != nil {
		return nil, err
	}
	argt := rt.L.NewTable()
	argt.RawSetInt(0, lua.LString(path))
	for i, a := range args {
		argt.RawSetInt(i+1, lua.LString(a))
	}
	rt.L.SetGlobal("arg", argt)
	return rt.call(ctx, fn)
}

func (rt *Runtime) call(ctx context.Context, fn *lua.LFunction) ([]any, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	rt.L.SetContext(ctx)
	rt.env.Engine.SetContext(ctx)
	defer func() {
		rt.L.RemoveContext()
		rt.env.Engine.SetContext(nil)
	}()
	base := rt.L.GetTop()
	rt.L.Push(fn)
	if err := rt.L.PCall(0, lua.MultRet, nil); err != nil {
		rt.L.SetTop(base)
		if ctx.Err() != nil {
			// Cancelled: the work it queued is abandoned, not left for the
			// next call to compute.
			rt.env.Engine.DropPending()
		}
		return nil, rt.scriptError(ctx, err)
	}
	n := rt.L.GetTop() - base
	out := make([]any, n)
	for i := 0; i < n; i++ {
		out[i] = toGo(rt.L.Get(base+1+i), 0)
	}
	rt.L.SetTop(base)
	return out, nil
}

// Engine is the runtime's current engine (device.use may replace it).
func (rt *Runtime) Engine() *core.Engine { return rt.env.Engine }

// Close frees every device buffer of the runtime and its Lua state.
func (rt *Runtime) Close() {
	if rt.closed {
		return // Close is idempotent
	}
	rt.closed = true
	luabind.Detach(rt.L)
	rt.L.Close()
	rt.env.Engine.Close()
}
