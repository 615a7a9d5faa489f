package core

import (
	"errors"
	"math"

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
	return e.ClipGradNormType(params, maxNorm, 2)
}

// ClipGradNormType is ClipGradNorm with torch's norm_type: the total
// p-norm (Σ|g|^p)^(1/p) over every gradient, or for p = +Inf the largest
// |g|.
func (e *Engine) ClipGradNormType(params []*Tensor, maxNorm float32, p float64) (*Tensor, error) {
	if !(maxNorm > 0) { // NaN too
		return nil, argErrorf("clip_grad_norm: max_norm must be > 0, got %g", maxNorm)
	}
	if !(p > 0) {
		return nil, argErrorf("clip_grad_norm: norm_type must be > 0 (or math.huge), got %g", p)
	}
	var total *Tensor
	var grads []*Tensor
	flats, inFlats := e.dp.wholeGradBuckets(params)
	err := e.NoGrad(func() error {
		// total += Σ|g|^p (the largest |g|, for p = inf). The gradient-sized
		// terms are read only by their reduction, and each running total
		// by the next: scratch memory, not pass memory of their own.
		add := func(g *Tensor) error {
			var c chain
			var part *Tensor
			switch {
			case p == 2:
				sq := c.do(func() (*Tensor, error) { return e.Mul(g, g) })
				part = c.do(func() (*Tensor, error) { return e.Sum(sq) })
				e.Transient(sq)
			case math.IsInf(p, 1):
				a := c.do(func() (*Tensor, error) { return e.Abs(g) })
				part = c.do(func() (*Tensor, error) { return e.Max(a) })
				e.Transient(a)
			default:
				a := c.do(func() (*Tensor, error) { return e.Abs(g) })
				pw := c.do(func() (*Tensor, error) { return e.Pow(a, p) })
				part = c.do(func() (*Tensor, error) { return e.Sum(pw) })
				e.Transient(a, pw)
			}
			if total != nil {
				last := total
				part = c.do(func() (*Tensor, error) {
					if math.IsInf(p, 1) {
						return e.Maximum(last, part)
					}
					return e.Add(last, part)
				})
				e.Transient(last)
			}
			total = part
			return c.err
		}
		for _, f := range flats {
			if err := add(f.grads); err != nil {
				return err
			}
		}
		for _, p := range params {
			if g := p.Grad(); g != nil && !inFlats[p] {
				if err := add(g); err != nil {
					return err
				}
				grads = append(grads, p)
			}
		}
		if total == nil {
			return errors.New("clip_grad_norm: no parameter has a gradient")
		}
		norm := total
		var err error
		switch {
		case p == 2:
			norm, err = e.Sqrt(total)
		case p != 1 && !math.IsInf(p, 1):
			norm, err = e.Pow(total, 1/p)
		}
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
		for _, f := range flats {
			if err := e.scaleBucket(f, coef); err != nil {
				return err
			}
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

// wholeGradBuckets are the data-parallel buckets (data_parallel_sums.go)
// whose every parameter is in params, once, with its bucket slice as its
// gradient: each flat buffer then holds just those gradients, so clipping
// squares, sums and scales it as one tensor, three kernels a bucket where
// the parameters one by one take four each (on the GPT benchmark 78
// parameters in 2 buckets: ~300 kernels fewer a step). inFlats marks
// their parameters. (The sum's order differs from the per-parameter one,
// as PyTorch's foreach and per-tensor norms differ, by rounding only.)
func (dp *dataParallel) wholeGradBuckets(params []*Tensor) (flats []*gradBucket, inFlats map[*Tensor]bool) {
	if dp == nil || len(dp.buckets) == 0 || !dp.buckets[0].flat.handle.Live() {
		return nil, nil
	}
	count := map[*Tensor]int{}
	for _, p := range params {
		count[p]++
	}
	inFlats = map[*Tensor]bool{}
	for k := range dp.buckets {
		b := &dp.buckets[k]
		whole := true
		for i, p := range b.params {
			whole = whole && count[p] == 1 && !p.gradZero && p.grad == b.slices[i]
		}
		if !whole {
			continue
		}
		flats = append(flats, b)
		for _, p := range b.params {
			inFlats[p] = true
		}
	}
	return flats, inFlats
}

// scaleBucket multiplies a whole bucket of gradients by coef in place, one
// kernel. Each slice (a gradient) then becomes a view of that product (no
// kernel), so what reads a gradient, or a read of it, follows the scaling.
// A slice's queued update (p.grad:mul_, clip_grad_value, a no_sync
// backward's sum) stays queued where it is (inPlace holds it there): the
// norm and the product read the flat buffer, not it, and come after it in
// the graph.
func (e *Engine) scaleBucket(b *gradBucket, coef *Tensor) error {
	err := e.mulInPlace(b.grads, coef)
	for i, sl := range b.slices {
		if err != nil {
			return err
		}
		err = e.inPlace(sl, []*Tensor{b.grads}, func(c ctx, _ node, in []node) (node, error) {
			return sliceOf(c, in[0], sl.shape, b.offs[i])
		})
	}
	return err
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
	return e.mulInPlace(g, coef)
}

// mulInPlace queues dst (a placed f32 tensor) times k (one element, or
// dst's shape), written into dst's own memory: one kernel.
func (e *Engine) mulInPlace(dst, k *Tensor) error {
	return e.inPlace(dst, []*Tensor{k}, func(c ctx, base node, in []node) (node, error) {
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
