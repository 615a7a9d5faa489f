package ggmlcgo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ggmlInclude finds the include folder of the pinned module, the one this
// package is linked against.
func ggmlInclude(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ollama/ollama").Output()
	require.NoError(t, err, "go list -m github.com/ollama/ollama")
	dir := filepath.Join(strings.TrimSpace(string(out)), "ml", "backend", "ggml", "ggml", "include")
	require.DirExists(t, dir)
	return dir
}

func compileABI(t *testing.T, headerDir string) (string, error) {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	cmd := exec.Command(cc, "-std=c11", "-fsyntax-only", "-Wall", "-Werror",
		"-I", ggmlInclude(t), "-I", filepath.Join(ggmlInclude(t), "..", "src"), "-I", headerDir, filepath.Join("testdata", "abi_check.c"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDeclarationsMatchPinnedHeaders compiles gglua_ggml.h in one translation
// unit with ggml's own headers: a prototype that differs is a compile error,
// and testdata/abi_check.c asserts every mirrored struct field and enum value.
func TestDeclarationsMatchPinnedHeaders(t *testing.T) {
	out, err := compileABI(t, ".")
	require.NoError(t, err, "ABI check failed:\n%s", out)
}

// TestABICheckCanFail proves the check above is not vacuous: a header with one
// wrong prototype and one shifted struct field must be rejected.
func TestABICheckCanFail(t *testing.T) {
	src, err := os.ReadFile("gglua_ggml.h")
	require.NoError(t, err)
	cases := map[string][2]string{
		"prototype": {"size_t ggml_nbytes(const struct ggml_tensor * tensor);", "size_t ggml_nbytes(const struct ggml_tensor * tensor, int extra);"},
		"layout":    {"    size_t view_offs;\n", "    int view_offs;\n"},
		"enum":      {"X(GGML_TYPE_BF16, 30)", "X(GGML_TYPE_BF16, 31)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, string(src), c[0])
			dir := t.TempDir()
			broken := strings.Replace(string(src), c[0], c[1], 1)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "gglua_ggml.h"), []byte(broken), 0o644))
			// abi_check.c includes "gglua_ggml.h" relative to itself first, so
			// compile a copy that sits beside the broken header.
			check, err := os.ReadFile(filepath.Join("testdata", "abi_check.c"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "abi_check.c"), check, 0o644))
			cc := os.Getenv("CC")
			if cc == "" {
				cc = "gcc"
			}
			out, err := exec.Command(cc, "-std=c11", "-fsyntax-only", "-I", ggmlInclude(t), "-I", dir,
				filepath.Join(dir, "abi_check.c")).CombinedOutput()
			require.Error(t, err, "a broken declaration compiled:\n%s", out)
		})
	}
}
