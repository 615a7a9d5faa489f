package ggmlcgo

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlowComputeThreshold(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-3", 0}, {"NaN", 0}, {"inf", 0}, {"ten", 0}, {"1e12", 0},
		{"50", 50 * time.Millisecond}, {"0.5", 500 * time.Microsecond},
	} {
		assert.Equal(t, c.want, slowComputeFrom(c.env), "GGLUA_SLOW_COMPUTE_MS=%q", c.env)
	}
}

// slowReports makes the reports go to a buffer, over threshold, until the
// test ends.
func slowReports(t *testing.T, threshold time.Duration) *bytes.Buffer {
	t.Helper()
	d, w := slowCompute, slowComputeOut
	t.Cleanup(func() { slowCompute, slowComputeOut = d, w })
	var out bytes.Buffer
	slowCompute, slowComputeOut = threshold, &out
	return &out
}

// deviceGraph is a CPU computing as a device and a one-node graph placed
// for it, to compute again and again.
func deviceGraph(t *testing.T) (*Backend, *Graph) {
	t.Helper()
	b := cpu(t, 1)
	require.NoError(t, b.ComputeAsDevice())
	ctx, err := NewContext(32, 32)
	require.NoError(t, err)
	t.Cleanup(ctx.Free)
	in := place(t, b, ctx, [][]float32{{1, 2}}, []int64{2})
	y, err := ctx.Scale(in[0], 2)
	require.NoError(t, err)
	g, err := ctx.NewGraph(8)
	require.NoError(t, err)
	require.NoError(t, g.Expand(y))
	ga := NewGallocr(b.BufferType())
	t.Cleanup(ga.Free)
	require.NoError(t, ga.AllocGraph(g))
	return b, g
}

// TestSlowComputesAreReported: over the threshold a compute prints one
// line with its parts and how it ran (the CPU has no CUDA graphs: it just
// computed); under it, nothing.
func TestSlowComputesAreReported(t *testing.T) {
	out := slowReports(t, time.Hour)
	b := cpu(t, 1)
	ctx, err := NewContext(32, 32)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{{1, 2}}, []int64{2})

	// Each compute its own node: computeBoth's allocator frees the
	// memory it placed a node in.
	y, err := ctx.Scale(in[0], 2)
	require.NoError(t, err)
	computeBoth(t, b, ctx, y, in[0])
	assert.Empty(t, out.String())

	slowCompute = time.Nanosecond
	y, err = ctx.Scale(in[0], 3)
	require.NoError(t, err)
	computeBoth(t, b, ctx, y, in[0])
	assert.Regexp(t, `^gglua: slow compute \d+: [0-9.]+ ms \(waiting [0-9.]+ ms, then computed in [0-9.]+ ms\), 1 nodes\n$`, out.String())
}

// TestSlowWaitsAreReported: a wait for a device's queued graphs over the
// threshold names each graph waited for and how it ran (a CPU computing
// as a device keeps the books a GPU does).
func TestSlowWaitsAreReported(t *testing.T) {
	out := slowReports(t, time.Hour)
	b, g := deviceGraph(t)
	require.NoError(t, b.Compute(g))
	b.Wait()
	assert.Empty(t, out.String())

	require.NoError(t, b.Compute(g))
	slowCompute = time.Nanosecond
	b.Wait()
	assert.Regexp(t, `^gglua: slow wait: [0-9.]+ ms for the device's graphs \[2 (replayed|captured|launched|computed)\]\n$`, out.String())
}

// TestSlowBuffersAreReported: a buffer's allocation or release over the
// threshold is reported with its size.
func TestSlowBuffersAreReported(t *testing.T) {
	out := slowReports(t, time.Nanosecond)
	b := cpu(t, 1)
	buf, err := b.BufferType().Alloc(4096)
	require.NoError(t, err)
	buf.Free()
	assert.Regexp(t, `^gglua: slow buffer: [0-9.]+ ms allocating 4096 bytes\ngglua: slow buffer: [0-9.]+ ms freeing 4096 bytes\n$`, out.String())
}

// TestSlowWaitsNameOnlyLaunchesTheLogKeeps: after more launches than the
// log keeps, a wait names the last ones only, each by its own number, and
// a wait for an older one names none.
func TestSlowWaitsNameOnlyLaunchesTheLogKeeps(t *testing.T) {
	out := slowReports(t, time.Hour)
	b, g := deviceGraph(t)
	const n = 20
	for i := 0; i < n; i++ {
		require.NoError(t, b.Compute(g))
	}
	slowCompute = time.Nanosecond
	b.Wait()
	var launches []string
	for l := n - len(b.ran) + 1; l <= n; l++ {
		launches = append(launches, fmt.Sprintf(`%d (replayed|captured|launched|computed)`, l))
	}
	assert.Regexp(t, `^gglua: slow wait: [0-9.]+ ms for the device's graphs \[`+strings.Join(launches, " ")+`\]\n$`, out.String())

	out.Reset()
	slowCompute = time.Hour
	for i := 0; i < n; i++ {
		require.NoError(t, b.Compute(g))
	}
	slowCompute = time.Nanosecond
	b.WaitFor(n + 3) // launches the log no longer holds: none named
	assert.Regexp(t, `^gglua: slow wait: [0-9.]+ ms for the device's graphs \[\]\n$`, out.String())
}
