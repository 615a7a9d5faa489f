package core

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
)

// gradOf sets p's gradient to c by one backward of sum(p*c).
func gradOf(t *testing.T, e *Engine, p, c *Tensor) {
	t.Helper()
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		loss, err = sumOf(e)(e.Mul(p, c))
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
}

func TestDiamondGradientsAreSummedOnce(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2}, 0.5, -1)
	require.NoError(t, x.SetRequiresGrad(true))
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		y, err := e.Exp(x) // y feeds three uses
		if err != nil {
			return err
		}
		yy, err := e.Mul(y, y)
		if err != nil {
			return err
		}
		loss, err = sumOf(e)(e.Add(yy, y))
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	want := []float64{}
	for _, v := range []float64{0.5, -1} {
		y := math.Exp(v)
		want = append(want, (2*y+1)*y)
	}
	assertClose(t, want, values(t, x.Grad()), 1e-5, "d/dx (e^2x + e^x)")
}

func TestGradientsAccumulateUntilZeroGrad(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{2}, 1, 2)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, w.MoveToDevice(e, residency.Persistent))
	for i := 0; i < 2; i++ { // two backward passes without zero_grad: 2x + 2x
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			loss, err = e.Sum(e.must(e.Mul(w, w)))
			return err
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
	}
	assertClose(t, []float64{4, 8}, values(t, w.Grad()), 1e-6, "accumulated")
	ZeroGrad([]*Tensor{w})
	assert.Nil(t, w.Grad())
}

func TestAnErrorMidStepLeavesTrainingIntact(t *testing.T) {
	train := func(faults bool) []float32 {
		e := newEngine(t)
		w := host(t, []int{3}, f32s(w0)...)
		opt, err := NewAdam(e, []*Tensor{w}, AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		require.NoError(t, err)
		target := host(t, []int{3}, f32s(tgt)...)
		for i := 0; i < 4; i++ {
			if faults {
				// A shape error inside the tape, a backward from a non-scalar,
				// an in-place change of a parameter inside the tape: each an
				// error that changes nothing.
				opt.ZeroGrad()
				assert.ErrorContains(t, e.WithGradTape(func() error {
					_, err := e.Add(w, host(t, []int{2}, 1, 2))
					return err
				}), "add: shapes 3 and 2")
				var y *Tensor
				require.NoError(t, e.WithGradTape(func() error {
					var err error
					y, err = e.Mul(w, w)
					if err == nil {
						err = e.Assign(w, y)
					}
					assert.ErrorContains(t, err, "inside with_grad_tape")
					return nil
				}))
				_, err := e.Backward(y)
				assert.ErrorContains(t, err, "one element")
				_, err = e.CrossEntropyLabels(host(t, []int{1, 3}, 1, 2, 3), []int{5})
				assert.ErrorContains(t, err, "out of range")
			}
			quadStep(t, e, w, target, opt.ZeroGrad, opt.Step)
		}
		return values(t, w)
	}
	assert.Equal(t, train(false), train(true))
}

// requires_grad changed between the forward and backward: the tape keeps
// what the forward recorded, and a leaf frozen since gets no gradient (as
// PyTorch's AccumulateGrad); one unfrozen since gets none either, and the
// gradients of the others are the forward's (mul and div read only the
// operands they saved then).
func TestRequiresGradChangedAfterTheForward(t *testing.T) {
	ops := map[string]func(e *Engine, x, w *Tensor) (*Tensor, error){
		"add": func(e *Engine, x, w *Tensor) (*Tensor, error) { return e.Add(x, w) },
		"mul": func(e *Engine, x, w *Tensor) (*Tensor, error) { return e.Mul(x, w) },
		"div": func(e *Engine, x, w *Tensor) (*Tensor, error) { return e.Div(x, w) },
		"exp": func(e *Engine, x, w *Tensor) (*Tensor, error) { return e.Mul(x, e.must(e.Exp(w))) },
		"linear": func(e *Engine, x, w *Tensor) (*Tensor, error) {
			return e.Linear(e.must(e.Reshape(x, 1, 3)), e.must(e.Reshape(w, 1, 3)))
		},
	}
	// x's gradient of sum(op(x, w)) at x = (1, 2, 3), w = (4, 5, 6).
	wantX := map[string][]float32{
		"add": {1, 1, 1}, "mul": {4, 5, 6}, "div": {0.25, 0.2, 1.0 / 6},
		"exp": {float32(math.Exp(4)), float32(math.Exp(5)), float32(math.Exp(6))}, "linear": {4, 5, 6},
	}
	for name, op := range ops {
		for _, freeze := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s freeze=%v", name, freeze), func(t *testing.T) {
				e := newEngine(t)
				x, w := host(t, []int{3}, 1, 2, 3), host(t, []int{3}, 4, 5, 6)
				require.NoError(t, x.SetRequiresGrad(true))
				require.NoError(t, w.SetRequiresGrad(freeze))
				var loss *Tensor
				require.NoError(t, e.WithGradTape(func() error {
					var err error
					loss, err = e.Sum(e.must(op(e, x, w)))
					return err
				}))
				require.NoError(t, w.SetRequiresGrad(!freeze))
				_, err := e.Backward(loss)
				require.NoError(t, err)
				assert.Nil(t, w.Grad(), "w's requires_grad changed since the forward: no gradient")
				assert.InDeltaSlice(t, wantX[name], values(t, x.Grad()), 1e-4)
			})
		}
	}
}
