package core

import (
	"errors"

	"github.com/gglua/gglua/ggmlcgo"
)

// setGrad replaces p's gradient by g: in place for a persistent gradient
// buffer (no new memory), by reference otherwise.
func (e *Engine) setGrad(p, g *Tensor) error {
	if p.hasGradBuffer() {
		return e.writeInPlace(p.grad, g)
	}
	p.grad = g
	return nil
}

// hasGradBuffer reports whether p's gradient is a persistent buffer of
// its own, written in place (a resident parameter's).
func (p *Tensor) hasGradBuffer() bool {
	return p.grad != nil && p.grad.handle != nil && p.persistent()
}

// ClipGradNorm scales the gradients of params so that their global L2 norm
// is at most maxNorm, on the device, and returns that norm (before
// clipping) as a pending one-element tensor. maxNorm may be +Inf, as in
// torch: the norm is computed and nothing is clipped.
func (e *Engine) ClipGradNorm(params []*Tensor, maxNorm float32) (*Tensor, error) {
	if !(maxNorm > 0) { // NaN too
		return nil, argErrorf("clip_grad_norm: max_norm must be > 0, got %g", maxNorm)
	}
	var total *Tensor
	var grads []*Tensor
	err := e.NoGrad(func() error {
		for _, p := range params {
			g := p.Grad()
			if g == nil {
				continue
			}
			sq, err := e.Mul(g, g)
			if err == nil {
				sq, err = e.Sum(sq)
			}
			if err == nil && total != nil {
				sq, err = e.Add(total, sq)
			}
			if err != nil {
				return err
			}
			total, grads = sq, append(grads, p)
		}
		if total == nil {
			return errors.New("clip_grad_norm: no parameter has a gradient")
		}
		norm, err := e.Sqrt(total)
		if err != nil {
			return err
		}
		total = norm
		// coef = min(1, maxNorm / (norm + 1e-6)), as PyTorch
		coef, err := e.AddScalar(norm, 1e-6)
		if err == nil {
			coef, err = e.Pow(coef, -1)
		}
		if err == nil {
			coef, err = e.Scale(coef, maxNorm)
		}
		if err == nil {
			coef, err = e.Clamp(coef, 0, 1)
		}
		if err != nil {
			return err
		}
		for _, p := range grads {
			if err := e.scaleGrad(p, coef); err != nil {
				return err
			}
		}
		return nil
	})
	return total, err
}

// scaleGrad multiplies p's gradient by coef (one element): a persistent
// gradient buffer in place, one kernel (a product and a copy back would be
// two, for every parameter of every step).
func (e *Engine) scaleGrad(p, coef *Tensor) error {
	g := p.Grad()
	if !p.hasGradBuffer() || g.dtype != ggmlcgo.F32 {
		scaled, err := e.Mul(g, coef)
		if err != nil {
			return err
		}
		return e.setGrad(p, scaled)
	}
	return e.inPlace(g, []*Tensor{coef}, func(c ctx, base node, in []node) (node, error) {
		return c.MulInplace(base, in[0])
	})
}

// ClipGradValue clamps every gradient element of params to [-v, v]; v may
// be +Inf (nothing is clamped), as in torch.
func (e *Engine) ClipGradValue(params []*Tensor, v float32) error {
	if !(v > 0) { // NaN too
		return argErrorf("clip_grad_value: clip_value must be > 0, got %g", v)
	}
	return e.NoGrad(func() error {
		for _, p := range params {
			if g := p.Grad(); g != nil {
				c, err := e.Clamp(g, -v, v)
				if err == nil {
					err = e.setGrad(p, c)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}
