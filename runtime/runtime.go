package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/luabind"
	"github.com/gglua/gglua/luacompile"
)

// Options configure a Runtime. The zero value runs on the CPU with one thread
// per core and prints to os.Stdout.
type Options struct {
	Device  string    // "cpu" (default), "cuda", "auto" or a ggml device name
	Threads int       // CPU threads (<= 0: one per core)
	Stdout  io.Writer // print and progress bars (default os.Stdout)
	Stderr  io.Writer // warnings (default os.Stderr); io.* (outside the sandbox) writes to the process's own files
	// Sandbox withholds io, os, debug, load*, dofile and require, and bounds
	// what a script can hold and make: host tensors (HostLimit), the Go
	// heap a call may grow (HeapLimit), the strings and value lists that
	// one library call makes, and the call depth (see doc.go).
	Sandbox bool
	// MemLimit is the residency budget in bytes: device and pass-pool
	// memory (0: none, or 2 GiB with Sandbox, which a script may lower but
	// not raise; < 0: none).
	MemLimit int64
	// HostLimit bounds the bytes of host tensors a script holds (0: none,
	// or 1 GiB with Sandbox; < 0: none).
	HostLimit int64
	// HeapLimit bounds how far one DoString or DoFile may grow the Go
	// heap above what it was when the call started: past it, a watchdog
	// ends the call with ErrMemory (0: no watchdog, or 2 GiB with Sandbox;
	// < 0: none). It is sampled every few milliseconds, so a call may pass
	// it by what it allocates in that time (see doc.go).
	HeapLimit int64
}

// Sandbox defaults.
const (
	sandboxMemLimit  = 2 << 30
	sandboxHostLimit = 1 << 30
	sandboxHeapLimit = 2 << 30
)

// limit is an Options limit: v, or def in a sandbox when v is 0; none (0)
// when v < 0.
func limit(v int64, sandbox bool, def int64) int64 {
	switch {
	case v < 0:
		return 0
	case v == 0 && sandbox:
		return def
	}
	return v
}

// Runtime is one Lua state with its device state.
type Runtime struct {
	// mu guards closed, busy and cancel: a Runtime runs one call at a time
	// (its Lua state is not safe for concurrent use), and any other use
	// meanwhile is ErrBusy; Close cancels a running call and waits for it.
	mu        sync.Mutex
	closed    bool
	busy      bool
	cancel    context.CancelCauseFunc // the running call's
	idle      chan struct{}           // closed when the running call returns (Close waits on it)
	L         *lua.LState
	env       *luabind.Env
	out       io.Writer
	heapLimit int64   // HeapLimit in effect (0: none)
	causes    *causes // Go errors behind the runtime's own Lua errors
	compile   luacompile.Options
}

// New starts a runtime.
func New(opts Options) (*Runtime, error) {
	eng, err := core.NewEngine(core.EngineOptions{Device: opts.Device, Threads: opts.Threads})
	if err != nil {
		return nil, err
	}
	if _, err := eng.Residency().SetLimit(limit(opts.MemLimit, opts.Sandbox, sandboxMemLimit)); err != nil {
		eng.Close()
		return nil, err
	}
	out := opts.Stdout
	if out == nil {
		out = os.Stdout
	}
	// gopher-lua grows a Lua stack by RegistryGrowStep slots at a time (32
	// by default), so pushing n values cost n²/64 slot copies: unpack of
	// 10^5 values took seconds. Steps of 1024 slots (16 KB; pcall's threads
	// and coroutines grow by them too) make that milliseconds.
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 2000, RegistryMaxSize: 1 << 22, RegistryGrowStep: 1 << 10})
	rt := &Runtime{L: L, out: out, heapLimit: limit(opts.HeapLimit, opts.Sandbox, sandboxHeapLimit), causes: &causes{},
		compile: compileOptions(opts.Sandbox)}
	openStdlib(L, opts.Sandbox, rt.causes)
	rt.env = &luabind.Env{Engine: eng, Threads: opts.Threads, Sandbox: opts.Sandbox, Stdout: out, Stderr: opts.Stderr,
		HostLimit: limit(opts.HostLimit, opts.Sandbox, sandboxHostLimit)}
	L.SetGlobal("print", L.NewFunction(rt.print))
	luabind.Open(L, rt.env)
	return rt, nil
}

