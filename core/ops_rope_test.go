package core

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// ropeRef is Rope worked out in float64 for x [T, H, D] (or [B, T, H, D]).
func ropeRef(x []float32, shape []int, pos []int, o ggmlcgo.RopeOptions) []float64 {
	n := len(shape)
	T, H, D := shape[n-3], shape[n-2], shape[n-1]
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	for base := 0; base < len(x); base += T * H * D {
		for t := 0; t < T; t++ {
			for h := 0; h < H; h++ {
				row := base + (t*H+h)*D
				for i := 0; i < o.Dims/2; i++ {
					theta := float64(pos[t]) * float64(o.Scale) * math.Pow(float64(o.Base), -2*float64(i)/float64(o.Dims))
					a, b := row+2*i, row+2*i+1
					if o.NeoX {
						a, b = row+i, row+i+o.Dims/2
					}
					x0, x1 := float64(x[a]), float64(x[b])
					out[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
					out[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
				}
			}
		}
	}
	return out
}

// Rope against the rotation worked out in float64: llama's pairs and
// NeoX's, all dims or the leading ones, a position scale, 3-d and 4-d;
// its gradient by central differences.
func TestRope(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	cases := []struct {
		shape []int
		pos   []int
		o     ggmlcgo.RopeOptions
	}{
		{[]int{5, 2, 8}, []int{0, 1, 2, 3, 4}, ggmlcgo.RopeOptions{Dims: 8, Base: 10000, Scale: 1}},
		{[]int{3, 3, 6}, []int{7, 100, 2047}, ggmlcgo.RopeOptions{Dims: 4, Base: 500000, Scale: 0.25}},
		{[]int{2, 4, 3, 8}, []int{3, 9, 1, 0}, ggmlcgo.RopeOptions{Dims: 8, NeoX: true, Base: 10000, Scale: 1}},
	}
	for _, c := range cases {
		e := newEngine(t)
		v := make([]float32, numel(c.shape))
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		got := values(t, e.must(e.Rope(host(t, c.shape, v...), c.pos, c.o)))
		want := ropeRef(v, c.shape, c.pos, c.o)
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-4*(1+math.Abs(want[i])), "%v %+v: element %d", c.shape, c.o, i)
		}
		small := []int{2, 2, c.o.Dims + 2}
		x := host(t, small, v[:numel(small)]...)
		require.NoError(t, Gradcheck(e, func(xs []*Tensor) (*Tensor, error) {
			y, err := e.Rope(xs[0], []int{5, 11}, c.o)
			if err != nil {
				return nil, err
			}
			return e.Sum(e.must(e.Mul(y, y)))
		}, []*Tensor{x}, 1e-2, 2e-3, 2e-2), "%+v", c.o)
	}
}

func TestRopeRefusals(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 1, 4}, make([]float32, 8)...)
	o := ggmlcgo.RopeOptions{Dims: 4, Base: 10000, Scale: 1}
	_, err := e.Rope(x, []int{0}, o)
	assert.ErrorContains(t, err, "T the 1 positions, got shape 2x1x4")
	_, err = e.Rope(x, []int{0, 1}, ggmlcgo.RopeOptions{Dims: 3, Base: 10000, Scale: 1})
	assert.ErrorContains(t, err, "3 rotated dims")
	_, err = e.Rope(x, []int{0, 1}, ggmlcgo.RopeOptions{Dims: 6, Base: 10000, Scale: 1})
	assert.ErrorContains(t, err, "6 rotated dims for heads of 4")
	_, err = e.Rope(x, []int{0, 1}, ggmlcgo.RopeOptions{Dims: 4, Base: 0, Scale: 1})
	assert.ErrorContains(t, err, "positive and finite")
	_, err = e.Rope(x, []int{0, 1 << 40}, o)
	assert.ErrorContains(t, err, "does not fit an int32")
}
