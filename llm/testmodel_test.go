package llm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeTestModel writes the TestShape model with random weights (seeded)
// in f32 to path, and returns its vocabulary size.
func writeTestModel(t *testing.T, path string, seed int64) int {
	require.NoError(t, WriteRandom(path, TestShape, seed))
	return TestShape.Vocab
}

// quantizedPair writes the test model (seed) in f32 and, quantized by
// llama.cpp, in typ, into a temporary folder.
func quantizedPair(t *testing.T, seed int64, typ string) (ref llamaRef, f32, quantized string) {
	ref = findLlamaRef(t)
	dir := t.TempDir()
	f32, quantized = filepath.Join(dir, "f32.gguf"), filepath.Join(dir, typ+".gguf")
	writeTestModel(t, f32, seed)
	ref.run(t, "--quantize", f32, quantized, typ)
	return ref, f32, quantized
}

// llamaRef is the reference: llama.cpp's prebuilt library through
// scripts/reference/llama_logits.c, set up by scripts/reference/llama_ref.sh
// in .llama-ref (or GGLUA_LLAMA_REF). Absent, the test is skipped, unless
// GGLUA_REQUIRE_LLAMA_REF is set (CI sets it: there it must run).
type llamaRef struct{ bin, backends, src string }

func findLlamaRef(t *testing.T) llamaRef {
	t.Helper()
	dir := os.Getenv("GGLUA_LLAMA_REF")
	if dir == "" {
		dir = filepath.Join("..", ".llama-ref")
	}
	r := llamaRef{bin: filepath.Join(dir, "llama_logits"), backends: filepath.Join(dir, "npm", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64"),
		src: filepath.Join(dir, "llama.cpp")}
	if _, err := os.Stat(r.bin); err != nil {
		if os.Getenv("GGLUA_REQUIRE_LLAMA_REF") != "" {
			t.Fatalf("llama.cpp's reference is missing (%v): run scripts/reference/llama_ref.sh", err)
		}
		t.Skip("llama.cpp's reference is not set up: scripts/reference/llama_ref.sh")
	}
	return r
}

// run runs the reference with args and returns its output.
func (r llamaRef) run(t *testing.T, args ...string) string {
	t.Helper()
	return r.runWith(t, "", args...)
}

// runWith is run with stdin as the reference's standard input.
func (r llamaRef) runWith(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.bin, append([]string{r.backends}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "llama_logits %v:\n%s", args, stderr.String())
	return string(out)
}

// logits is llama.cpp's logits for ids on the model at path, [T][vocab]
// (flags, such as --lora ADAPTER, go before the ids).
func (r llamaRef) logits(t *testing.T, path string, ids []int, flags ...string) [][]float64 {
	args := append([]string{path}, flags...)
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	var rows [][]float64
	for _, line := range strings.Split(strings.TrimSpace(r.run(t, args...)), "\n") {
		var row []float64
		for _, f := range strings.Fields(line) {
			v, err := strconv.ParseFloat(f, 64)
			require.NoError(t, err)
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	require.Len(t, rows, len(ids))
	return rows
}
