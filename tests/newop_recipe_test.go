package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewOpRecipe follows docs/ARCHITECTURE.md's "Where a new op goes" for
// a throwaway elementwise op, x:recipe_probe() = x², on top of today's
// files: each step's edit goes into a copy handed to the go command by
// -overlay (the tree is not touched), then the tests the recipe names run
// on it. The recipe fails here when a step stops being true: a file or an
// anchor it names moved, or an edit it describes no longer builds or passes.
func TestNewOpRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("-short skips the new-op recipe: it builds core and luabind again (make test runs it)")
	}
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(repo, rel))
		require.NoError(t, err)
		return string(b)
	}

	// The recipe names every step this test follows.
	_, recipe, ok := strings.Cut(read("docs/ARCHITECTURE.md"), "\n## Where a new op goes\n")
	require.True(t, ok, "docs/ARCHITECTURE.md has no \"## Where a new op goes\" section")
	recipe, _, _ = strings.Cut(recipe, "\n## ")
	for _, step := range []string{"ggmlcgo/gglua_ggml.h", "GGLUA_UNARY_OPS", "core/ops_elementwise.go",
		"core/ops_elementwise_test.go", "luabind/tensor.go", "luabind/docs.txt", "go run ./scripts/gendocs",
		"tests/options_test.go", "docs/API.md"} {
		assert.Contains(t, recipe, step, "the recipe no longer names this step")
	}

	overlay := map[string]string{} // repository path -> its new text
	edit := func(rel, anchor, insert string, after bool) {
		t.Helper()
		text := read(rel)
		i := strings.Index(text, anchor)
		require.GreaterOrEqual(t, i, 0, "%s no longer holds %q: update the recipe and this test", rel, anchor)
		i = strings.LastIndex(text[:i], "\n") + 1 // the anchor's line
		if after {
			i += strings.Index(text[i:], "\n") + 1
		}
		overlay[rel] = text[:i] + insert + text[i:]
	}

	// 1. ggml's op is declared in GGLUA_UNARY_OPS (sqr already is).
	unary := regexp.MustCompile(`#define GGLUA_UNARY_OPS\(X\) \\\n[^\n]*\bX\(sqr\)`)
	require.Regexp(t, unary, read("ggmlcgo/gglua_ggml.h"))

	// 2. The core op with its gradient, in its family's file.
	overlay["core/ops_elementwise.go"] = read("core/ops_elementwise.go") + `
// RecipeProbe is x², a throwaway op of tests/newop_recipe_test.go.
func (e *Engine) RecipeProbe(x *Tensor) (*Tensor, error) {
	return e.elementwise("sqr", x, savesA, func(g, x, y *Tensor) (*Tensor, error) {
		gx, err := e.Mul(g, x)
		if err != nil {
			return nil, err
		}
		return e.Scale(gx, 2)
	})
}
`
	// 3. One gradient case, next to the recipe's worked example.
	edit("core/ops_elementwise_test.go", `{"expm1", []*Tensor{`, `		{"recipe probe", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.RecipeProbe(in[0])) },
			0.25 + 2.25 + 4, [][]float64{{1, -3, 4}}},
`, false)
	// 4. Its line in the tensor methods' table.
	edit("luabind/tensor.go", `"expm1":`, "\t\t\"recipe_probe\": env.unary(\"recipe_probe\", (*core.Engine).RecipeProbe),\n", true)
	// 5. Its entry in docs.txt, under [tensor methods].
	edit("luabind/docs.txt", "x:expm1() -- ", "x:recipe_probe() -- Elementwise x^2 (a throwaway op of tests/newop_recipe_test.go).\n", true)
	// 6. It takes no options table, so tests/options_test.go needs no call.
	require.Contains(t, read("tests/options_test.go"), "var optionCalls = map[string]string{")
	// A Lua check of the new method, as a script calls it.
	overlay["luabind/recipe_probe_test.go"] = `package luabind

import (
	"testing"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

func TestRecipeProbeFromLua(t *testing.T) {
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	L := lua.NewState()
	defer L.Close()
	Open(L, &Env{Engine: e, Threads: 1})
	defer Detach(L)
	require.NoError(t, L.DoString(` + "`" + `
		local x = tensor.param(tensor{0.5, -1.5, 2})
		local y = with_grad_tape(function() return x:recipe_probe():sum() end)
		backward(y)
		assert(math.abs(y:item() - 6.5) < 1e-6, "value " .. y:item())
		local g = x.grad:totable()
		assert(g[1] == 1 and g[2] == -3 and g[3] == 4, "gradient")
		assert(tensor.recipe_probe(tensor{3}):item() == 9)` + "`" + `))
}
`

	dir := t.TempDir()
	replace := map[string]string{}
	for rel, text := range overlay {
		f := filepath.Join(dir, strings.ReplaceAll(rel, "/", "_"))
		require.NoError(t, os.WriteFile(f, []byte(text), 0o644))
		replace[filepath.Join(repo, rel)] = f
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, b, 0o644))
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	// The tests the recipe's steps meet: the gradient case, the docs' coverage
	// of the Lua surface, and the method called from Lua.
	out := goCmd("test", "-overlay", overlayFile, "-count=1", "-v",
		"-run", `^(TestElementwiseGradients|TestDocsCoverTheLuaSurface|TestRecipeProbeFromLua)$/^(reference|gradcheck)$/^recipe_probe$`,
		"./core", "./luabind")
	for _, ran := range []string{"TestElementwiseGradients/reference/recipe_probe", "TestElementwiseGradients/gradcheck/recipe_probe",
		"TestDocsCoverTheLuaSurface", "TestRecipeProbeFromLua"} {
		assert.Contains(t, out, "--- PASS: "+ran+" ", "did not run")
	}

	// 7. go run ./scripts/gendocs writes the entry into docs/API.md (here into a
	// scratch docs/ folder: gendocs writes docs/API.md under its working folder).
	gendocs := filepath.Join(dir, "gendocs")
	goCmd("build", "-overlay", overlayFile, "-o", gendocs, "./scripts/gendocs")
	scratch := filepath.Join(dir, "scratch")
	require.NoError(t, os.MkdirAll(filepath.Join(scratch, "docs"), 0o755))
	cmd := exec.Command(gendocs)
	cmd.Dir = scratch
	outb, err := cmd.CombinedOutput()
	require.NoError(t, err, "gendocs: %s", outb)
	api, err := os.ReadFile(filepath.Join(scratch, "docs", "API.md"))
	require.NoError(t, err)
	assert.Contains(t, string(api), "| `x:recipe_probe()` | Elementwise x^2")
}
