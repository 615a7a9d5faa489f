// Package tests holds gglua's end-to-end tests: Lua test files run in fresh
// runtimes, and the gglua command run as a user runs it.
package tests

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestLuaFiles runs every tests/lua/*.lua in a fresh runtime. A failed
// assert reports the Lua file and line.
func TestLuaFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("lua", "*.lua"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
			require.NoError(t, err)
			defer rt.Close()
			_, err = rt.DoFile(context.Background(), f)
			require.NoError(t, err)
		})
	}
}
