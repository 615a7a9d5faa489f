package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// placements are the storages a base can have: the host, a device pool,
// half precision on the device, and a pending op result.
func placements(t *testing.T, e *Engine, shape []int, v ...float32) map[string]*Tensor {
	t.Helper()
	out := map[string]*Tensor{"host": host(t, shape, append([]float32(nil), v...)...)}
	for name, p := range map[string]struct {
		scope residency.Scope
		dtype ggmlcgo.Type
	}{"pass": {residency.Pass, ggmlcgo.F32}, "persistent": {residency.Persistent, ggmlcgo.F32}, "persistent bf16": {residency.Persistent, ggmlcgo.BF16}} {
		d, err := host(t, shape, v...).ToDevice(e, p.scope, p.dtype)
		require.NoError(t, err)
		out[name] = d
	}
	pending, err := e.Scale(host(t, shape, v...), 1)
	require.NoError(t, err)
	out["pending"] = pending
	return out
}

func TestInPlaceThroughAViewChangesTheBase(t *testing.T) {
	e := newEngine(t)
	views := []struct {
		name string
		view func(x *Tensor) (*Tensor, error)
		fill float32
		want []float32
	}{
		{"narrow rows", func(x *Tensor) (*Tensor, error) { return e.Narrow(x, 0, 1, 1) }, 7, []float32{1, 2, 3, 7, 7, 7}},
		{"narrow cols", func(x *Tensor) (*Tensor, error) { return e.Narrow(x, 1, 1, 2) }, 7, []float32{1, 7, 7, 4, 7, 7}},
		{"view", func(x *Tensor) (*Tensor, error) { return e.View(x, 6) }, 0, []float32{0, 0, 0, 0, 0, 0}},
		{"transpose then narrow", func(x *Tensor) (*Tensor, error) {
			tr, err := e.Transpose(x, 0, 1) // [3, 2]
			if err != nil {
				return nil, err
			}
			return e.Narrow(tr, 0, 2, 1) // column 3 of x
		}, 9, []float32{1, 2, 9, 4, 5, 9}},
		{"permute", func(x *Tensor) (*Tensor, error) { return e.Permute(x, 1, 0) }, 5, []float32{5, 5, 5, 5, 5, 5}},
	}
	for _, v := range views {
		for place, x := range placements(t, e, []int{2, 3}, 1, 2, 3, 4, 5, 6) {
			t.Run(v.name+"/"+place, func(t *testing.T) {
				view, err := v.view(x)
				require.NoError(t, err)
				require.True(t, view.IsView())
				fill, err := Full(v.fill, view.Shape()...)
				require.NoError(t, err)
				require.NoError(t, e.Assign(view, fill))
				assert.Equal(t, v.want, values(t, x), "the base changed through the view")
				got := values(t, view)
				for _, g := range got {
					assert.Equal(t, v.fill, g, "the view reads the new values")
				}
			})
		}
	}
}

func TestAViewSeesLaterChangesOfItsBase(t *testing.T) {
	e := newEngine(t)
	for place, x := range placements(t, e, []int{2, 2}, 1, 2, 3, 4) {
		t.Run(place, func(t *testing.T) {
			tr, err := e.Transpose(x, 0, 1)
			require.NoError(t, err)
			assert.Equal(t, []float32{1, 3, 2, 4}, values(t, tr))
			require.NoError(t, e.Assign(x, host(t, []int{2, 2}, 10, 20, 30, 40)))
			assert.Equal(t, []float32{10, 30, 20, 40}, values(t, tr))
			y, err := e.AddScalar(tr, 1) // an op reads the view's current values
			require.NoError(t, err)
			assert.Equal(t, []float32{11, 31, 21, 41}, values(t, y))
		})
	}
}

