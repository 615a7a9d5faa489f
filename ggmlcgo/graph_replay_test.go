package ggmlcgo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replayingCPU is a CPU backend that decides replays as a device does,
// and a buffer of 4 KiB on it for a step's tensors.
func replayingCPU(t *testing.T) (*Backend, Buffer) {
	t.Helper()
	b := cpu(t, 1)
	r, err := newReplayer(b)
	require.NoError(t, err)
	b.replay = r // freed by Close
	buf, err := b.BufferType().Alloc(4096)
	require.NoError(t, err)
	t.Cleanup(buf.Free)
	return b, buf
}

// The replay decision is made in C whatever the backend: on the CPU the
// hints it passes are ignored, so the counts and values here check when a
// graph would be replayed, captured or launched on a GPU: only a graph
// identical to the last one of its lane (three lanes, so three graphs
// computed in turn all replay), and a fourth graph displaces the lane used
// least recently.
func TestReplayOnlyAGraphIdenticalToTheLast(t *testing.T) {
	b, buf := replayingCPU(t)
	const size = 256 // a slot per tensor, a multiple of any alignment

	// step builds y = clamp(x·s, lo, hi) in a fresh context, every tensor at
	// the same place in buf, as a training step's pass pool does; only the
	// parameters differ between the graphs below.
	step := func(typ Type, s, hi float32) []float32 {
		ctx, err := NewContext(8, 8)
		require.NoError(t, err)
		defer ctx.Free()
		x, err := ctx.NewTensor(typ, []int64{4})
		require.NoError(t, err)
		require.NoError(t, buf.PlaceAt(x, buf.FirstOffset()))
		x32, err := ctx.Cast(x, F32)
		require.NoError(t, err)
		xs, err := ctx.Scale(x32, s)
		require.NoError(t, err)
		y, err := ctx.Clamp(xs, -100, hi)
		require.NoError(t, err)
		if typ == F32 {
			require.NoError(t, x.Set(f32bytes(1, 2, 3, 4)))
		} else { // 1, 2, 3, 4 in f16 or bf16
			require.NoError(t, x.Set(map[Type][]byte{
				F16:  {0x00, 0x3c, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44},
				BF16: {0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40},
			}[typ]))
		}
		g, err := ctx.NewGraph(8)
		require.NoError(t, err)
		require.NoError(t, g.Expand(y))
		for i, n := range g.Nodes() { // as Realize places a step's nodes
			if n.IsView() {
				require.NoError(t, n.InitView())
			} else {
				require.NoError(t, buf.PlaceAt(n, buf.FirstOffset()+int64(i+1)*size))
			}
		}
		require.NoError(t, b.Compute(g))
		out := make([]byte, 16)
		require.NoError(t, y.Get(out))
		return bytesf32(out)
	}
	for i, c := range []struct {
		name  string
		s, hi float32
		want  []float32
		count ReplayCounts
	}{
		{"first graph", 2, 100, []float32{2, 4, 6, 8}, ReplayCounts{Launched: 1}},
		{"repeated: captured", 2, 100, []float32{2, 4, 6, 8}, ReplayCounts{Launched: 1, Captured: 1}},
		{"again: replayed", 2, 100, []float32{2, 4, 6, 8}, ReplayCounts{Launched: 1, Captured: 1, Replayed: 1}},
		{"clamp's bound changed", 2, 5, []float32{2, 4, 5, 5}, ReplayCounts{Launched: 2, Captured: 1, Replayed: 1}},
		{"repeated: captured anew", 2, 5, []float32{2, 4, 5, 5}, ReplayCounts{Launched: 2, Captured: 2, Replayed: 1}},
		{"scale changed", 3, 5, []float32{3, 5, 5, 5}, ReplayCounts{Launched: 3, Captured: 2, Replayed: 1}},
		// Graphs in turn (a step's forward and backward; a data-parallel
		// step's three) keep a lane each.
		{"the captured graph, after another: replayed on its lane", 2, 5, []float32{2, 4, 5, 5}, ReplayCounts{Launched: 3, Captured: 2, Replayed: 2}},
		{"the other again: captured on its lane", 3, 5, []float32{3, 5, 5, 5}, ReplayCounts{Launched: 3, Captured: 3, Replayed: 2}},
		{"in turn: replayed", 2, 5, []float32{2, 4, 5, 5}, ReplayCounts{Launched: 3, Captured: 3, Replayed: 3}},
		{"in turn: replayed too", 3, 5, []float32{3, 5, 5, 5}, ReplayCounts{Launched: 3, Captured: 3, Replayed: 4}},
		{"the first graph kept its lane: replayed", 2, 100, []float32{2, 4, 6, 8}, ReplayCounts{Launched: 3, Captured: 3, Replayed: 5}},
		{"a fourth graph takes the lane used least recently", 3, 100, []float32{3, 6, 9, 12}, ReplayCounts{Launched: 4, Captured: 3, Replayed: 5}},
		{"the other lanes' graphs still replay", 3, 5, []float32{3, 5, 5, 5}, ReplayCounts{Launched: 4, Captured: 3, Replayed: 6}},
		{"and the first", 2, 100, []float32{2, 4, 6, 8}, ReplayCounts{Launched: 4, Captured: 3, Replayed: 7}},
		{"the displaced graph is launched", 2, 5, []float32{2, 4, 5, 5}, ReplayCounts{Launched: 5, Captured: 3, Replayed: 7}},
	} {
		assert.Equal(t, c.want, step(F32, c.s, c.hi), "%d %s", i, c.name)
		assert.Equal(t, c.count, b.Replays(), "%d %s", i, c.name)
	}

	// An input of another type of the same size, at the same address, is
	// another graph (ggml-cuda would not see the difference).
	want := []float32{2, 4, 5, 5}
	assert.Equal(t, want, step(F16, 2, 5))
	assert.Equal(t, want, step(F16, 2, 5))
	before := b.Replays()
	assert.Equal(t, want, step(BF16, 2, 5))
	after := b.Replays()
	assert.Equal(t, before.Launched+1, after.Launched, "a bf16 input where an f16 one was")

	b.replay.enabled = false
	step(BF16, 2, 5)
	step(BF16, 2, 5)
	assert.Equal(t, after.Launched+2, b.Replays().Launched, "GGLUA_CUDA_GRAPHS=0 launches every graph")
	assert.Equal(t, after.Replayed, b.Replays().Replayed)
}

