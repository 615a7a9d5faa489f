package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmptyTensorsAsPyTorch: values and gradients of the ops that make
// elements out of an empty input, as torch 1.13 gives them: a sum 0, a
// product 1, a mean NaN, a matrix product over a dim of size 0 zeros, cat
// skipping empty pieces; and an empty output gives its inputs zero
// gradients (a narrow of length 0).
func TestEmptyTensorsAsPyTorch(t *testing.T) {
	e := newEngine(t)
	empty := func(shape ...int) *Tensor {
		z, err := Zeros(shape...)
		require.NoError(t, err)
		require.NoError(t, z.SetRequiresGrad(true))
		return z
	}
	x, w, b := empty(0, 3), host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6), host(t, []int{2, 3}, 1, 1, 1, 1, 1, 1)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, b.SetRequiresGrad(true))
	var sum, mean, prod, mm, joined, narrowed *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var c chain
		sum = c.do(func() (*Tensor, error) { return e.SumDim(x, 0, false) })
		mean = c.do(func() (*Tensor, error) { return e.Mean(x) })
		prod = c.do(func() (*Tensor, error) { return e.Prod(x, 0, false) })
		xw := c.do(func() (*Tensor, error) { return e.Matmul(empty(2, 0), empty(0, 3)) })
		mm = c.do(func() (*Tensor, error) { return e.Add(xw, w) }) // zeros + w
		joined = c.do(func() (*Tensor, error) { return e.Cat([]*Tensor{x, b, x}, 0) })
		narrowed = c.do(func() (*Tensor, error) { return e.Narrow(w, 0, 1, 0) })
		return c.err
	}))
	assert.Equal(t, []float32{0, 0, 0}, values(t, sum))
	assert.True(t, math.IsNaN(float64(values(t, mean)[0])), "the mean of nothing is NaN")
	assert.Equal(t, []float32{1, 1, 1}, values(t, prod))
	assert.Equal(t, values(t, w), values(t, mm))
	assert.Equal(t, []int{2, 3}, joined.Shape())
	assert.Equal(t, []int{0, 3}, narrowed.Shape())

	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var c chain
		j := c.do(func() (*Tensor, error) { return e.Cat([]*Tensor{x, b}, 0) })
		n := c.do(func() (*Tensor, error) { return e.Narrow(w, 0, 1, 0) })
		s := c.do(func() (*Tensor, error) { return e.Sum(n) })
		loss = c.do(func() (*Tensor, error) { return sumOf(e)(e.Scale(j, 3)) })
		loss = c.do(func() (*Tensor, error) { return e.Add(loss, s) })
		return c.err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 3}, x.Grad().Shape())
	assert.Equal(t, []float32{3, 3, 3, 3, 3, 3}, values(t, b.Grad()))
	assert.Equal(t, []float32{0, 0, 0, 0, 0, 0}, values(t, w.Grad()), "an input read only by an empty narrow")
}

// TestEmptyInputsAreRefusedByName: an op that would compute elements from
// an empty input it has no rule for refuses it, naming itself and the
// shape, and never reaches ggml.
func TestEmptyInputsAreRefusedByName(t *testing.T) {
	e := newEngine(t)
	z, err := Zeros(0, 3)
	require.NoError(t, err)
	_, err = e.newOp("probe", []int{2}, []*Tensor{z}, func(c ctx, in []node) (node, error) {
		t.Fatal("an empty input reached the graph")
		return node{}, nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "probe: an input of shape 0x3 has no elements")
	_, err = e.Max(z)
	assert.ErrorContains(t, err, "max: the tensor of shape 0x3 has no elements")
	_, _, err = e.MaxDim(z, 0, false)
	assert.ErrorContains(t, err, "max: dim 1 of shape 0x3 has size 0")
}
