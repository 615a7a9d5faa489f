package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The failures a host tells apart with errors.Is on what DoString and
// DoFile return; context.Canceled and context.DeadlineExceeded come back
// the same way when the run's context ended it.
var (
	ErrBudget   = core.ErrBudget   // an allocation past the residency budget (Options.MemLimit, residency.limit)
	ErrStale    = core.ErrStale    // a tensor whose memory a pool reset freed
	ErrShape    = core.ErrShape    // shapes that do not fit an op
	ErrArgument = core.ErrArgument // a bad argument to a gglua function
	ErrClosed   = errors.New("runtime: used after Close")
	// ErrBusy: another goroutine's call is running on the runtime, which
	// runs one call at a time.
	ErrBusy = errors.New("runtime: in use by another goroutine (a Runtime runs one call at a time)")
	// ErrMemory: the call grew the Go heap past Options.HeapLimit (the
	// watchdog ended it), or a string function of the sandbox would have
	// made a result past its size cap.
	ErrMemory = errors.New("memory limit exceeded")
	// ErrConvert: a value that cannot cross between Lua and Go: a table
	// with a cycle, nested too deep or too big, or a Go type Lua has no
	// value for.
	ErrConvert = errors.New("cannot convert value")
)

// Error is a script's failure: the Lua error as the script saw it (Error()
// is its message, with file and line) and, underneath, the Go error that
// caused it, which errors.Is and errors.As reach.
type Error struct {
	Lua   *lua.ApiError
	Cause error // nil for an error raised by the script itself
}

func (e *Error) Error() string { return e.Lua.Error() }

// Unwrap gives errors.Is/As the cause and the Lua error.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Lua}
	}
	return []error{e.Cause, e.Lua}
}

// scriptError wraps err, the error of a Lua call, with its Go cause.
func (rt *Runtime) scriptError(ctx context.Context, err error) error {
	var apiErr *lua.ApiError
	if !errors.As(err, &apiErr) {
		return err
	}
	if apiErr.Type == lua.ApiErrorPanic {
		// A Go panic that no binding's guard caught (a registered function,
		// the Lua VM): its Go text is kept for the host, not shown as the
		// script's error.
		return &Error{
			Lua:   &lua.ApiError{Type: lua.ApiErrorRun, Object: lua.LString("internal error: a Go function panicked (a bug in gglua or in a function the host registered; please report it)")},
			Cause: fmt.Errorf("go panic: %s", apiErr.Object),
		}
	}
	out := &Error{Lua: apiErr}
	switch {
	case ctx.Err() != nil:
		out.Cause = context.Cause(ctx)
		if errors.Is(out.Cause, ErrMemory) {
			// The watchdog cancelled the call: the Lua error reads "context
			// canceled"; say why.
			out.Lua = memoryError(apiErr, out.Cause)
		}
	case apiErr.Object != nil:
		msg := apiErr.Object.String()
		if out.Cause = rt.causes.cause(msg); out.Cause == nil {
			out.Cause = rt.env.Cause(msg)
		}
	}
	return out
}

// memoryError is apiErr with its message naming cause instead of a
// cancelled context.
func memoryError(apiErr *lua.ApiError, cause error) *lua.ApiError {
	msg, ok := apiErr.Object.(lua.LString)
	if !ok || strings.Contains(string(msg), ErrMemory.Error()) {
		return apiErr
	}
	text := strings.Replace(string(msg), context.Canceled.Error(), cause.Error(), 1)
	if text == string(msg) {
		text += " (" + cause.Error() + ")"
	}
	out := *apiErr
	out.Object = lua.LString(text)
	return &out
}
