package runtime_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lua51 is the output of scripts/reference/lua_patterns.lua: answers for
// patterns and for expressions over the other functions the runtime
// replaces or wraps. A value list holds numbers, strings, booleans and
// "<nil>"; "error" stands for a raised error.
type lua51 struct {
	Patterns []struct {
		S, P                             string
		Init                             *int
		Find, Match, Gsub, Gsub1, Gmatch any
	}
	Exprs []struct {
		Expr   string
		Values any
	}
}

// TestStdlibAsLua51: the reference script, run by the runtime (inside and
// outside a sandbox), gives what it gave under the lua5.1 interpreter
// (testdata/lua51_patterns.json): find, match, gsub and gmatch on 1,600
// subjects and patterns, most made at random, and expressions over
// table.concat, unpack, string.byte, format, rep, sort and coroutines.
// A malformed pattern is an error here as soon as it is compiled; Lua 5.1
// checks lazily, so there it need only fail in one of the functions.
func TestStdlibAsLua51(t *testing.T) {
	raw, err := os.ReadFile("testdata/lua51_patterns.json")
	require.NoError(t, err)
	var want lua51
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Len(t, want.Patterns, 1627)
	for _, sandbox := range []bool{false, true} {
		rt := newRuntime(t, sandbox)
		require.NoError(t, rt.SetGlobal("REFERENCE_RETURN", true))
		out, err := rt.DoFile(context.Background(), "../scripts/reference/lua_patterns.lua")
		require.NoError(t, err)
		var got lua51
		require.NoError(t, json.Unmarshal([]byte(out[0].(string)), &got))
		require.Len(t, got.Patterns, len(want.Patterns))
		for i, w := range want.Patterns {
			g := got.Patterns[i]
			require.Equal(t, w.S+"|"+w.P, g.S+"|"+g.P, "the same case")
			ws := []any{w.Find, w.Match, w.Gsub, w.Gsub1, w.Gmatch}
			gs := []any{g.Find, g.Match, g.Gsub, g.Gsub1, g.Gmatch}
			for k, fn := range []string{"find", "match", "gsub", "gsub1", "gmatch"} {
				if gs[k] == "error" && slices.Contains(ws, any("error")) {
					continue // malformed: found here at once, by Lua 5.1 later
				}
				assert.Equal(t, ws[k], gs[k], "sandbox=%v: %s(%q, %q, %v)", sandbox, fn, w.S, w.P, w.Init)
			}
		}
		if !sandbox {
			require.Len(t, got.Exprs, len(want.Exprs))
		}
		for i, w := range want.Exprs {
			var values any = "error"
			if !sandbox {
				values = got.Exprs[i].Values
			} else if vals, err := rt.DoString(context.Background(), "return "+w.Expr); err == nil {
				values = asReference(vals) // the sandbox has no loadstring for the script
			}
			assert.Equal(t, w.Values, values, "sandbox=%v: %s", sandbox, w.Expr)
		}
	}
}

// asReference writes DoString's results as the reference file does.
func asReference(vals []any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v
		if v == nil {
			out[i] = "<nil>"
		}
	}
	return out
}

// TestGmatchIteratorCallsDirectly: gmatch returns one function, as Lua
// 5.1's (gopher-lua's needed the state it returned beside it).
func TestGmatchIteratorCallsDirectly(t *testing.T) {
	rt := newRuntime(t, true)
	assert.Equal(t, []any{"one", "two", nil}, doString(t, rt, `local it = ("one two"):gmatch("%a+") return it(), it(), (it())`))
}

// TestStringFunctionsStopWithTheContext: outside a sandbox too, a
// backtracking pattern ends with the call's context (as the command's
// Ctrl-C ends it).
func TestStringFunctionsStopWithTheContext(t *testing.T) {
	rt := newRuntime(t, false)
	for _, code := range []string{
		`return ('a'):rep(1e5):match('.-.-.-.-.-.-.-.-b')`,
		`return ('a'):rep(1e5):gsub('.-.-.-.-.-.-.-.-b', '')`,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		_, err := rt.DoString(ctx, code)
		cancel()
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 2*time.Second)
	}
}

// TestLongListsAreQuick: table.concat of 200,000 strings and unpack of
// 100,000 values (outside a sandbox, which bounds unpack) take
// milliseconds; gopher-lua pushed them one stack slot at a time, growing
// its stack 32 slots per step (48 s and 5 s).
func TestLongListsAreQuick(t *testing.T) {
	rt := newRuntime(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	vals, err := rt.DoString(ctx, `local t = {} for i = 1, 2e5 do t[i] = "x" end
		return #table.concat(t), #table.concat(t, ",", 10), select("#", unpack({}, 1, 1e5))`)
	require.NoError(t, err)
	assert.Equal(t, []any{2e5, 2e5*2 - 1 - 18, 1e5}, vals)
	assert.Less(t, time.Since(start), 2*time.Second)
}

// string.format counts bytes, as Lua 5.1's C printf does (Go's counts
// runes): %c is one byte, %s's precision cuts and its width pads in bytes.
func TestFormatCountsBytes(t *testing.T) {
	for _, sandbox := range []bool{false, true} {
		rt := newRuntime(t, sandbox)
		vals, err := rt.DoString(context.Background(), `return #string.format("%c", 233), string.format("%c", 233):byte(),
			#string.format("%.3s", "ééé"), string.format("[%5s][%-5s][%.2s][%.s]", "ab", "ab", "abc", "x"),
			#string.format("%6s", "é"), string.format("%3c|%-3c|", 65, 66)`)
		require.NoError(t, err)
		assert.Equal(t, []any{1.0, 233.0, 3.0, "[   ab][ab   ][ab][]", 6.0, "  A|B  |"}, vals, "sandbox %v", sandbox)
	}
}