func TestOpsReadStridedViews(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3, 4}, func() []float32 {
		v := make([]float32, 24)
		for i := range v {
			v[i] = float32(i)
		}
		return v
	}()...)
	p, err := e.Permute(x, 2, 0, 1) // [4, 2, 3]: p[i][j][k] = x[j][k][i]
	require.NoError(t, err)
	assert.Equal(t, []int{4, 2, 3}, p.Shape())
	y, err := e.Scale(p, 1)
	require.NoError(t, err)
	got := values(t, y)
	for i := 0; i < 4; i++ {
		for j := 0; j < 2; j++ {
			for k := 0; k < 3; k++ {
				assert.Equal(t, float32(j*12+k*4+i), got[i*6+j*3+k])
			}
		}
	}
	assert.Equal(t, got, values(t, p), "gathering on the host agrees with the graph")
	_, err = e.View(p, 24)
	assert.ErrorIs(t, err, ErrShape, "a strided tensor cannot be viewed, only reshaped")
	r, err := e.Reshape(p, 24)
	require.NoError(t, err)
	assert.Equal(t, got, values(t, r))
}

func TestViewsOfParametersChangeThemUnderNoGrad(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{2, 2}, 1, 2, 3, 4)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, w.MoveToDevice(e, residency.Persistent))
	require.NoError(t, e.WithGradTape(func() error {
		row, err := e.Narrow(w, 0, 0, 1)
		require.NoError(t, err)
		assert.Error(t, e.Assign(row, host(t, []int{1, 2}, 0, 0)), "a parameter is not changed in place while the tape records")
		return e.NoGrad(func() error {
			row, err := e.Narrow(w, 0, 0, 1)
			require.NoError(t, err)
			return e.Assign(row, host(t, []int{1, 2}, 0, 0))
		})
	}))
	assert.Equal(t, []float32{0, 0, 3, 4}, values(t, w))
}

func TestViewGradientsReachTheBase(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	require.NoError(t, x.SetRequiresGrad(true))
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		tr := e.must(e.Transpose(x, 0, 1))       // [3, 2]
		col := e.must(e.Narrow(tr, 0, 1, 2))     // rows 2..3 of the transpose
		flat := e.must(e.Reshape(col, 4))        // a copy: col is strided
		w := host(t, []int{4}, 1, 10, 100, 1000) // picks x[0][1], x[1][1], x[0][2], x[1][2]
		loss = e.must(sumOf(e)(e.Mul(flat, w)))
		return nil
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 100, 0, 10, 1000}, values(t, x.Grad()))
}

func TestCloneIsADifferentiableCopy(t *testing.T) {
	e := newEngine(t)
	p := host(t, []int{3}, 1, 2, 3)
	require.NoError(t, p.SetRequiresGrad(true))
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		c := e.must(e.Clone(p))
		loss = e.must(sumOf(e)(e.Mul(c, p)))
		return nil
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, values(t, p.Grad()), "d/dp sum(clone(p)*p) = 2p")

	c := e.must(e.Clone(p))
	require.NoError(t, e.Assign(c, host(t, []int{3}, 0, 0, 0)))
	assert.Equal(t, []float32{1, 2, 3}, values(t, p), "a clone owns its storage")
	d := p.Detach()
	require.NoError(t, e.Assign(d, host(t, []int{3}, 7, 8, 9)))
	assert.Equal(t, []float32{7, 8, 9}, values(t, p), "detach shares storage, as PyTorch's")
}

// An in-place change of a tensor the tape saved, made after the forward and
// before backward, is refused: the gradient would use the new values.
func TestBackwardRefusesInputsChangedInPlace(t *testing.T) {
	e := newEngine(t)
	for _, through := range []string{"tensor", "view"} {
		t.Run(through, func(t *testing.T) {
			p := host(t, []int{2}, 1, 2)
			require.NoError(t, p.SetRequiresGrad(true))
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				loss = e.must(sumOf(e)(e.Mul(p, p)))
				return nil
			}))
			target := p
			if through == "view" {
				target = e.must(e.Narrow(p, 0, 1, 1))
			}
			ten, err := Full(10, target.Shape()...)
			require.NoError(t, err)
			require.NoError(t, e.Assign(target, ten))
			_, err = e.Backward(loss)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "changed in place")
			assert.Contains(t, err.Error(), "mul")
		})
	}
	// Ops that do not save their inputs (add) still differentiate.
	p := host(t, []int{2}, 1, 2)
	require.NoError(t, p.SetRequiresGrad(true))
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		loss = e.must(sumOf(e)(e.AddScalar(p, 1)))
		return nil
	}))
	require.NoError(t, e.Assign(p, host(t, []int{2}, 5, 5)))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1}, values(t, p.Grad()))
}

