package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reduceGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	return []gradCase{
		{"reshape and sum dim", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				r, err := e.Reshape(in[0], 3, 2)
				if err != nil {
					return nil, err
				}
				s, err := e.SumDim(r, 0, false) // [9, 12]
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(s, host(t, []int{2}, 1, 2)))
			},
			9 + 24, [][]float64{{1, 2, 1, 2, 1, 2}}},
		{"mean dim 1", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				s, err := e.MeanDim(in[0], 1, true) // [[2],[5]]
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(s, host(t, []int{2, 1}, 1, 3)))
			},
			17, [][]float64{{1. / 3, 1. / 3, 1. / 3, 1, 1, 1}}},
		{"max dim 1", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.MaxDim(in[0], 1, false)), host(t, []int{2}, 1, 2)))
			},
			15, [][]float64{{0, 0, 1, 0, 0, 2}}},
		{"max dim 0", []*Tensor{m23(1, 5, 3, 4, 2, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.MaxDim(in[0], 0, false)) },
			4 + 5 + 6, [][]float64{{0, 1, 0, 1, 0, 1}}},
		{"min", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.Min(in[0]) },
			-1.5, [][]float64{{0, 1, 0}}},
	}
}

func TestReduceGradients(t *testing.T) {
	runGradCases(t, reduceGradCases(t), gradChecks{
		loose: []string{"max dim 1", "max dim 0", "min"},
		kinks: []string{"max dim 1", "max dim 0", "min"}, // as for relu
	})
}

func TestArgmaxDim(t *testing.T) {
	e := newEngine(t)
	idx, err := e.ArgmaxDim(host(t, []int{2, 3}, 1, 9, 3, 7, 5, 6), 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0}, values(t, idx))
	idx, err = e.ArgmaxDim(host(t, []int{2, 3}, 1, 9, 3, 7, 5, 6), 0)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0, 1}, values(t, idx))
}
