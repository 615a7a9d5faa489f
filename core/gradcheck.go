package core

import (
	"fmt"
	"math"
)

// Gradcheck compares the gradients that backward computes for f at inputs
// with central differences (f(x+eps) - f(x-eps)) / 2eps, element by element.
// f must return a one-element tensor. The inputs are not changed. It
// returns an error naming the first input and element that disagree by
// more than atol + rtol*|numeric|.
func Gradcheck(e *Engine, f func(xs []*Tensor) (*Tensor, error), inputs []*Tensor, eps, atol, rtol float64) error {
	values := make([][]float32, len(inputs))
	for i, x := range inputs {
		v, err := x.Float32s()
		if err != nil {
			return fmt.Errorf("gradcheck: input %d: %w", i+1, err)
		}
		values[i] = append([]float32(nil), v...)
	}
	leaves := func(vals [][]float32) []*Tensor {
		out := make([]*Tensor, len(vals))
		for i, v := range vals {
			out[i], _ = FromFloat32(append([]float32(nil), v...), inputs[i].shape...)
		}
		return out
	}

	params := leaves(values)
	for _, p := range params {
		p.requiresGrad = true
	}
	var loss *Tensor
	err := e.WithGradTape(func() error {
		var err error
		loss, err = f(params)
		return err
	})
	if err != nil {
		return fmt.Errorf("gradcheck: %w", err)
	}
	if _, err := e.Backward(loss); err != nil {
		return fmt.Errorf("gradcheck: %w", err)
	}
	analytic := make([][]float32, len(params))
	for i, p := range params {
		if p.Grad() == nil {
			analytic[i] = make([]float32, p.Numel())
			continue
		}
		if analytic[i], err = p.Grad().Float32s(); err != nil {
			return fmt.Errorf("gradcheck: %w", err)
		}
	}

	eval := func(vals [][]float32) (float64, error) {
		y, err := f(leaves(vals))
		if err != nil {
			return 0, err
		}
		v, err := y.Item()
		return float64(v), err
	}
	for i := range values {
		for j := range values[i] {
			orig := values[i][j]
			values[i][j] = orig + float32(eps)
			up, err := eval(values)
			if err != nil {
				return fmt.Errorf("gradcheck: %w", err)
			}
			values[i][j] = orig - float32(eps)
			down, err := eval(values)
			if err != nil {
				return fmt.Errorf("gradcheck: %w", err)
			}
			values[i][j] = orig
			numeric := (up - down) / (2 * eps)
			got := float64(analytic[i][j])
			if math.IsNaN(got) || math.Abs(got-numeric) > atol+rtol*math.Abs(numeric) {
				return fmt.Errorf("gradcheck: input %d element %d: backward gives %.6g, central differences %.6g", i+1, j+1, got, numeric)
			}
		}
	}
	return nil
}
