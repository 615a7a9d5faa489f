package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// convTransposeOps run the cases of torch_conv_transpose.json
// (scripts/reference/conv_transpose.py): values and gradients against
// torch 1.13's, and by Gradcheck.
var convTransposeOps = map[string]torchOp{
	"conv_transpose2d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.ConvTranspose2d(in[0], in[1], bias(in), ConvTransposeOptions{ConvOptions: ConvOptions{Stride: c.ints(t, "stride"),
			Padding: c.ints(t, "padding"), Dilation: c.ints(t, "dilation"), Groups: c.int1(t, "groups")}, OutputPadding: c.ints(t, "output_padding")})
	},
	"conv_transpose1d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.ConvTranspose1d(in[0], in[1], bias(in), ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{1, c.int1(t, "stride")},
			Padding: [2]int{0, c.int1(t, "padding")}, Dilation: [2]int{1, c.int1(t, "dilation")}, Groups: c.int1(t, "groups")},
			OutputPadding: [2]int{0, c.int1(t, "output_padding")}})
	},
}

func TestConvTransposeMatchesTorch(t *testing.T) {
	runConvTorchFile(t, "testdata/torch_conv_transpose.json", convTransposeOps, nil)
}

// TestConvTransposeIsConvsAdjoint: <conv(x, w), y> = <x, conv_transpose(y,
// w)> for the same window, an identity independent of torch's values, and
// the gradient of a convolution's input is the transposed convolution.
func TestConvTransposeIsConvsAdjoint(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{1, 2, 5, 4}, seq(40)...)
	w := host(t, []int{3, 2, 3, 2}, seq(36)...)
	o := ConvOptions{Stride: [2]int{2, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 2}, Groups: 1}
	cx, err := e.Conv2d(x, w, nil, o)
	require.NoError(t, err)
	y := host(t, cx.Shape(), seq(int(cx.Numel()))...)
	ty, err := e.ConvTranspose2d(y, w, nil, ConvTransposeOptions{ConvOptions: o})
	require.NoError(t, err)
	assert.Equal(t, x.Shape(), ty.Shape())
	dot := func(a, b *Tensor) float64 {
		s := 0.0
		for i, v := range values(t, a) {
			s += float64(v) * float64(values(t, b)[i])
		}
		return s
	}
	l, r := dot(cx, y), dot(x, ty)
	assert.InDelta(t, l, r, 1e-4*max(1, l))
}

// seq is n values in a fixed pseudo-random order in [-1, 1].
func seq(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((i*37)%17)/8 - 1
	}
	return out
}

func TestConvTransposeRefusals(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{1, 2, 3, 3}, seq(18)...)
	w := host(t, []int{2, 3, 2, 2}, seq(24)...)
	for _, c := range []struct {
		x, w, b *Tensor
		o       ConvTransposeOptions
		want    string
	}{
		{x, w, nil, ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{2, 2}, Dilation: [2]int{1, 1}, Groups: 1}, OutputPadding: [2]int{2, 0}}, "output_padding"},
		{x, w, nil, ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{0, 1}, Dilation: [2]int{1, 1}, Groups: 1}}, "stride"},
		{x, w, nil, ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 3}}, "groups 3"},
		{x, w, nil, ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{1, 1}, Padding: [2]int{3, 0}, Dilation: [2]int{1, 1}, Groups: 1}}, "too large"},
		{x, host(t, []int{3, 3, 2, 2}, seq(36)...), nil, ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}}, "input channels"},
		{x, w, host(t, []int{2}, 1, 2), ConvTransposeOptions{ConvOptions: ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}}, "bias"},
	} {
		_, err := e.ConvTranspose2d(c.x, c.w, c.b, c.o)
		assert.ErrorContains(t, err, c.want)
	}
}
