package ggmlcgo

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuAsDevice is a CPU backend computing as a device (ComputeAsDevice), a
// buffer of size bytes of its memory, and a context whose tensor x, at
// the buffer's start, holds {1, 2, 3, 4}.
func cpuAsDevice(t *testing.T, size int64) (*Backend, Buffer, *Context, Tensor) {
	t.Helper()
	b := cpu(t, 1)
	require.NoError(t, b.ComputeAsDevice())
	buf, err := b.BufferType().Alloc(size)
	require.NoError(t, err)
	t.Cleanup(buf.Free)
	ctx, err := NewContext(16, 16)
	require.NoError(t, err)
	t.Cleanup(ctx.Free)
	x, err := ctx.NewTensor(F32, []int64{4})
	require.NoError(t, err)
	require.NoError(t, buf.PlaceAt(x, buf.FirstOffset()))
	require.NoError(t, x.Set(f32bytes(1, 2, 3, 4)))
	return b, buf, ctx, x
}

// On the CPU a compute is done when it returns, but the bookkeeping is a
// device's: an asynchronous compute leaves its lane busy, and the backend
// in WaitDevices' set, until the host touches memory; a graph bound for
// another lane first waits for the busy one (lanes' streams are not
// ordered), one for the same lane does not need to.
func TestAsyncComputesAreWaitedFor(t *testing.T) {
	b, buf, ctx, x := cpuAsDevice(t, 4096)
	r := b.replay
	require.GreaterOrEqual(t, len(r.lanes), 2, "the CPU device opens more lanes")
	graph := func(s float32, slot int64) (*Graph, Tensor) {
		y, err := ctx.Scale(x, s)
		require.NoError(t, err)
		require.NoError(t, buf.PlaceAt(y, buf.FirstOffset()+slot*256))
		g, err := ctx.NewGraph(4)
		require.NoError(t, err)
		require.NoError(t, g.Expand(y))
		return g, y
	}
	ga, ya := graph(2, 1)
	gb, yb := graph(3, 2)

	require.NoError(t, b.Compute(ga))
	first := b.Launches()
	assert.Equal(t, 1, r.busyLanes(), "the first graph is queued on lane 0")
	assert.EqualValues(t, 1, inFlight.n.Load())
	assert.False(t, b.Done(first))
	assert.True(t, b.Done(first-1), "what came before")
	require.NoError(t, b.Compute(gb))
	second := b.Launches()
	assert.Equal(t, 2, r.busyLanes(), "another graph goes to lane 1, after lane 0 is waited for")
	assert.True(t, b.Done(first))
	assert.False(t, b.Done(second))
	require.NoError(t, b.Compute(gb))
	assert.Equal(t, 2, r.busyLanes(), "its lane again: nothing to wait for")
	assert.False(t, b.Done(second), "the lane's earlier graph may still run")

	out := make([]byte, 16)
	require.NoError(t, ya.GetNow(out))
	assert.Equal(t, 2, r.busyLanes(), "a read of a finished graph's result does not wait")
	assert.Equal(t, []float32{2, 4, 6, 8}, bytesf32(out))
	require.NoError(t, ya.Get(out))
	assert.Equal(t, 0, r.busyLanes(), "reading device memory waits")
	assert.False(t, b.queued)
	assert.EqualValues(t, 0, inFlight.n.Load())
	assert.Equal(t, []float32{2, 4, 6, 8}, bytesf32(out))
	require.NoError(t, yb.Get(out))
	assert.Equal(t, []float32{3, 6, 9, 12}, bytesf32(out))

	// Writes meanwhile are deferred, in order, until a compute or a read.
	require.NoError(t, b.Compute(ga))
	require.NoError(t, x.Set(f32bytes(9, 9, 9, 9)))
	require.NoError(t, x.Zero())
	require.NoError(t, x.Set(f32bytes(5, 6, 7, 8)))
	assert.Equal(t, 1, r.busyLanes(), "writing does not wait")
	assert.EqualValues(t, 3, deferred.n.Load())
	require.NoError(t, b.Compute(ga))
	assert.EqualValues(t, 0, deferred.n.Load(), "a compute makes them first")
	require.NoError(t, ya.Get(out))
	assert.Equal(t, []float32{10, 12, 14, 16}, bytesf32(out), "the compute read the last write")
	require.NoError(t, b.Compute(ga))
	require.NoError(t, x.Zero())
	require.NoError(t, x.Get(out))
	assert.Equal(t, []float32{0, 0, 0, 0}, bytesf32(out), "a read sees the deferred write")
	require.NoError(t, x.Set(f32bytes(5, 6, 7, 8)))
	assert.EqualValues(t, 0, deferred.n.Load(), "nothing queued: written at once")
	b.async = false
	require.NoError(t, b.Compute(gb))
	assert.Equal(t, 0, r.busyLanes(), "a synchronous compute waits for its graph")

	b.async = true
	require.NoError(t, b.Compute(ga))
	other, err := b.BufferType().Alloc(256)
	require.NoError(t, err)
	other.Free() // any buffer: the queued graph's memory may be any
	assert.Equal(t, 0, r.busyLanes(), "freeing a buffer waits")
	assert.EqualValues(t, 0, inFlight.n.Load())
}

