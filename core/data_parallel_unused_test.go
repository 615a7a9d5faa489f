package core

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
)

// TestAParameterNoProcessUsedKeepsNoGradient: q is in the loss at the
// first step only. Trained with Adam under data parallelism whose other
// process mirrors this one, q must then have no gradient, as alone, and
// Adam must leave it where the first step put it; with the average of
// zeros as its gradient Adam would go on moving it by its moments. Summing
// between computes and in the graph alike.
func TestAParameterNoProcessUsedKeepsNoGradient(t *testing.T) {
	mirror := func(b Buffer) error { // the other process's gradients are this one's
		v := unsafe.Slice((*float32)(b.Data), b.Count)
		for i := range v {
			v[i] *= 2
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		dp   func(e *Engine, params []*Tensor) error
	}{
		{"between computes", func(e *Engine, ps []*Tensor) error { return e.SetDataParallel(ps, 2, mirror, nil) }},
		{"in the graph", func(e *Engine, ps []*Tensor) error { return e.SetDataParallel(ps, 2, nil, scaleCollective(t, 2)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			train := func(dp bool) (w, q []float32, qGrads []bool) {
				e := newEngine(t)
				wt, qt := host(t, []int{3}, 1, -2, 3), host(t, []int{2}, 0.5, 4)
				params := []*Tensor{wt, qt}
				for _, p := range params {
					require.NoError(t, p.SetRequiresGrad(true))
					require.NoError(t, p.MoveToDevice(e, residency.Persistent))
				}
				if dp {
					require.NoError(t, tc.dp(e, params))
				}
				opt, err := NewAdam(e, params, AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
				require.NoError(t, err)
				for step := 1; step <= 3; step++ {
					ZeroGrad(params)
					var loss *Tensor
					require.NoError(t, e.WithGradTape(func() error {
						loss = squares(t, e, wt)
						if step == 1 {
							var err error
							loss, err = e.Add(loss, squares(t, e, qt))
							return err
						}
						return nil
					}))
					_, err := e.Backward(loss)
					require.NoError(t, err)
					qGrads = append(qGrads, qt.Grad() != nil)
					require.NoError(t, opt.Step())
				}
				w, err = wt.Float32s()
				require.NoError(t, err)
				q, err = qt.Float32s()
				require.NoError(t, err)
				return w, q, qGrads
			}
			w1, q1, g1 := train(false)
			w2, q2, g2 := train(true)
			assert.Equal(t, []bool{true, false, false}, g1, "alone: q has a gradient at step 1 only")
			assert.Equal(t, g1, g2, "q's gradient under data parallelism")
			assert.InDeltaSlice(t, w1, w2, 1e-6, "w")
			assert.InDeltaSlice(t, q1, q2, 1e-6, "q: Adam skips it after step 1")
		})
	}
}
