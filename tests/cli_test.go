package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var gglua string // the binary under test, built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gglua-cli")
	if err != nil {
		panic(err)
	}
	gglua = filepath.Join(dir, "gglua")
	build := exec.Command("go", "build", "-o", gglua, "../cmd/gglua")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building gglua: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runCLI runs gglua with args and returns stdout, stderr and the exit status.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(gglua, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

func TestCLIFirstEndToEndPath(t *testing.T) {
	out, _, code := runCLI(t, "", "-e", `print(to_gpu(tensor{{1,2},{3,4}}, "persistent"):scope())`)
	assert.Equal(t, 0, code)
	assert.Equal(t, "persistent\n", out)
}

func TestCLIScriptGetsArgsAndErrorsGiveFileLine(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.lua")
	require.NoError(t, os.WriteFile(script, []byte("print(arg[0], arg[1], arg[2])\nlocal x = tensor{{1,2},{3}}\n"), 0o644))
	out, errOut, code := runCLI(t, "", script, "a", "b")
	assert.Equal(t, script+"\ta\tb\n", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, script+":2: tensor: ragged table")
	assert.Contains(t, errOut, "stack traceback")
}

func TestCLIMemLimitIsTheBudget(t *testing.T) {
	_, errOut, code := runCLI(t, "", "--mem-limit", "1MiB", "-e", "to_gpu(tensor.zeros(1024, 1024))")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "budget exceeded")
	out, _, code := runCLI(t, "", "--mem-limit", "2MiB", "-e", "print(residency.limit())")
	assert.Equal(t, 0, code)
	assert.Equal(t, "2097152\n", out)
	_, errOut, code = runCLI(t, "", "--mem-limit", "lots", "-e", "")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "bad size")
}

func TestCLIDevicesVersionAndPipedCode(t *testing.T) {
	out, _, code := runCLI(t, "", "devices")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "cpu")
	out, _, code = runCLI(t, "", "--version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "gglua ")
	out, _, code = runCLI(t, "print(tensor{1,2,3}:numel())\n")
	assert.Equal(t, 0, code)
	assert.Equal(t, "3\n", out)
	_, errOut, code := runCLI(t, "", "--device", "tpu", "-e", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `device "tpu" is not available`)
}

// TestCLIReportsSlowKernels: a build without SIMD flags says so on stderr,
// a fast one only with --verbose.
func TestCLIReportsSlowKernels(t *testing.T) {
	_, quiet, _ := runCLI(t, "", "-e", "")
	_, verbose, _ := runCLI(t, "", "--verbose", "-e", "")
	assert.Contains(t, verbose, "ggml CPU kernels compiled with:")
	if strings.Contains(verbose, "avx2") {
		assert.Empty(t, quiet)
	} else {
		assert.Contains(t, quiet, "slow portable kernels")
	}
}
