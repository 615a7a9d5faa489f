package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// ExampleError shows a host telling a budget overrun apart from other
// failures without reading the message.
func ExampleError() {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, MemLimit: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	_, err = rt.DoString(context.Background(), `return to_gpu(tensor.zeros(1024, 1024))`)
	fmt.Println(errors.Is(err, runtime.ErrBudget), errors.Is(err, runtime.ErrShape))
	// Output: true false
}

func TestErrorsAreToldApartWithErrorsIs(t *testing.T) {
	sentinels := map[string]error{
		"budget": runtime.ErrBudget, "stale": runtime.ErrStale, "shape": runtime.ErrShape,
		"argument": runtime.ErrArgument, "deadline": context.DeadlineExceeded,
	}
	cases := []struct {
		name, code, want string
		text             string // a piece of the Lua message the user sees
	}{
		{"budget", `return to_gpu(tensor.zeros(1024, 1024))`, "budget", "budget exceeded"},
		{"stale", `local x = to_gpu(tensor{1, 2}); residency.reset("pass"); return x:sum():item()`, "stale", "reset"},
		{"shape", `return tensor.zeros(2, 3):matmul(tensor.zeros(2, 3))`, "shape", "matmul: cannot multiply shapes 2x3 and 2x3"},
		{"broadcast", `return tensor.zeros(2, 3) + tensor.zeros(4)`, "shape", "do not broadcast"},
		{"argument", `return tensor.zeros(2):clamp(1, 0)`, "argument", "clamp: min 1 is greater than max 0"},
		{"in-place shape", `return tensor.zeros(2):copy_(tensor.zeros(3))`, "shape", "<string>:1: copy_: source shape 3"},
		{"bad option", `return optim.sgd({tensor.param(tensor{1})}, {lr = 0.1, momentun = 0.9})`, "argument", "unknown option momentun"},
		{"caught and raised again", `local ok, e = pcall(function() return tensor.zeros(2, 3):matmul(tensor.zeros(2, 3)) end); error(e, 0)`, "shape", "matmul"},
		{"deadline", `while true do end`, "deadline", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, MemLimit: 1 << 20})
			require.NoError(t, err)
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err = rt.DoString(ctx, c.code)
			require.Error(t, err)
			for name, s := range sentinels {
				assert.Equal(t, name == c.want, errors.Is(err, s), "errors.Is(err, %s) for %q: %v", name, c.code, err)
			}
			assert.Contains(t, err.Error(), c.text)
			var se *runtime.Error
			require.ErrorAs(t, err, &se, "a script's failure is a *runtime.Error")
			if c.name != "deadline" && c.name != "caught and raised again" {
				assert.Contains(t, err.Error(), "<string>:1:", "the message names the script line")
			}
		})
	}
}

func TestCancelIsContextCanceled(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	require.NoError(t, err)
	defer rt.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = rt.DoString(ctx, `while true do end`)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, runtime.ErrBudget)
}

func TestAScriptsOwnErrorHasNoGoCause(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoString(context.Background(), `error("my own")`)
	var se *runtime.Error
	require.ErrorAs(t, err, &se)
	assert.Nil(t, se.Cause)
	assert.Contains(t, err.Error(), "my own")
}

func TestClosedRuntimeIsAnErrorAndCloseIsIdempotent(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	require.NoError(t, err)
	rt.Close()
	rt.Close()
	_, err = rt.DoString(context.Background(), "return 1")
	assert.ErrorIs(t, err, runtime.ErrClosed)
	_, err = rt.DoFile(context.Background(), "x.lua")
	assert.ErrorIs(t, err, runtime.ErrClosed)
}

func TestAPanickingRegisteredFunctionIsAnInternalError(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	require.NoError(t, err)
	defer rt.Close()
	rt.Register("boom", func(args []any) ([]any, error) {
		var m map[string]int
		m["x"] = 1
		return nil, nil
	})
	_, err = rt.DoString(context.Background(), `return boom()`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "internal error")
	assert.NotContains(t, err.Error(), "nil map")
	var se *runtime.Error
	require.ErrorAs(t, err, &se)
	assert.ErrorContains(t, se.Cause, "nil map", "the host still gets the panic")
}
