package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSchedulersFollowTorchFormulas(t *testing.T) {
	lrs := func(s *Scheduler, lr *float32, n int) []float64 {
		out := []float64{float64(*lr)}
		for i := 1; i < n; i++ {
			s.Step()
			out = append(out, float64(*lr))
		}
		return out
	}
	check := func(name string, want []float64, got []float64) {
		require.Len(t, got, len(want), name)
		for i := range want {
			assert.InDelta(t, want[i], got[i], 1e-6, "%s at step %d", name, i)
		}
	}
	lr := float32(0.1)
	s, err := StepLR(&lr, 2, 0.5)
	require.NoError(t, err)
	check("step", []float64{0.1, 0.1, 0.05, 0.05, 0.025}, lrs(s, &lr, 5))

	lr = 1
	s, err = CosineLR(&lr, 4, 0)
	require.NoError(t, err)
	check("cosine", []float64{1, 0.8535534, 0.5, 0.1464466, 0, 0}, lrs(s, &lr, 6))

	lr = 1
	s, err = WarmupCosineLR(&lr, 2, 6, 0)
	require.NoError(t, err)
	check("warmup-cosine", []float64{1. / 3, 2. / 3, 1, 0.8535534, 0.5, 0.1464466, 0}, lrs(s, &lr, 7))

	lr = 0
	s, err = OneCycleLR(&lr, 1, 10, 0.3, 25, 1e4)
	require.NoError(t, err)
	got := lrs(s, &lr, 10)
	check("one-cycle", []float64{0.04, 0.52, 1}, got[:3])
	assert.InDelta(t, 4e-6, got[9], 1e-9)
	assert.Greater(t, got[5], got[6], "annealing down after the peak")
	_, err = StepLR(&lr, 0, 0.5)
	assert.Error(t, err)
}
