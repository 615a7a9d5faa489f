package ggmlcgo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GetLater queues a copy behind the queued graphs without waiting for them,
// and hands the bytes over at the next wait; where a read now is as good
// (nothing queued) or it cannot (host writes pending, too large, no room)
// it queues nothing. (The CPU computing as a device makes the copy at once:
// what this checks is the bookkeeping.)
func TestGetLaterLandsAtTheNextWait(t *testing.T) {
	b, buf, ctx, x := cpuAsDevice(t, 1<<18)
	y, err := ctx.Scale(x, 2)
	require.NoError(t, err)
	require.NoError(t, buf.PlaceAt(y, buf.FirstOffset()+256))
	g, err := ctx.NewGraph(4)
	require.NoError(t, err)
	require.NoError(t, g.Expand(y))
	big, err := ctx.NewTensor(F32, []int64{laterMax/4 + 1})
	require.NoError(t, err)
	require.NoError(t, buf.PlaceAt(big, buf.FirstOffset()+512))

	var got [][]float32
	land := func(b []byte) { got = append(got, bytesf32(b)) }
	assert.False(t, b.GetLater(y, land), "nothing queued: a read now costs no wait")

	require.NoError(t, b.Compute(g))
	require.NotZero(t, b.replay.busyLanes())
	require.True(t, b.GetLater(y, land))
	require.True(t, b.GetLater(y, land))
	assert.NotZero(t, b.replay.busyLanes(), "queuing the copies does not wait")
	assert.Empty(t, got, "the bytes wait for the device")
	assert.False(t, b.GetLater(big, land), "a large value is read at once")

	small, ok := b.hostStaging(uploadAlign) // room for one write
	require.True(t, ok)
	b.upload.buf = small
	require.NoError(t, x.Set(f32bytes(5, 6, 7, 8))) // queued on the stream (upload.go)
	require.Zero(t, deferred.n.Load())
	require.NoError(t, x.Set(f32bytes(5, 6, 7, 8))) // no room left: deferred
	require.NotZero(t, deferred.n.Load())
	assert.False(t, b.GetLater(y, land), "a host write deferred may be the value's")
	b.Wait()
	assert.Equal(t, [][]float32{{2, 4, 6, 8}, {2, 4, 6, 8}}, got, "a wait lands every copy, once")
	assert.Zero(t, b.later.used)
	b.Wait()
	assert.Len(t, got, 2)

	// Room: copies queue until the pinned memory is full, then Get is the
	// way, until a wait lands them.
	require.NoError(t, b.Compute(g))
	n := 0
	for b.GetLater(y, func([]byte) {}) {
		n++
	}
	assert.Equal(t, laterBytes/laterAlign, n)
	WaitDevices()
	require.NoError(t, b.Compute(g))
	require.True(t, b.GetLater(y, land), "the wait made room")
	b.Close()
	assert.Equal(t, []float32{10, 12, 14, 16}, got[len(got)-1], "closing lands what is queued")
}
