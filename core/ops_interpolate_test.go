package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// interpolateOps run the cases of torch_interpolate.json
// (scripts/reference/interpolate.py): values and gradients against torch
// 1.13's, and by Gradcheck.
var interpolateOps = map[string]torchOp{
	"interpolate": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var o InterpolateOptions
		c.arg(t, "mode", &o.Mode)
		c.arg(t, "align_corners", &o.AlignCorners)
		c.arg(t, "size", &o.Size)
		c.arg(t, "scale", &o.Scale)
		c.arg(t, "recompute", &o.RecomputeScale)
		return e.Interpolate(in[0], o)
	},
}

func TestInterpolateMatchesTorch(t *testing.T) {
	runConvTorchFile(t, "testdata/torch_interpolate.json", interpolateOps, nil)
}

func TestInterpolateRefusals(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{1, 1, 2, 2}, 1, 2, 3, 4)
	for _, c := range []struct {
		o    InterpolateOptions
		want string
	}{
		{InterpolateOptions{Mode: "linear", Scale: []float64{2, 2}}, "mode linear needs a 3-d input"},
		{InterpolateOptions{Mode: "bicubic", Scale: []float64{2, 2}}, "mode \"bicubic\" is not supported"},
		{InterpolateOptions{Mode: "nearest", AlignCorners: true, Scale: []float64{2, 2}}, "align_corners is for the interpolating modes"},
		{InterpolateOptions{Mode: "nearest"}, "exactly one of size and scale_factor"},
		{InterpolateOptions{Mode: "nearest", Size: []int{3}}, "size [3] for 2 spatial dims"},
		{InterpolateOptions{Mode: "nearest", Scale: []float64{0.2, 1}}, "output size 0"},
		{InterpolateOptions{Mode: "bilinear", Scale: []float64{-1, 1}}, "positive finite"},
		{InterpolateOptions{Mode: "nearest", Size: []int{3, 3}, RecomputeScale: true}, "recompute_scale_factor needs scale_factor"},
	} {
		_, err := e.Interpolate(x, c.o)
		assert.ErrorContains(t, err, c.want)
	}
}
