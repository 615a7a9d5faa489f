package runtime_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestHostileScriptsEndInErrors: each script tries to take the host down;
// each must end in an error, and the runtime (and this process) go on.
func TestHostileScriptsEndInErrors(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, MemLimit: 64 << 20, HostLimit: 256 << 20, Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	for name, code := range map[string]string{
		"device memory bomb": `local t = {} while true do t[#t + 1] = to_gpu(tensor.zeros(256, 256), "persistent") end`,
		"host memory bomb":   `local t = {} for i = 1, 1e6 do t[i] = tensor.ones(2048, 2048) end`,
		"string bomb":        `return #string.rep("x", 1e12)`,
		"deep recursion":     `local function f(n) return f(n + 1) + 1 end return f(1)`,
		"huge tensor":        `return tensor.zeros(1e9, 1e9)`,
		"huge device tensor": `return to_gpu(tensor.zeros(8192, 8192))`,
		"endless loop":       `while true do end`,
		"endless graph":      `local x = tensor{1} while true do x = x + 1 end`,
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			_, err := rt.DoString(ctx, code)
			assert.Error(t, err)
			assert.Less(t, time.Since(start), 5*time.Second)
			// The runtime is still usable after each.
			vals, err := rt.DoString(context.Background(), `residency.reset() collectgarbage() return (tensor{1, 2} * 2):sum():item()`)
			require.NoError(t, err)
			assert.Equal(t, 6.0, vals[0])
		})
	}
}
