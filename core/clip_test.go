package core

import (
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
