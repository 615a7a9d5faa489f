package luabind

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// liveNames opens the gglua globals in a fresh state and lists every name
// they reach: the globals Open adds (whatever library adds them), walked
// through their tables, the tensor methods, and the methods of what the
// constructors return (optimizers, schedulers, loaders, progress bars).
func liveNames(t *testing.T) map[string]bool {
	t.Helper()
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	L := lua.NewState()
	t.Cleanup(func() {
		Detach(L)
		L.Close()
	})
	before := map[string]bool{}
	L.G.Global.ForEach(func(k, _ lua.LValue) { before[k.String()] = true })
	env := &Env{Engine: e, Threads: 1}
	Open(L, env)
	var roots []string
	L.G.Global.ForEach(func(k, v lua.LValue) {
		if !before[k.String()] || L.GetGlobal(k.String()) != v {
			roots = append(roots, k.String())
		}
	})
	sort.Strings(roots)
	names := map[string]bool{}
	for _, it := range env.surface(L, roots) {
		names[it.name] = true
	}
	instances := []struct{ prefix, make string }{
		{"optimizer", `return optim.sgd({tensor.param(tensor.ones(1))})`},
		{"scheduler", `return optim.lr_scheduler.step(optim.sgd({tensor.param(tensor.ones(1))}), {step_size = 1})`},
		{"bar", `return progress(1)`},
	}
	for _, in := range instances {
		require.NoError(t, L.DoString(in.make), in.prefix)
		tbl, ok := L.Get(-1).(*lua.LTable)
		require.True(t, ok, in.prefix)
		L.Pop(1)
		for _, k := range sortedKeys(tbl) {
			if _, ok := tbl.RawGetString(k).(*lua.LFunction); ok {
				names[in.prefix+":"+k] = true
			}
		}
	}
	// A loader's one method is reached through its __index.
	require.NoError(t, L.DoString(`local l = data.loader(tensor.ones(2, 1)); assert(type(l.reset) == "function")`))
	names["loader:reset"] = true
	// A model (llm.load's) needs a file: its methods are listed in Go.
	for k := range env.modelMethods() {
		names["model:"+k] = true
	}
	for k := range env.loraMethods() {
		names["lora:"+k] = true
	}
	return names
}

// Every name the globals reach has a doc entry (a library: a section), and
// every entry names something that exists: docs.txt cannot drift.
func TestDocsCoverTheLuaSurface(t *testing.T) {
	d, err := loadDocs()
	require.NoError(t, err, "luabind/docs.txt does not parse")
	missing, stale := docDrift(d, liveNames(t))
	if len(missing) > 0 {
		t.Errorf("%d names have no entry in luabind/docs.txt; add a line `signature -- summary` for each under its [section] (a library is a [section]), then run `go run ./scripts/gendocs`:\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("%d entries in luabind/docs.txt name nothing the globals reach; remove or rename them, then run `go run ./scripts/gendocs`:\n%s",
			len(stale), strings.Join(stale, "\n"))
	}
}

