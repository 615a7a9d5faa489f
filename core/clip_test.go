package core

import (
	"math"
	"testing"

	"github.com/gglua/gglua/ggmlcgo"

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

// TestClipGradNormTypes: torch's norm_type, over two parameters' gradients
// [3, -4, 0] and [1]: the 2-norm sqrt(26), the 1-norm 8, the 3-norm 92^(1/3)
// and the largest |g| for inf; each clips by max_norm / (norm + 1e-6).
func TestClipGradNormTypes(t *testing.T) {
	for _, c := range []struct {
		p, norm float64
	}{{2, math.Sqrt(26)}, {1, 8}, {3, math.Cbrt(92)}, {math.Inf(1), 4}} {
		e := newEngine(t)
		a, b := host(t, []int{3}, 0, 0, 0), host(t, []int{1}, 0)
		_, err := NewSGD(e, []*Tensor{a, b}, SGDOptions{LR: 0.1})
		require.NoError(t, err)
		gradOf(t, e, a, host(t, []int{3}, 3, -4, 0))
		gradOf(t, e, b, host(t, []int{1}, 1))
		norm, err := e.ClipGradNormType([]*Tensor{a, b}, 1, c.p)
		require.NoError(t, err)
		n, err := norm.Item()
		require.NoError(t, err)
		assert.InDelta(t, c.norm, n, 1e-5*c.norm, "norm_type %g", c.p)
		k := 1 / (c.norm + 1e-6)
		assertClose(t, []float64{3 * k, -4 * k, 0}, values(t, a.Grad()), 1e-5, "clipped")
	}
	_, err := newEngine(t).ClipGradNormType(nil, 1, 0)
	assert.ErrorIs(t, err, ErrArgument)
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

// Clipping scales a resident parameter's gradient buffer in place: the
// one node that writes it is the product (no product elsewhere copied
// back), with the values of a product.
func TestClipScalesResidentGradientsInPlace(t *testing.T) {
	e := newEngine(t)
	e.SetEager(false) // the clip's nodes in one graph, whatever GGLUA_EAGER says
	p := host(t, []int{2}, 1, 1)
	q := host(t, []int{3}, 1, 1, 1)
	_, err := NewSGD(e, []*Tensor{p, q}, SGDOptions{LR: 0.1})
	require.NoError(t, err)
	gradOf(t, e, p, host(t, []int{2}, 3, 4))
	gradOf(t, e, q, host(t, []int{3}, 0, 0, 12))
	values(t, p.Grad()) // both computed: the clip's graph is its own
	values(t, q.Grad())
	writers := map[int][]string{}
	e.beforeCompute = func(g *ggmlcgo.Graph) {
		for i, x := range []*Tensor{p, q} {
			buf, err := x.grad.handle.Tensor()
			require.NoError(t, err)
			for _, n := range g.Nodes() {
				if n.Data() == buf.Data() {
					writers[i] = append(writers[i], n.OpName())
				}
			}
		}
	}
	norm, err := e.ClipGradNorm([]*Tensor{p, q}, 6.5)
	require.NoError(t, err)
	n, err := norm.Item()
	require.NoError(t, err)
	assert.InDelta(t, 13, n, 1e-5)
	assert.Len(t, writers, 2)
	for i, ops := range writers {
		assert.Equal(t, []string{"MUL"}, ops, "parameter %d", i)
	}
	assertClose(t, []float64{1.5, 2}, values(t, p.Grad()), 1e-5, "halved")
	assertClose(t, []float64{0, 0, 6}, values(t, q.Grad()), 1e-5, "halved")
}
