package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClipGradNormAndValue(t *testing.T) {
	e := newEngine(t)
	p := host(t, []int{2}, 1, 1)
	_, err := NewSGD(e, []*Tensor{p}, SGDOptions{LR: 0.1}) // makes p a resident parameter
	require.NoError(t, err)
	gradOf(t, e, p, host(t, []int{2}, 3, 4))
	norm, err := e.ClipGradNorm([]*Tensor{p}, 1)
	require.NoError(t, err)
	n, err := norm.Item()
	require.NoError(t, err)
	assert.InDelta(t, 5, n, 1e-5)
	assertClose(t, []float64{0.6, 0.8}, values(t, p.Grad()), 1e-5, "clipped to norm 1")

	ZeroGrad([]*Tensor{p})
	gradOf(t, e, p, host(t, []int{2}, 3, -4))
	require.NoError(t, e.ClipGradValue([]*Tensor{p}, 3.5))
	assertClose(t, []float64{3, -3.5}, values(t, p.Grad()), 1e-6, "clamped")
	_, err = e.ClipGradNorm([]*Tensor{p}, 0)
	assert.Error(t, err)
}

// TestClipSettings: NaN (and <= 0) limits are argument errors; +Inf is
// torch's "no limit": the norm is returned and nothing is clipped.
func TestClipSettings(t *testing.T) {
	e := newEngine(t)
	p := host(t, []int{2}, 1, 1)
	_, err := NewSGD(e, []*Tensor{p}, SGDOptions{LR: 0.1})
	require.NoError(t, err)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"norm nan", func() error { _, err := e.ClipGradNorm([]*Tensor{p}, nan); return err }},
		{"norm -inf", func() error { _, err := e.ClipGradNorm([]*Tensor{p}, -inf); return err }},
		{"norm 0", func() error { _, err := e.ClipGradNorm([]*Tensor{p}, 0); return err }},
		{"value nan", func() error { return e.ClipGradValue([]*Tensor{p}, nan) }},
		{"value -inf", func() error { return e.ClipGradValue([]*Tensor{p}, -inf) }},
		{"value -1", func() error { return e.ClipGradValue([]*Tensor{p}, -1) }},
	} {
		err := c.run()
		assert.ErrorIs(t, err, ErrArgument, c.name)
	}

	gradOf(t, e, p, host(t, []int{2}, 3, -4))
	norm, err := e.ClipGradNorm([]*Tensor{p}, inf)
	require.NoError(t, err)
	n, err := norm.Item()
	require.NoError(t, err)
	assert.InDelta(t, 5, n, 1e-5)
	assertClose(t, []float64{3, -4}, values(t, p.Grad()), 0, "max_norm inf clips nothing")
	require.NoError(t, e.ClipGradValue([]*Tensor{p}, inf))
	assertClose(t, []float64{3, -4}, values(t, p.Grad()), 0, "clip_value inf clamps nothing")
}