// TestReplayIgnoresACustomNodesPadding: ggml copies a custom node's
// parameters with the bytes after n_tasks unset, so two identical graphs
// of gglua's kernels may differ there; they still replay (else most
// backward steps were launched node by node). Every other word of the
// parameters (n_tasks, userdata, the zeros after the struct) still makes
// a graph another.
func TestReplayIgnoresACustomNodesPadding(t *testing.T) {
	// step computes relu of a placed input with one word of the node's
	// parameters (at byte off) set to v.
	step := func(b *Backend, buf Buffer, off uintptr, v uint32) []float32 {
		ctx, err := NewContext(8, 8)
		require.NoError(t, err)
		defer ctx.Free()
		x, err := ctx.NewTensor(F32, []int64{4})
		require.NoError(t, err)
		require.NoError(t, buf.PlaceAt(x, buf.FirstOffset()))
		require.NoError(t, x.Set(f32bytes(-1, 2, -3, 4)))
		y, err := ctx.ReluKernel(x)
		require.NoError(t, err)
		*opParamWord(y, off) = v
		g, err := ctx.NewGraph(8)
		require.NoError(t, err)
		require.NoError(t, g.Expand(y))
		require.NoError(t, buf.PlaceAt(y, buf.FirstOffset()+256))
		require.NoError(t, b.Compute(g))
		out := make([]byte, 16)
		require.NoError(t, y.Get(out))
		return bytesf32(out)
	}
	b, buf := replayingCPU(t)
	for i, padding := range []uint32{0, 0x7f00, 0xdeadbeef} {
		assert.Equal(t, []float32{0, 2, 0, 4}, step(b, buf, customPadding, padding))
		assert.Equal(t, ReplayCounts{Launched: 1, Captured: min(int64(i), 1), Replayed: max(int64(i)-1, 0)}, b.Replays(), "step %d", i)
	}
	// Relu's kernel runs with any thread count and reads no userdata, so
	// only the record sees these.
	for _, c := range []struct {
		name   string
		off    uintptr
		before uint32
	}{{"n_tasks", customNTasks, 0xffffffff}, {"userdata", customUserdata, 0}, {"a word after the struct", 56, 0}} {
		b, buf := replayingCPU(t)
		step(b, buf, c.off, c.before)
		step(b, buf, c.off, c.before)
		step(b, buf, c.off, 1)
		assert.Equal(t, ReplayCounts{Launched: 2, Captured: 1}, b.Replays(), c.name)
	}
}
