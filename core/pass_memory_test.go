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
