package core

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// TestAttentionReadsStridedRows: attention's products as devices build
// them (reading q, k and v where a projection's chunk, reshape and
// transpose left them: rowsMatmul), forced on the CPU, give the values and
// gradients of the products composed of Matmul, which tests/attention_test.go
// checks against PyTorch.
func TestAttentionReadsStridedRows(t *testing.T) {
	run := attentionRun(t)
	for _, c := range []struct {
		name   string
		o      AttentionOptions
		packed bool
	}{
		{"causal, strided heads", AttentionOptions{Causal: true}, false},
		{"scaled, strided heads", AttentionOptions{Scale: 0.3}, false},
		{"causal, packed heads", AttentionOptions{Causal: true}, true},
	} {
		wantY, wantG := run(false, c.o, c.packed, ggmlcgo.F32, ggmlcgo.F32)
		gotY, gotG := run(true, c.o, c.packed, ggmlcgo.F32, ggmlcgo.F32)
		require.InDeltaSlice(t, wantY, gotY, 1e-5, c.name+": values")
		require.InDeltaSlice(t, wantG, gotG, 1e-5, c.name+": gradient")
	}
}

// TestAttentionUnderAutocast: under autocast the devices' attention (forced
// on the CPU) rounds its products as the composed one does, values and
// gradients, and a backward run inside autocast after an f32 forward stays
// f32 (its products are built at backward time).
func TestAttentionUnderAutocast(t *testing.T) {
	run := attentionRun(t)
	o := AttentionOptions{Causal: true}
	wantY, wantG := run(false, o, false, ggmlcgo.BF16, ggmlcgo.BF16)
	gotY, gotG := run(true, o, false, ggmlcgo.BF16, ggmlcgo.BF16)
	require.InDeltaSlice(t, wantY, gotY, 1e-6, "values")
	require.InDeltaSlice(t, wantG, gotG, 1e-6, "gradient")
	f32Y, f32G := run(true, o, false, ggmlcgo.F32, ggmlcgo.F32)
	require.False(t, slices.EqualFunc(f32Y, gotY, func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-4 }), "autocast changed nothing")
	_, bwdG := run(true, o, false, ggmlcgo.F32, ggmlcgo.BF16)
	require.InDeltaSlice(t, f32G, bwdG, 1e-6, "backward inside autocast after an f32 forward")
}

// attentionRun returns run(force, o, packed, fwd, bwd): attention of heads
// split from one projection x (strided views, or packed copies), its values
// and x's gradient of sum(y * w), the forward under autocast type fwd and
// the backward under bwd, attention's device products forced or not.
func attentionRun(t *testing.T) func(force bool, o AttentionOptions, packed bool, fwd, bwd ggmlcgo.Type) ([]float32, []float32) {
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
	return func(force bool, o AttentionOptions, packed bool, fwd, bwd ggmlcgo.Type) ([]float32, []float32) {
		forceRowsMatmul, forceComposedAttention = force, true // the products of the composed attention
		defer func() { forceRowsMatmul, forceComposedAttention = false, false }()
		e := newEngine(t)
		x := host(t, []int{b, tt, 3 * h * d}, xv...)
		require.NoError(t, x.SetRequiresGrad(true))
		w := host(t, []int{b, h, tt, d}, wv...)
		var y, loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			return e.Autocast(fwd, func() error {
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
				loss = c.do(func() (*Tensor, error) { return e.Mul(y, w) })
				loss = c.do(func() (*Tensor, error) { return e.Sum(loss) })
				return c.err
			})
		}))
		require.NoError(t, e.Autocast(bwd, func() error {
			_, err := e.Backward(loss)
			return err
		}))
		return values(t, y), values(t, x.Grad())
	}
}

// The causal bias is made once per shape and shared by a step's layers
// (one upload a step), and the kept shapes are bounded.
func TestCausalBiasIsMadeOncePerShape(t *testing.T) {
	e := newEngine(t)
	a, err := e.causalBias(2, 3)
	require.NoError(t, err)
	b, err := e.causalBias(2, 3)
	require.NoError(t, err)
	assert.Same(t, a, b)
	inf := float32(math.Inf(-1))
	assert.Equal(t, []float32{0, inf, inf, 0, 0, inf}, values(t, a))
	for n := 1; n <= 20; n++ {
		_, err := e.causalBias(n, n)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, len(e.causal), 8)
	big, err := e.causalBias(1025, 1024)
	require.NoError(t, err)
	again, err := e.causalBias(1025, 1024)
	require.NoError(t, err)
	assert.NotSame(t, big, again, "a large bias is not kept")
}
