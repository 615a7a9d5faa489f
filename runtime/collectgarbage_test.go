package runtime

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectgarbage takes Lua 5.1's options ("count" returned nothing) and
// refuses others.
func TestCollectGarbageOptions(t *testing.T) {
	for _, sandbox := range []bool{false, true} {
		rt, err := New(Options{Threads: 1, Stdout: io.Discard, Sandbox: sandbox})
		require.NoError(t, err)
		vals, err := rt.DoString(context.Background(), `return collectgarbage("count"), collectgarbage(), collectgarbage("step"), collectgarbage("stop")`)
		require.NoError(t, err)
		require.Len(t, vals, 4)
		kib, ok := vals[0].(float64)
		require.True(t, ok, "count is a number, got %T", vals[0])
		assert.Greater(t, kib, 1.0, "KiB in use")
		assert.Equal(t, []any{0.0, true, 0.0}, vals[1:])
		_, err = rt.DoString(context.Background(), `collectgarbage("everything")`)
		assert.ErrorContains(t, err, "invalid option 'everything'")
		rt.Close()
	}
}

// In a sandbox forced collections are at most a tenth of the time: one
// asked for sooner than nine times the last one's length after it is
// skipped.
func TestCollectGarbagePaced(t *testing.T) {
	end := time.Unix(100, 0)
	took := 400 * time.Millisecond
	assert.True(t, tooSoon(end.Add(time.Second), end, took), "1 s after a 0.4 s collection")
	assert.False(t, tooSoon(end.Add(4*time.Second), end, took), "3.6 s after it")
	assert.False(t, tooSoon(end, time.Time{}, 0), "the first")
}
