package core

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A training step whose pass pool is past the bound is left alone: its
// backward and optimizer are built and computed as one graph, with no copy
// to the host; work beyond steps is then bounded.
func TestTheBoundLeavesTrainingStepsAlone(t *testing.T) {
	old := compactPassBytes
	compactPassBytes = 1 << 16 // far below one step's pass pool
	defer func() { compactPassBytes = old }()
	e := newEngine(t)
	rng := rand.New(rand.NewSource(1))
	m := newMLP(t, e, 32, 256, 4, 0.01, rng)
	x, labels := host(t, []int{64, 32}, make([]float32, 64*32)...), make([]int, 64)
	m.step(t, x, labels)
	before, l0 := e.Stats(), e.Residency().Ledger()
	for i := 0; i < 5; i++ {
		m.step(t, x, labels)
	}
	after, l1 := e.Stats(), e.Residency().Ledger()
	assert.Equal(t, int64(5), after.GraphComputes-before.GraphComputes, "one graph per step")
	assert.Less(t, l1.D2HBytes-l0.D2HBytes, int64(5*64), "only the losses are read back")
	require.Greater(t, l1.BufferBytes, compactPassBytes, "the step's pass pool is past the bound")

	// Beyond steps, the pool stays within twice the step's.
	step := e.mem.stepBytes
	for i := 0; i < 200; i++ {
		y, err := e.Scale(x, 2)
		require.NoError(t, err)
		_, err = y.Float32s()
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, e.Residency().Ledger().BufferBytes, 2*step+(1<<20))
}

// Constants uploaded into the pass pool (as devices make them) outlive a
// compaction of the pool before their use: an optimizer realizes pending
// parameters between making its numbers and reading them.
func TestUploadedConstantsSurviveCompaction(t *testing.T) {
	forceUploadedConstants = true
	defer func() { forceUploadedConstants = false }()
	old := compactPassBytes
	compactPassBytes = 1
	defer func() { compactPassBytes = old }()
	e := newEngine(t)
	hyper, err := e.constants([]float32{1, 2})
	require.NoError(t, err)
	e.mem.tapeRan, e.mem.stepComputed = true, true // beyond the step: Realize compacts
	_, err = e.Add(host(t, []int{2}, 1, 2), host(t, []int{2}, 0, 0))
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	sum, err := e.Add(hyper, hyper)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4}, values(t, sum))
}