// docDrift is the names live has and d does not document, and the names d
// documents that live does not have, each sorted.
func docDrift(d *apiDocs, live map[string]bool) (missing, stale []string) {
	documented := map[string]bool{}
	for _, s := range d.sections {
		if s.IsLibrary() {
			documented[s.Key] = true
		}
		for _, e := range s.Entries {
			documented[e.Name] = true
		}
	}
	for n := range live {
		if !documented[n] {
			missing = append(missing, n)
		}
	}
	for n := range documented {
		if !live[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	return missing, stale
}

// The drift check reports exactly the undocumented names and the entries
// for nothing.
func TestDocDriftNamesWhatDiffers(t *testing.T) {
	d, err := parseDocs("[tensor] T.\ntensor.zeros(size...) -- Z.\nx:gone() -- Removed.\n[globals x] G.\nhelp() -- H.")
	require.NoError(t, err)
	missing, stale := docDrift(d, map[string]bool{"tensor": true, "tensor.zeros": true, "help": true, "x:new_op": true, "nn": true})
	assert.Equal(t, []string{"nn", "x:new_op"}, missing)
	assert.Equal(t, []string{"x:gone"}, stale)
}

// docs.txt's format: malformed lines are errors naming the line.
func TestDocsParseRefusesMalformedLines(t *testing.T) {
	for _, src := range []string{
		"x:abs() -- before any section",
		"[tensor] t\nx:abs()",
		"[tensor] t\nx:abs() -- a\nx:abs() -- twice",
		"[tensor] t\n[tensor] again",
	} {
		_, err := parseDocs(src)
		assert.Error(t, err, src)
	}
	d, err := parseDocs("[tensor] The library.\ntensor.zeros(size...) -- Zeros.\nx:matmul(other) -- Product.\n[globals and more] G.\nhelp(x) -- Help.")
	require.NoError(t, err)
	assert.Equal(t, "size...", strings.TrimSuffix(strings.TrimPrefix(d.byName["tensor.zeros"].Signature, "tensor.zeros("), ")"))
	assert.Equal(t, "tensor", d.byName["x:matmul"].Section)
	assert.Equal(t, []string{"tensor", "help"}, d.roots())
}

// docs/API.md is what gendocs makes of docs.txt now.
func TestAPIMarkdownIsUpToDate(t *testing.T) {
	want, err := APIMarkdown()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "docs", "API.md"))
	require.NoError(t, err, "docs/API.md is missing: run `go run ./scripts/gendocs` (or `go generate ./luabind`)")
	assert.True(t, string(got) == want, "docs/API.md is out of date with luabind/docs.txt: run `go run ./scripts/gendocs` (or `go generate ./luabind`)")
}

// An example is kept verbatim, indent and all, even lines that would be
// comments, sections or entries outside it; a malformed one is an error
// naming its line.
func TestDocsParseExamples(t *testing.T) {
	d, err := parseDocs("[nn] N.\nnn.Linear(i, o) -- L.\n```lua\nfor i = 1, 2 do\n  print(#t[i]) -- x\n# not a comment\n[not a section]\nend\n```\n[data] D.")
	require.NoError(t, err)
	assert.Equal(t, "for i = 1, 2 do\n  print(#t[i]) -- x\n# not a comment\n[not a section]\nend", d.byKey["nn"].Example)
	assert.Empty(t, d.byKey["data"].Example)
	assert.Len(t, d.byKey["nn"].Entries, 1)
	for src, line := range map[string]string{
		"```lua\nx()\n```": "docs.txt:1",
		"[nn] N.\n```lua\nx()\n```\n```lua\ny()\n```": "docs.txt:5",
		"[nn] N.\n\n```lua\nx()":                      "docs.txt:3",
		"[nn] N.\n```lua\n```":                        "docs.txt:2",
	} {
		_, err := parseDocs(src)
		assert.ErrorContains(t, err, line, src)
	}
}

// One example per library: every library's section, and every section
// holding global functions (autograd, progress, help), has one. They run
// in tests/docs_examples_test.go, from docs/API.md.
func TestEveryLibraryHasAnExample(t *testing.T) {
	d, err := loadDocs()
	require.NoError(t, err)
	globals := map[string]bool{}
	for _, n := range d.roots() {
		if e := d.byName[n]; e != nil {
			globals[e.Section] = true
		}
	}
	for _, s := range d.sections {
		if (s.IsLibrary() || globals[s.Key]) && s.Example == "" {
			t.Errorf("section [%s] of luabind/docs.txt has no example: add a short one between ```lua and ``` lines at its end", s.Key)
		}
	}
	md, err := APIMarkdown()
	require.NoError(t, err)
	assert.Contains(t, md, "\nExample:\n\n```lua\n"+d.byKey["optim"].Example+"\n```\n")
}

// help("library") ends with the library's example, indented.
func TestHelpShowsTheExample(t *testing.T) {
	L, out := helpState(t)
	d, err := loadDocs()
	require.NoError(t, err)
	want := "Example:\n  " + strings.ReplaceAll(d.byKey["optim"].Example, "\n", "\n  ") + "\n"
	assert.True(t, strings.HasSuffix(helpOutput(t, L, out, `help("optim")`), want), "help(\"optim\") does not end with its example")
	assert.Contains(t, helpOutput(t, L, out, `help("bar")`), "Example:\n  local bar = progress(")
}
