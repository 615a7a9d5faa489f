// Package tests holds gglua's end-to-end tests: Lua test files run in fresh
// runtimes, and the gglua command run as a user runs it.
package tests

import (
	"context"
	"io"
	"os"
	"os/exec"
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
			t.Setenv("GGLUA_TEST_TMP", t.TempDir())
			// These files read and write files, which the sandbox forbids.
			sandbox := filepath.Base(f) != "checkpoint.lua" && filepath.Base(f) != "data.lua"
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: sandbox, Stdout: io.Discard})
			require.NoError(t, err)
			defer rt.Close()
			_, err = rt.DoFile(context.Background(), f)
			require.NoError(t, err)
		})
	}
}

// TestLuaFilesAsOnADevice runs every tests/lua/*.lua with GGLUA_ASYNC=1,
// where the CPU backend computes as an asynchronous GPU does (ggmlcgo's
// ComputeAsDevice): graphs on lanes, each left queued until a read waits
// for it, the host's writes meanwhile deferred, backward queuing the
// forward, a read queuing what is pending. The CPU's computes are done
// when they return, so no value can race; what fails here is bookkeeping
// that would compute or read the wrong thing on a GPU.
func TestLuaFilesAsOnADevice(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("lua", "*.lua"))
	require.NoError(t, err)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cmd := exec.Command(gglua, "--threads", "1", f)
			cmd.Env = append(os.Environ(), "GGLUA_ASYNC=1", "GGLUA_TEST_TMP="+t.TempDir())
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
		})
	}
}

// TestSandboxKeepsScriptsOffTheFilesystem: a sandboxed runtime has no io,
// os or loaders, and gglua's own file functions refuse too.
func TestSandboxKeepsScriptsOffTheFilesystem(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	require.NoError(t, err)
	defer rt.Close()
	for _, code := range []string{
		`return io.open("/etc/passwd")`, `return os.exit(1)`, `return dofile("x.lua")`, `return require("x")`,
		`return loadstring("return 1")`, `return debug.getinfo(1)`,
		`return data.csv("/etc/passwd")`, `return tensor.load("/etc/passwd")`, `tensor.save("/tmp/x.gguf", {})`,
	} {
		_, err := rt.DoString(context.Background(), code)
		require.Error(t, err, code)
	}
}
