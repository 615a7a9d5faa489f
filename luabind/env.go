package luabind

import (
	"context"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Env is what the Lua libraries share: the engine, which device.use may
// replace with one on another device, so every binding reads env.Engine at
// call time.
type Env struct {
	Engine  *core.Engine
	Threads int
	Sandbox bool      // no file access from Lua (data.csv, tensor.save/load)
	Stdout  io.Writer // where print's neighbours, progress bars, go
	Stderr  io.Writer // where warnings go
	// HostLimit bounds the bytes of host tensors a script holds at once
	// (0: none). The Go heap cannot refuse an allocation, it can only die,
	// so a sandboxed runtime counts what it hands out.
	HostLimit int64

	host *hostAccount // what HostLimit counts (see chargeHost); its own allocation, for the cleanups

	// deviceCeiling is the device budget the host gave a sandbox when the
	// libraries opened (0: none): residency.limit may not go above it.
	deviceCeiling int64

	methods *lua.LTable    // the tensor methods, for __index
	pcall   *lua.LFunction // the state's pcall when the libraries opened (autograd.go)
	// schedL is the state (the main one or a coroutine's) whose call into a
	// scheduler is under way, on which a LambdaLR calls its lr_lambda.
	schedL *lua.LState
	raised [8]raisedError // the latest Go errors raised to Lua (see Cause)
	next   int

	// params gives a parameter its userdata (see push); weak both ways, so
	// that neither outlives the script's references.
	params      map[weak.Pointer[core.Tensor]]weak.Pointer[lua.LUserData]
	paramsSweep int // len(params) at which dead entries are next swept
}

// libraries are gglua's globals, each opened by one function.
var libraries = []struct {
	name string
	open func(L *lua.LState, env *Env)
}{
	{"autograd", openAutograd}, // with_grad_tape, no_grad, autocast, backward, detect_anomaly, sync
	{"data", openData},
	{"device", openDevice},
	{"dist", openDist}, // dist.go: data parallelism over MPI or NCCL
	{"help", openHelp}, // help (help.go, docs.txt)
	{"llm", openLLM},   // llm.load: llama.cpp's language models (llm.go)
	{"log", openLog},   // log.scalar, log.run: metrics in runs/<run>/ (log.go)
	{"nn", openNN},
	{"optim", openOptim},
	{"progress", openProgress},
	{"residency", openResidency}, // residency, to_gpu, to_cpu
	{"tensor", openTensor},
}

// Open installs the gglua globals into L.
func Open(L *lua.LState, env *Env) {
	env.Attach(L)
	if env.Sandbox {
		env.deviceCeiling = env.Engine.Residency().Limit()
	}
	for _, lib := range libraries {
		lib.open(L, env)
	}
}

// raisedError is a Go error whose message was raised as a Lua error.
type raisedError struct {
	msg string
	err error
}

// raise turns a Go error into a Lua error at the script's line. The Go
// error is remembered, so that the host can get it back (Cause) with its
// chain intact: errors.Is(err, core.ErrBudget) and so on.
func raise(L *lua.LState, err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	if env := envOf(L); env != nil {
		env.raised[env.next%len(env.raised)] = raisedError{msg, err}
		env.next++
	}
	L.RaiseError("%s", msg)
}

// argError raises "fn: message" (an ErrArgument) at the caller's line.
func argError(L *lua.LState, fn, format string, args ...any) {
	raise(L, &argumentError{fmt.Sprintf(fn+": "+format, args...)})
}

type argumentError struct{ msg string }

func (e *argumentError) Error() string { return e.msg }
func (e *argumentError) Unwrap() error { return core.ErrArgument }

// Cause is the Go error behind a Lua error message: the latest error raised
// by a binding whose text the message contains (a script that catches an
// error and raises it again keeps its cause), or nil.
func (env *Env) Cause(luaMessage string) error {
	for i := 1; i <= len(env.raised); i++ {
		r := env.raised[(env.next-i+2*len(env.raised))%len(env.raised)]
		if r.err != nil && strings.Contains(luaMessage, r.msg) {
			return r.err
		}
	}
	return nil
}

// envs finds the Env of a Lua state (and of its coroutines, which share
// its Global).
var envs sync.Map // *lua.Global -> *Env

func envOf(L *lua.LState) *Env {
	if v, ok := envs.Load(L.G); ok {
		return v.(*Env)
	}
	return nil
}

// Attach makes env the one that bindings running in L report to; Open
// calls it, Detach undoes it when the state closes.
func (env *Env) Attach(L *lua.LState) { envs.Store(L.G, env) }

// Detach forgets L's env.
func Detach(L *lua.LState) {
	closeLog(L) // writes the open run's buffered metrics (log.go)
	envs.Delete(L.G)
}

// luaTypeName is the type of v as a Lua user would name it.
func luaTypeName(v lua.LValue) string {
	if toTensor(v) != nil {
		return "tensor"
	}
	return v.Type().String()
}

func (env *Env) stderr() io.Writer {
	if env.Stderr == nil {
		return os.Stderr
	}
	return env.Stderr
}

func (env *Env) stdout() io.Writer {
	if env.Stdout == nil {
		return os.Stdout
	}
	return env.Stdout
}

// stopIfEnded raises the end of the script's call (deadline, Ctrl-C, the
// sandbox's memory watchdog) in fn, if it has ended: a long loop of a
// binding calls it every few thousand steps.
func stopIfEnded(L *lua.LState, fn string) {
	if ctx := L.Context(); ctx != nil && ctx.Err() != nil {
		raise(L, fmt.Errorf("%s: %w", fn, context.Cause(ctx)))
	}
}

// checkHost refuses, before anything is allocated, a host tensor of n
// elements that the limit cannot take.
func (env *Env) checkHost(L *lua.LState, fn string, n int64) {
	if env.HostLimit > 0 && 4*n > env.HostLimit-env.acct().bytes.Load() {
		goruntime.GC()
		if 4*n > env.HostLimit-env.acct().bytes.Load() {
			argError(L, fn, "host memory limit exceeded: a tensor of %d bytes with %d held, limit %d", 4*n, env.acct().bytes.Load(), env.HostLimit)
		}
	}
}

// chargeHost counts a host tensor against HostLimit once; the count drops
// when the tensor is garbage collected.
func (env *Env) chargeHost(L *lua.LState, t *core.Tensor) {
	if env.HostLimit <= 0 || t.OnDevice() {
		return
	}
	key := weak.Make(t)
	env.acct().mu.Lock()
	if env.acct().charged == nil {
		env.acct().charged = map[weak.Pointer[core.Tensor]]bool{}
	}
	seen := env.acct().charged[key]
	env.acct().mu.Unlock()
	if seen {
		return
	}
	n := 4 * t.Numel()
	if env.acct().bytes.Load()+n > env.HostLimit {
		goruntime.GC() // let collected tensors give their bytes back first
		if env.acct().bytes.Load()+n > env.HostLimit {
			argError(L, "tensor", "host memory limit exceeded: a tensor of %d bytes with %d held, limit %d", n, env.acct().bytes.Load(), env.HostLimit)
		}
	}
	env.acct().mu.Lock()
	env.acct().charged[key] = true
	env.acct().mu.Unlock()
	env.acct().bytes.Add(n)
	acct := env.acct() // the cleanup must not reach env: env reaches t through the Lua state
	goruntime.AddCleanup(t, func(n int64) {
		acct.bytes.Add(-n)
		acct.mu.Lock()
		delete(acct.charged, key)
		acct.mu.Unlock()
	}, n)
}

// hostAccount is the count of host tensors a script holds. Cleanups of
// those tensors update it, so it must not lead back to the tensors.
type hostAccount struct {
	bytes   atomic.Int64
	mu      sync.Mutex
	charged map[weak.Pointer[core.Tensor]]bool // host tensors counted in bytes
}

// acct is env's host account, made on first use.
func (env *Env) acct() *hostAccount {
	if env.host == nil {
		env.host = &hostAccount{}
	}
	return env.host
}

// guard turns a Go panic that escapes a binding (a bug) into a Lua error
// naming the function, at the script's line, instead of Go's runtime text;
// the panic value stays on the Go error (Cause) for the host to log.
func guard(name string, f lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(*lua.ApiError); ok {
					panic(r) // a Lua error on its way up
				}
				raise(L, &InternalError{Function: name, Value: r})
			}
		}()
		return f(L)
	}
}

// InternalError is a Go panic inside a gglua function: a bug in gglua, never
// the script's fault. Its message does not repeat the panic's Go text.
type InternalError struct {
	Function string
	Value    any // what was passed to panic
}

func (e *InternalError) Error() string {
	return e.Function + ": internal error in gglua (a bug, please report it); the script's state may be inconsistent"
}

// functions wraps every function of a library with guard, named prefix+key.
func functions(prefix string, m map[string]lua.LGFunction) map[string]lua.LGFunction {
	out := make(map[string]lua.LGFunction, len(m))
	for k, f := range m {
		out[k] = guard(prefix+k, f)
	}
	return out
}

// newFunction is L.NewFunction(guard(name, f)).
func newFunction(L *lua.LState, name string, f lua.LGFunction) *lua.LFunction {
	return L.NewFunction(guard(name, f))
}
