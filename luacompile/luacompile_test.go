package luacompile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/luacompile"
)

// run runs the script at path compiled by load and returns what it
// printed; a run past a few seconds is stopped.
func run(t *testing.T, path string, load func(L *lua.LState, src, name string) (*lua.LFunction, error)) (string, error) {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	L := lua.NewState()
	defer L.Close()
	var out strings.Builder
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		for i := 1; i <= L.GetTop(); i++ {
			if i > 1 {
				out.WriteByte('\t')
			}
			out.WriteString(L.ToStringMeta(L.Get(i)).String())
		}
		out.WriteByte('\n')
		return 0
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	fn, err := load(L, string(src), path)
	require.NoError(t, err)
	L.Push(fn)
	err = L.PCall(0, 0, nil)
	return out.String(), err
}

func compiled(L *lua.LState, src, name string) (*lua.LFunction, error) {
	return luacompile.Load(L, strings.NewReader(src), name)
}

func plain(L *lua.LState, src, name string) (*lua.LFunction, error) {
	return L.Load(strings.NewReader(src), name)
}

// TestScriptsAsLua51: each testdata script prints what lua5.1 printed
// (its .out file), where gopher-lua's own compiler gives other values or
// never ends.
func TestScriptsAsLua51(t *testing.T) {
	scripts, err := filepath.Glob("testdata/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	for _, path := range scripts {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(path, ".lua") + ".out")
			require.NoError(t, err)
			got, err := run(t, path, compiled)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)

			// The test can fail: gopher-lua's compiler alone gets these wrong.
			bad, err := run(t, path, plain)
			assert.True(t, err != nil || bad != string(want), "gopher-lua alone now gets %s right: the rewrite may go", path)
		})
	}
}

// TestErrorsKeepTheirLines: code after a rewritten statement reports the
// line it is on, and a syntax error is an error.
func TestErrorsKeepTheirLines(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	fn, err := luacompile.Load(L, strings.NewReader("local a, b = 1, 2\na, b = b, a\n\nerror('here')"), "chunk")
	require.NoError(t, err)
	L.Push(fn)
	err = L.PCall(0, 0, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chunk:4: here")

	_, err = luacompile.Load(L, strings.NewReader("a, b = = 1"), "chunk")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chunk")
}

// With Options.Concat every ".." calls the named global with a chain's
// operands in order, a left-grouped part as a call of its own, inside
// functions, table constructors, keys and conditions alike.
func TestConcatBecomesACall(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	var calls []string
	L.SetGlobal("CAT", L.NewFunction(func(L *lua.LState) int {
		var parts []string
		for i := 1; i <= L.GetTop(); i++ {
			parts = append(parts, L.ToString(i))
		}
		calls = append(calls, strings.Join(parts, ","))
		L.Push(lua.LString(strings.Join(parts, "")))
		return 1
	}))
	src := `local a, b, c = "a", "b", "c"
local t = {[a .. b] = (a .. b) .. c}
local function f(x) return x .. "!" end
if a .. c == "ac" then t.z = f(a .. b .. c .. 1) end
return t.ab, t.z`
	fn, err := luacompile.LoadWith(L, strings.NewReader(src), "concat", luacompile.Options{Concat: "CAT"})
	require.NoError(t, err)
	L.Push(fn)
	require.NoError(t, L.PCall(0, 2, nil))
	assert.Equal(t, "abc", L.ToString(-2))
	assert.Equal(t, "abc1!", L.ToString(-1))
	assert.ElementsMatch(t, []string{"a,b", "a,b", "ab,c", "a,c", "a,b,c,1", "abc1,!"}, calls)

	calls = nil
	fn, err = luacompile.Load(L, strings.NewReader(src), "plain")
	require.NoError(t, err)
	L.Push(fn)
	require.NoError(t, L.PCall(0, 2, nil))
	assert.Empty(t, calls, "without the option the VM concatenates")
}

// With Options.MaxConstants a function of more distinct constants is a
// compile error naming its line, before the compiler runs; each function
// counts its own.
func TestMaxConstantsRefusesBeforeCompiling(t *testing.T) {
	list := func(n int, f string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(f, i)
		}
		return strings.Join(parts, ", ")
	}
	o := luacompile.Options{MaxConstants: 100}
	_, err := luacompile.CompileWith(strings.NewReader("local t = {"+list(60, "%d")+"}\nlocal u = {"+list(60, "'s%d'")+"}"), "big", o)
	require.ErrorContains(t, err, "big:1: a function with 120 distinct constants, more than the 100")
	_, err = luacompile.CompileWith(strings.NewReader("local x = 1\nlocal f = function()\n return {"+list(150, "%d.5")+"}\nend"), "inner", o)
	require.ErrorContains(t, err, "inner:2: a function with 150 distinct constants")
	_, err = luacompile.CompileWith(strings.NewReader("local f = function() return {"+list(90, "%d")+"} end\nlocal g = function() return {"+list(90, "%d")+"} end\nreturn {"+list(90, "'k%d'")+"}"), "split", o)
	require.NoError(t, err, "three functions of 90 each (and repeats count once)")
	_, err = luacompile.CompileWith(strings.NewReader("return {"+list(500, "%d")+"}"), "unbounded", luacompile.Options{})
	require.NoError(t, err)
}