// Closing a backend with queued work waits for it first (its buffers go,
// and Buffer.Free must not wait on the lock Close holds).
func TestCloseWaitsForQueuedWork(t *testing.T) {
	b := cpu(t, 1)
	require.NoError(t, b.ComputeAsDevice())
	_, g := doubling(t, b)
	require.NoError(t, b.Compute(g))
	assert.EqualValues(t, 1, inFlight.n.Load())
	b.Close()
	assert.EqualValues(t, 0, inFlight.n.Load())
}

// Runtimes may run in parallel goroutines, each on its own backends, while
// the deferred writes and the waits are the process's: a write one makes
// while the other's device has work queued must land before its own next
// compute reads it, whichever goroutine lands it.
func TestAsyncBackendsInParallelGoroutines(t *testing.T) {
	const rounds = 300
	run := func(seed float32) error {
		b, err := NewCPU(1)
		if err != nil {
			return err
		}
		defer b.Close()
		if err := b.ComputeAsDevice(); err != nil {
			return err
		}
		buf, err := b.BufferType().Alloc(1024)
		if err != nil {
			return err
		}
		defer buf.Free()
		ctx, err := NewContext(8, 8)
		if err != nil {
			return err
		}
		defer ctx.Free()
		x, _ := ctx.NewTensor(F32, []int64{4})
		y, _ := ctx.Scale(x, 2)
		if err := buf.PlaceAt(x, buf.FirstOffset()); err != nil {
			return err
		}
		if err := buf.PlaceAt(y, buf.FirstOffset()+256); err != nil {
			return err
		}
		g, err := ctx.NewGraph(4)
		if err != nil {
			return err
		}
		if err := g.Expand(y); err != nil {
			return err
		}
		out := make([]byte, 16)
		for i := range rounds {
			v := seed + float32(i)
			if err := x.Set(f32bytes(v, v, v, v)); err != nil {
				return err
			}
			if err := b.Compute(g); err != nil {
				return err
			}
			if err := b.Compute(g); err != nil { // queued again: the next Set is deferred
				return err
			}
			if err := y.Get(out); err != nil {
				return err
			}
			if got := bytesf32(out)[0]; got != 2*v {
				return fmt.Errorf("round %d: y = %g, want %g", i, got, 2*v)
			}
		}
		return nil
	}
	errs := make(chan error, 2)
	for _, seed := range []float32{1, 1000} {
		go func() { errs <- run(seed) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
}

// The protocol that keeps goroutines' writes and launches apart: while one
// holds deviceIO (landing deferred writes after its waits), another's
// device launch and another's deferral both wait for it.
func TestLaunchesAndDeferralsWaitForALanding(t *testing.T) {
	b := cpu(t, 1)
	require.NoError(t, b.ComputeAsDevice())
	x, g := doubling(t, b)
	require.NoError(t, b.Compute(g)) // queued: a Set now defers

	blocked := func(what string, f func() error) {
		deviceIO.Lock()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			deviceIO.Unlock()
			require.NoError(t, err)
			t.Errorf("%s went ahead while another goroutine held deviceIO", what)
		case <-time.After(50 * time.Millisecond):
			deviceIO.Unlock()
			require.NoError(t, <-done)
		}
	}
	blocked("a device launch", func() error { return b.Compute(g) })
	blocked("a deferral", func() error { return x.Set(f32bytes(3, 4)) })
	out := make([]byte, 8)
	require.NoError(t, x.Get(out))
	assert.Equal(t, []float32{3, 4}, bytesf32(out))
}

// doubling is a graph y = 2x on b, x = [1, 2], every tensor placed.
func doubling(t *testing.T, b *Backend) (Tensor, *Graph) {
	t.Helper()
	ctx, err := NewContext(8, 8)
	require.NoError(t, err)
	t.Cleanup(ctx.Free)
	x := place(t, b, ctx, [][]float32{{1, 2}}, []int64{2})[0]
	y, err := ctx.Scale(x, 2)
	require.NoError(t, err)
	buf, err := b.BufferType().Alloc(256)
	require.NoError(t, err)
	t.Cleanup(buf.Free)
	require.NoError(t, buf.PlaceAt(y, buf.FirstOffset()))
	g, err := ctx.NewGraph(4)
	require.NoError(t, err)
	require.NoError(t, g.Expand(y))
	return x, g
}

// TestDeviceBlockedForTimesTheWait: the host's wait for a device is timed
// from its start (a nested wait keeps it) and is 0 when it ends.
func TestDeviceBlockedForTimesTheWait(t *testing.T) {
	assert.Zero(t, DeviceBlockedFor())
	done := blocked()
	time.Sleep(5 * time.Millisecond)
	inner := blocked()
	assert.GreaterOrEqual(t, DeviceBlockedFor(), 5*time.Millisecond)
	inner()
	assert.GreaterOrEqual(t, DeviceBlockedFor(), 5*time.Millisecond, "the outer wait goes on")
	done()
	assert.Zero(t, DeviceBlockedFor())
}