func TestMovingAParameterKeepsItsGradient(t *testing.T) {
	e := newEngine(t)
	p := host(t, []int{2}, 1, 2)
	require.NoError(t, p.SetRequiresGrad(true))
	gradOf(t, e, p, host(t, []int{2}, 3, 4))
	for _, dtype := range []ggmlcgo.Type{ggmlcgo.F32, ggmlcgo.BF16} {
		require.NoError(t, p.MoveToDeviceAs(e, residency.Persistent, dtype))
		require.NotNil(t, p.Grad(), "moved to %v", dtype)
		assert.Equal(t, []float32{3, 4}, values(t, p.Grad()))
	}
}

// A 4-d permutation that moves the innermost dim (attention's K transposed)
// is read through ggml's permute (permutedView), on the device, with the
// same values as a gather on the host.
func TestFourDimPermutationsAreReadOnTheDevice(t *testing.T) {
	e := newEngine(t)
	v := make([]float32, 2*3*4*5)
	for i := range v {
		v[i] = float32(i)
	}
	x := host(t, []int{2, 3, 4, 5}, v...)
	for _, axes := range [][]int{{0, 1, 3, 2}, {3, 2, 1, 0}, {1, 3, 0, 2}} {
		p, err := e.Permute(x, axes...)
		require.NoError(t, err)
		_, _, _, ok := viewGeometry(p, 4)
		require.False(t, ok, "a view ggml cannot step through as it is")
		y, err := e.Scale(p, 1)
		require.NoError(t, err)
		assert.Equal(t, values(t, p), values(t, y), "axes %v", axes)
	}
}

// The same of a strided 4-d view that is no permutation of its base (heads
// split from a narrowed projection, transposed): read through a ggml view
// with its packed dim innermost, permuted back (permutedView), in the one
// graph that computes the base, not by a gather on the host.
func TestStridedFourDimTransposesAreReadOnTheDevice(t *testing.T) {
	e := newEngine(t)
	v := make([]float32, 2*5*36)
	for i := range v {
		v[i] = float32(i)
	}
	x := host(t, []int{2, 5, 36}, v...)
	for _, c := range []struct {
		name  string
		shape []int
		axes  []int
	}{
		{"keys transposed", []int{2, 5, 3, 4}, []int{0, 2, 3, 1}},
		{"heads reversed", []int{2, 5, 3, 4}, []int{3, 2, 1, 0}},
		{"rows swapped", []int{2, 5, 3, 4}, []int{1, 0, 3, 2}},
	} {
		base, err := e.Scale(x, 2) // pending: a gather would compute it on its own
		require.NoError(t, err)
		var ch chain
		n := ch.do(func() (*Tensor, error) { return e.Narrow(base, 2, 12, 12) })
		r := ch.do(func() (*Tensor, error) { return e.Reshape(n, c.shape...) })
		p := ch.do(func() (*Tensor, error) { return e.Permute(r, c.axes...) })
		require.NoError(t, ch.err)
		require.Same(t, base.storage(), p.storage(), "%s: a view of the projection", c.name)
		before := e.Stats().GraphComputes
		y, err := e.Scale(p, 1)
		require.NoError(t, err)
		got := values(t, y)
		assert.Equal(t, before+1, e.Stats().GraphComputes, "%s: one graph", c.name)
		src := make([]float32, len(v))
		for i := range v {
			src[i] = 2 * v[i]
		}
		assert.Equal(t, gatherView(p, src), got, c.name)
	}
}
