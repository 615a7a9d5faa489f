package ggmlcgo

import (
	"context"
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
// device's whose lanes the device orders (events): an asynchronous compute
// leaves its lane busy, and the backend in WaitDevices' set, until the host
// waits; a graph bound for another lane does not wait for the busy one, and
// waiting for one graph finishes the graphs launched before it, not after.
func TestAsyncComputesAreWaitedFor(t *testing.T) {
	b, _, ga, ya, gb, yb := twoGraphs(t)
	r := b.replay
	require.GreaterOrEqual(t, len(r.lanes), 2, "the CPU device opens more lanes")

	require.NoError(t, b.Compute(ga))
	first := b.Launches()
	assert.Equal(t, 1, r.busyLanes(), "the first graph is queued on lane 0")
	assert.EqualValues(t, 1, inFlight.n.Load())
	assert.False(t, b.Done(first))
	assert.True(t, b.Done(first-1), "what came before")
	r.trace(true)
	require.NoError(t, b.Compute(gb))
	second := b.Launches()
	assert.Equal(t, 3, r.busyLanes(), "another graph goes to lane 1, behind lane 0's without a wait")
	assert.False(t, b.Done(first))
	require.NoError(t, b.Compute(gb))
	third := b.Launches()
	assert.Equal(t, 3, r.busyLanes(), "its lane again")

	// (The same graph again is captured: a scratch graph first.)
	assert.Equal(t, []laneStep{{'E', 1, 0, first}, {'L', 1, -1, second}, {'L', 1, -1, third}, {'L', 1, -1, third}},
		r.trace(false), "lane 1 waits for lane 0's work once, on the device")
	b.WaitFor(first)
	assert.Equal(t, 2, r.busyLanes(), "waiting for the first graph waits for its lane only")
	assert.True(t, b.Done(first))
	assert.False(t, b.Done(second))
	out := make([]byte, 16)
	require.NoError(t, ya.GetNow(out))
	assert.Equal(t, []float32{2, 4, 6, 8}, bytesf32(out))
	b.WaitFor(second)
	assert.True(t, b.Done(third), "lane 1's last graph was waited for")
	assert.Equal(t, 0, r.busyLanes())
	assert.False(t, b.queued)
	assert.EqualValues(t, 0, inFlight.n.Load())

	require.NoError(t, b.Compute(ga))
	require.NoError(t, b.Compute(gb))
	b.WaitFor(b.Launches())
	assert.Equal(t, 0, r.busyLanes(), "the last graph came after all the others")
	require.NoError(t, b.Compute(ga))
	require.NoError(t, ya.Get(out))
	assert.Equal(t, 0, r.busyLanes(), "reading device memory waits")
	assert.Equal(t, []float32{2, 4, 6, 8}, bytesf32(out))
	require.NoError(t, yb.Get(out))
	assert.Equal(t, []float32{3, 6, 9, 12}, bytesf32(out))

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

// Where the device has no events (or GGLUA_LANE_EVENTS=0), a graph bound
// for another lane waits for the busy one on the host.
func TestLanesSettleWithoutEvents(t *testing.T) {
	b, x, ga, _, gb, _ := twoGraphs(t)
	r := b.replay
	require.True(t, r.setOrder(lanesSettle))
	require.NoError(t, b.Compute(ga))
	first := b.Launches()
	require.NoError(t, b.Compute(gb))
	assert.Equal(t, 2, r.busyLanes(), "lane 0 was waited for")
	assert.True(t, b.Done(first))
	assert.False(t, b.Done(b.Launches()))
	require.NoError(t, b.Compute(gb))
	assert.Equal(t, 2, r.busyLanes(), "its lane again: nothing to wait for")
	require.NoError(t, x.Set(f32bytes(5, 6, 7, 8)))
	assert.EqualValues(t, 1, deferred.n.Load(), "the host's writes are deferred")
	assert.True(t, b.upload.buf.IsNil(), "no pinned memory for them")
	WaitDevices()
	assert.Zero(t, deferred.n.Load())
}

// A lane that waited for another's work waits again once that lane has
// launched more, and only then.
func TestALaneWaitsAgainAfterANewLaunch(t *testing.T) {
	b, _, ga, _, gb, _ := twoGraphs(t)
	r := b.replay
	r.trace(true)
	for range 2 {
		require.NoError(t, b.Compute(ga))
		require.NoError(t, b.Compute(gb))
	}
	assert.Equal(t, []laneStep{
		{'L', 0, -1, 1},
		{'E', 1, 0, 1}, {'L', 1, -1, 2},
		{'E', 0, 1, 2}, {'L', 0, -1, 3}, {'L', 0, -1, 3}, // captured: a scratch graph first
		{'E', 1, 0, 3}, {'L', 1, -1, 4}, {'L', 1, -1, 4},
	}, r.trace(false))
	b.Wait()
}

// A backend whose graphs run on no stream of another's (here the plain
// CPU) waits for the writes queued on that other's before it computes,
// node by node too (ComputeEach).
func TestOtherBackendsQueuedWritesAreWaitedFor(t *testing.T) {
	dev, x, ga, _, _, _ := twoGraphs(t)
	plain := cpu(t, 1)
	_, g := doubling(t, plain)
	for _, compute := range []func() error{
		func() error { return plain.Compute(g) },
		func() error { return plain.ComputeEach(context.Background(), g, func(Tensor, time.Duration) {}) },
	} {
		require.NoError(t, dev.Compute(ga))
		require.NoError(t, x.Set(f32bytes(5, 6, 7, 8)))
		require.EqualValues(t, 1, uploaders.Load(), "a write queued on the device's stream")
		require.NoError(t, compute())
		assert.Zero(t, uploaders.Load(), "waited for")
		assert.Zero(t, inFlight.n.Load())
	}
}

// The host's writes while graphs are queued go on the stream behind the
// newest launch, and a launch on another lane waits for the busy lanes'
// work (an event): the trace shows each step. A write's pinned bytes are
// reused once the launch it follows is done; with no room left a write is
// deferred to the next wait, and so are the writes after it (a queued one
// would land before the deferred one).
func TestWritesQueueBehindTheGraphs(t *testing.T) {
	b, x, ga, ya, gb, _ := twoGraphs(t)
	r := b.replay
	small, ok := b.hostStaging(2 * uploadAlign) // room for two writes
	require.True(t, ok)
	b.upload.buf = small
	set := func(v float32) { require.NoError(t, x.Set(f32bytes(v, v, v, v))) }
	out := make([]byte, 16)
	r.trace(true)

	require.NoError(t, b.Compute(ga)) // launch 1, lane 0
	set(1)                            // behind launch 1, at 0
	require.NoError(t, b.Compute(gb)) // launch 2, lane 1
	set(2)                            // behind launch 2, at 64
	assert.Equal(t, 3, r.busyLanes(), "writing does not wait")
	b.WaitFor(1)
	set(3) // launch 1 is done: its bytes are reused
	assert.Zero(t, deferred.n.Load(), "nothing deferred")
	assert.Equal(t, []uploadSpan{{64, 80, 2}, {0, 16, 2}}, b.upload.live)
	assert.EqualValues(t, 1, uploaders.Load())
	set(4)
	assert.EqualValues(t, 1, deferred.n.Load(), "no room: deferred")
	b.upload.live = b.upload.live[:1] // room again, but a deferred write is waiting
	set(5)
	assert.EqualValues(t, 2, deferred.n.Load(), "after a deferred write, deferred too")
	assert.Equal(t, []laneStep{
		{'L', 0, -1, 1}, {'S', 0, -1, 1},
		{'E', 1, 0, 1}, {'L', 1, -1, 2}, {'S', 1, -1, 2},
		{'Y', 0, -1, 1}, {'S', 1, -1, 2},
	}, r.trace(true))

	require.NoError(t, b.Compute(ga))
	assert.Zero(t, deferred.n.Load(), "the compute made them first")
	assert.Nil(t, b.upload.live, "after its wait")
	assert.Zero(t, uploaders.Load())
	assert.Equal(t, []laneStep{{'Y', 1, -1, 2}, {'L', 0, -1, 3}, {'L', 0, -1, 3}}, r.trace(false),
		"a wait, then ga again on its lane: captured, a scratch graph first")
	require.NoError(t, ya.Get(out))
	assert.Equal(t, []float32{10, 10, 10, 10}, bytesf32(out), "the compute read the last write")
	require.NoError(t, x.Zero())
	require.NoError(t, x.Get(out))
	assert.Equal(t, []float32{0, 0, 0, 0}, bytesf32(out), "nothing queued: written at once")
}

// The ring's room: after the newest span, wrapping to the start before
// the oldest, never over a live one.
func TestUploadRoom(t *testing.T) {
	b := cpu(t, 1)
	buf, ok := b.hostStaging(4 * uploadAlign)
	require.True(t, ok)
	t.Cleanup(buf.Free)
	for _, c := range []struct {
		live []uploadSpan
		n    int
		want int
	}{
		{nil, 4 * uploadAlign, 0},
		{nil, 4*uploadAlign + 1, -1},
		{[]uploadSpan{{0, 10, 1}}, 3 * uploadAlign, uploadAlign},
		{[]uploadSpan{{0, 10, 1}}, 3*uploadAlign + 1, -1},
		{[]uploadSpan{{128, 200, 1}}, 64, 0},              // wraps before the oldest
		{[]uploadSpan{{128, 200, 1}}, 129, -1},            // over the oldest
		{[]uploadSpan{{128, 200, 1}, {0, 10, 2}}, 64, 64}, // between the newest and the oldest
		{[]uploadSpan{{128, 200, 1}, {0, 70, 2}}, 1, -1},  // the newest, aligned, reaches the oldest
		{[]uploadSpan{{64, 100, 1}, {0, 60, 2}}, 1, -1},
	} {
		u := uploads{buf: buf, live: c.live}
		assert.Equal(t, c.want, u.room(c.n), "%v, %d bytes", c.live, c.n)
	}
}

// twoGraphs is a CPU computing as a device (cpuAsDevice) and two graphs
// of its x: ga = 2x into ya and gb = 3x into yb, which go to two lanes.
func twoGraphs(t *testing.T) (b *Backend, x Tensor, ga *Graph, ya Tensor, gb *Graph, yb Tensor) {
	t.Helper()
	b, buf, ctx, x := cpuAsDevice(t, 4096)
	graph := func(s float32, slot int64) (*Graph, Tensor) {
		y, err := ctx.Scale(x, s)
		require.NoError(t, err)
		require.NoError(t, buf.PlaceAt(y, buf.FirstOffset()+slot*256))
		g, err := ctx.NewGraph(4)
		require.NoError(t, err)
		require.NoError(t, g.Expand(y))
		return g, y
	}
	ga, ya = graph(2, 1)
	gb, yb = graph(3, 2)
	return b, x, ga, ya, gb, yb
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
			if err := b.Compute(g); err != nil { // queued again
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
