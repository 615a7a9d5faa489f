package runtime_test

import (
	"context"
	"io"
	goruntime "runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestAClosedRuntimeIsCollected: a host creating and closing runtimes (one
// per request) must not keep them. With a host limit (every sandbox has one)
// a host tensor still reachable from the script at Close kept the whole
// runtime forever: the cleanup that returns its bytes captured the Env,
// which reaches the Lua state, which reaches the tensor (runtime.AddCleanup:
// "if ptr is reachable from cleanup or arg, ptr will never be collected").
func TestAClosedRuntimeIsCollected(t *testing.T) {
	for _, code := range []string{"X = tensor{1, 2}", "M = nn.Linear(2, 2)", "return 1"} {
		for _, sandbox := range []bool{false, true} {
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: sandbox, HostLimit: 1 << 30, Stdout: io.Discard, Stderr: io.Discard})
			require.NoError(t, err)
			_, err = rt.DoString(context.Background(), code)
			require.NoError(t, err)
			rt.Close()
			w := weak.Make(rt)
			rt = nil
			for i := 0; i < 3; i++ {
				goruntime.GC()
			}
			assert.Nil(t, w.Value(), "%q (sandbox %v): the closed runtime is still reachable", code, sandbox)
		}
	}
}

// TestValuesPassedThroughPcallAreCollected: what a pcall passed in or got
// back is not kept once the script lets go of it. Every nn module's forward
// runs through pcall, and a step's activations that nothing reaches any
// more are what gglua frees before a graph computes (core's
// dropUnreachable); a thread waiting for reuse kept the last call's
// arguments and results through its finished frame.
func TestValuesPassedThroughPcallAreCollected(t *testing.T) {
	for _, call := range []string{
		"local ok, r = pcall(function(v) return v end, X)", // in and out
		"pcall(function() local y = X end)",                // an upvalue's value, read in the callee
		"local ok = xpcall(function() return X end, print)",
	} {
		rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard, Stderr: io.Discard})
		require.NoError(t, err)
		_, err = rt.DoString(context.Background(), "X = tensor.zeros(4)")
		require.NoError(t, err)
		x, err := rt.Tensor("X")
		require.NoError(t, err)
		w := weak.Make(x)
		x = nil
		_, err = rt.DoString(context.Background(), "do "+call+" end X = nil")
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			goruntime.GC()
		}
		assert.Nil(t, w.Value(), "%s: the tensor is still reachable", call)
		rt.Close()
	}
}
