package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUMatchesCPU runs tests/gpu/compare.lua when a CUDA backend library
// is at hand (GGLUA_BACKEND_PATH); CI has no GPU, so it is skipped there.
func TestGPUMatchesCPU(t *testing.T) {
	path := os.Getenv("GGLUA_BACKEND_PATH")
	if path == "" {
		t.Skip("no GPU backend: set GGLUA_BACKEND_PATH to the folder of libggml-cuda.so")
	}
	if _, err := os.Stat(filepath.Join(path, "libggml-cuda.so")); err != nil {
		t.Skipf("no libggml-cuda.so in %s", path)
	}
	out, err := exec.Command(gglua, "gpu/compare.lua", "cuda").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "gpu matches cpu")
	out, err = exec.Command(gglua, "gpu/semantics.lua", "cuda").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "gpu semantics match cpu")
}
