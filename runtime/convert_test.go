package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestSharedTablesConvertOnce: a table reached from many places converts
// once, and every place gets the same Go value: a fan-out of 3^40 paths
// through 41 tables is quick.
func TestSharedTablesConvertOnce(t *testing.T) {
	rt := newRuntime(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	vals, err := rt.DoString(ctx, `local t = {1} for i = 1, 40 do t = {t, t, t} end return t, {a = t, b = t}`)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second)
	v := vals[0]
	for depth := 0; depth < 40; depth++ {
		s, ok := v.([]any)
		require.True(t, ok, "depth %d: %T", depth, v)
		require.Len(t, s, 3)
		assert.Equal(t, reflect.ValueOf(s[0]).Pointer(), reflect.ValueOf(s[2]).Pointer(), "depth %d: one slice", depth)
		v = s[0]
	}
	assert.Equal(t, []any{1.0}, v)
	m := vals[1].(map[string]any)
	assert.Equal(t, reflect.ValueOf(vals[0]).Pointer(), reflect.ValueOf(m["a"]).Pointer())
	assert.Equal(t, reflect.ValueOf(m["a"]).Pointer(), reflect.ValueOf(m["b"]).Pointer())

	shared, err := rt.DoString(ctx, `local m = {x = 1} return {m, m}`)
	require.NoError(t, err)
	pair := shared[0].([]any)
	assert.Equal(t, reflect.ValueOf(pair[0]).Pointer(), reflect.ValueOf(pair[1]).Pointer(), "one map")
}

// TestCyclesDoNotConvert: a table that contains itself is an error
// (ErrConvert) naming where, coming out of a script, going into a
// Register'd function and coming back from one; so is a Go value that
// contains itself. Shared Go values become one Lua table.
func TestCyclesDoNotConvert(t *testing.T) {
	rt := newRuntime(t, true)
	called := false
	rt.Register("gofunc", func(args []any) ([]any, error) { called = true; return nil, nil })
	cyclic := map[string]any{"name": "loop"}
	cyclic["self"] = map[string]any{"up": cyclic}
	rt.Register("cyclic", func(args []any) ([]any, error) { return []any{cyclic}, nil })
	for code, text := range map[string]string{
		`local t = {} t.next = {prev = t} return t`:           "value.next.prev contains itself",
		`local t = {1, 2} t[3] = {t} return 1, t`:             "result 2: cannot convert value: the table at value[3][1] contains itself",
		`local t = {} t[1] = t return gofunc(1, t)`:           "gofunc: argument 2: cannot convert value: the table at value[1] contains itself",
		`return cyclic()`:                                     "cyclic: cannot convert value: a Go value that contains itself",
		`local t = {} for i = 1, 200 do t = {t} end return t`: "nested more than 100 deep",
	} {
		_, err := rt.DoString(context.Background(), code)
		require.Error(t, err, code)
		assert.ErrorIs(t, err, runtime.ErrConvert, code)
		assert.Contains(t, err.Error(), text, code)
	}
	assert.False(t, called, "gofunc is not called with what did not convert")

	assert.ErrorIs(t, rt.SetGlobal("c", cyclic), runtime.ErrConvert)
	list := make([]any, 2)
	list[1] = list
	assert.ErrorIs(t, rt.SetGlobal("c", list), runtime.ErrConvert)

	inner := []any{1.0, 2.0}
	require.NoError(t, rt.SetGlobal("s", []any{inner, inner, map[string]any{"i": inner}}))
	assert.Equal(t, []any{true, true, 2.0}, doString(t, rt, `return s[1] == s[2], s[3].i == s[1], s[2][2]`))
	// The runtime goes on.
	assert.Equal(t, []any{3.0}, doString(t, rt, `return 1 + 2`))
}

// TestRegisteredErrorsKeepTheirCause: the error a Register'd function
// returns reaches the host through errors.Is; its text is the script's.
func TestRegisteredErrorsKeepTheirCause(t *testing.T) {
	rt := newRuntime(t, true)
	errQuota := errors.New("quota spent")
	rt.Register("fetch", func([]any) ([]any, error) { return nil, fmt.Errorf("user 7: %w", errQuota) })
	_, err := rt.DoString(context.Background(), `local ok, e = pcall(fetch) assert(not ok and e:find("fetch: user 7: quota spent"), e) return fetch()`)
	require.Error(t, err)
	assert.ErrorIs(t, err, errQuota)
	assert.Contains(t, err.Error(), "<string>:1: fetch: user 7: quota spent")
}