// stdlib is one of Lua's standard libraries.
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
func openStdlib(L *lua.LState, sandbox bool, c *causes) {
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
	}
	if !sandbox {
		installLoaders(L) // compiled around gopher-lua's compiler bugs (load.go)
	}
	installStdlib(L, sandbox, c)      // cancellable string matching, bounded results (stdlib.go)
	installProtectedCalls(L)          // pcall/xpcall without gopher-lua's upvalue bug (pcall.go)
	installRandom(L)                  // math.random on the runtime's own seeded generator (random.go)
	installCollectGarbage(L, sandbox) // Lua 5.1's options, paced in a sandbox (collectgarbage.go)
	if m, ok := L.GetGlobal("math").(*lua.LTable); ok {
		m.RawSetString("huge", lua.LNumber(math.Inf(1))) // gopher-lua's was the largest float, not inf
	}
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
	if err := rt.enter(); err != nil {
		return nil, err
	}
	defer rt.leave()
	fn, err := rt.compileIn(ctx, []byte(code), "<string>")
	if err != nil {
		return nil, err
	}
	return rt.call(ctx, fn)
}

// DoFile runs a script with args in the global arg table, as the lua
// interpreter does (arg[0] is the script).
func (rt *Runtime) DoFile(ctx context.Context, path string, args ...string) ([]any, error) {
	if err := rt.enter(); err != nil {
		return nil, err
	}
	defer rt.leave()
	src, err := fileSource(path)
	if err != nil {
		return nil, err
	}
	fn, err := rt.compileIn(ctx, src, path)
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
	ctx, cancel := context.WithCancelCause(ctx) // Close from another goroutine ends the call
	rt.mu.Lock()
	rt.cancel = cancel
	rt.mu.Unlock()
	if rt.heapLimit > 0 {
		// The watchdog ends the call through its context. That context is
		// not cancelled when the call returns: coroutines made in this call
		// run under contexts derived from it, and a later call may resume
		// them.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		heapLimit := rt.heapLimit
		stop := watchHeap(heapLimit, func() {
			cancel(fmt.Errorf("%w: the call grew the Go heap by more than %s (HeapLimit)", ErrMemory, byteSize(heapLimit)))
		})
		defer stop()
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
	// Collectives a backward left for the next compute run before the call
	// ends, as every other process's will (core's FinishCollectives).
	if err := rt.env.Engine.FinishCollectives(); err != nil {
		rt.L.SetTop(base)
		return nil, err
	}
	results := make([]lua.LValue, rt.L.GetTop()-base)
	for i := range results {
		results[i] = rt.L.Get(base + 1 + i)
	}
	rt.L.SetTop(base)
	out, err := toGo(ctx, results...)
	if ce := (*convertError)(nil); errors.As(err, &ce) {
		return nil, fmt.Errorf("runtime: result %d: %w", ce.i, ce.err)
	}
	return out, nil
}

// byteSize writes n bytes in MiB when it is a whole number of them.
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Engine is the runtime's current engine (device.use may replace it).
func (rt *Runtime) Engine() *core.Engine { return rt.env.Engine }

// enter starts a use of the runtime: ErrClosed after Close, ErrBusy while
// a call runs. A function given to Register runs inside the call, so it
// too gets ErrBusy: it takes and returns values instead. (Go cannot tell
// that goroutine from another, and letting it in let any in.)
func (rt *Runtime) enter() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.closed:
		return ErrClosed
	case rt.busy:
		return ErrBusy
	}
	rt.busy = true
	return nil
}

// leave ends the use enter started.
func (rt *Runtime) leave() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.busy, rt.cancel = false, nil
	if rt.idle != nil {
		close(rt.idle)
		rt.idle = nil
	}
}

// Close frees every device buffer of the runtime and its Lua state. A call
// running on another goroutine is cancelled (it returns ErrClosed) and
// waited for first.
func (rt *Runtime) Close() {
	rt.mu.Lock()
	for rt.busy {
		if rt.cancel != nil {
			rt.cancel(ErrClosed)
		}
		if rt.idle == nil {
			rt.idle = make(chan struct{})
		}
		idle := rt.idle
		rt.mu.Unlock()
		<-idle
		rt.mu.Lock()
	}
	if rt.closed {
		rt.mu.Unlock()
		return // Close is idempotent
	}
	rt.closed = true
	rt.mu.Unlock()
	luabind.Detach(rt.L)
	rt.L.Close()
	rt.env.Engine.Close()
}
