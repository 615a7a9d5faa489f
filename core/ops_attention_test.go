package core

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAttentionReadsStridedRows: attention's products as devices build
// them (reading q, k and v where a projection's chunk, reshape and
// transpose left them: rowsMatmul), forced on the CPU, give the values and
// gradients of the products composed of Matmul, which tests/attention_test.go
// checks against PyTorch.
func TestAttentionReadsStridedRows(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	const b, h, tt, d = 2, 3, 5, 4
	xv := make([]float32, b*tt*3*h*d)
	wv := make([]float32, b*h*tt*d)
	for i := range xv {
		xv[i] = float32(rng.NormFloat64())
	}
	for i := range wv {
		wv[i] = float32(rng.NormFloat64())
	}
	run := func(force bool, o AttentionOptions, packed bool) ([]float32, []float32) {
		forceRowsMatmul = force
		defer func() { forceRowsMatmul = false }()
		e := newEngine(t)
		x := host(t, []int{b, tt, 3 * h * d}, xv...)
		require.NoError(t, x.SetRequiresGrad(true))
		w := host(t, []int{b, h, tt, d}, wv...)
		var y *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var c chain
			split := func(i int) *Tensor { // [b, h, t, d], a strided view of x
				n := c.do(func() (*Tensor, error) { return e.Narrow(x, 2, i*h*d, h*d) })
				r := c.do(func() (*Tensor, error) { return e.Reshape(n, b, tt, h, d) })
				v := c.do(func() (*Tensor, error) { return e.Transpose(r, 1, 2) })
				if packed {
					v = c.do(func() (*Tensor, error) { return e.Contiguous(v) })
				}
				return v
			}
			q, k, v := split(0), split(1), split(2)
			y = c.do(func() (*Tensor, error) { return e.ScaledDotProductAttention(q, k, v, o) })
			loss := c.do(func() (*Tensor, error) { return e.Mul(y, w) })
			loss = c.do(func() (*Tensor, error) { return e.Sum(loss) })
			if c.err != nil {
				return c.err
			}
			_, err := e.Backward(loss)
			return err
		}))
		return values(t, y), values(t, x.Grad())
	}
	for _, c := range []struct {
		name   string
		o      AttentionOptions
		packed bool
	}{
		{"causal, strided heads", AttentionOptions{Causal: true}, false},
		{"scaled, strided heads", AttentionOptions{Scale: 0.3}, false},
		{"causal, packed heads", AttentionOptions{Causal: true}, true},
	} {
		wantY, wantG := run(false, c.o, c.packed)
		gotY, gotG := run(true, c.o, c.packed)
		require.InDeltaSlice(t, wantY, gotY, 1e-5, c.name+": values")
		require.InDeltaSlice(t, wantG, gotG, 1e-5, c.name+": gradient")
	}
}
