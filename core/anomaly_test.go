package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnomalyModes(t *testing.T) {
	for _, mode := range []AnomalyMode{AnomalyOff, AnomalyWarn, AnomalyStop} {
		e := newEngine(t)
		var warned []string
		e.SetAnomalyMode(mode, func(s string) { warned = append(warned, s) })
		w := host(t, []int{2}, 4, -1) // sqrt(-1): a NaN gradient
		opt, err := NewSGD(e, []*Tensor{w}, SGDOptions{LR: 0.1})
		require.NoError(t, err)
		require.NoError(t, e.WithGradTape(func() error {
			loss, err := sumOf(e)(e.Sqrt(w))
			if err == nil {
				_, err = e.Backward(loss)
			}
			return err
		}))
		err = opt.Step()
		v := values(t, w)
		switch mode {
		case AnomalyOff:
			require.NoError(t, err)
			assert.True(t, math.IsNaN(float64(v[1])), "unchecked, the NaN reaches the weight")
		case AnomalyWarn:
			require.NoError(t, err)
			assert.Equal(t, []float32{4, -1}, v, "the step was skipped")
			require.Len(t, warned, 1)
			assert.Contains(t, warned[0], "NaN or Inf")
		case AnomalyStop:
			assert.ErrorContains(t, err, "anomaly")
			assert.Equal(t, []float32{4, -1}, v)
		}
	}
	_, err := ParseAnomalyMode("loud")
	assert.Error(t, err)
}
