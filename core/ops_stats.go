package core

import "math"

// Reductions made of other ops, with PyTorch's semantics: var and std
// (unbiased by default), logsumexp, vector norms, prod and cumsum. Their
// gradients come from the ops they are made of, except where that would
// give NaN where PyTorch gives a number (a norm at zero).

// alongAll is x flattened to one dim, for the whole-tensor forms.
func (e *Engine) alongAll(x *Tensor) (*Tensor, error) { return e.Reshape(x, int(x.Numel())) }

// dropDim removes the reduced dim d of a keepdim result, unless keepdim.
func (e *Engine) dropDim(y *Tensor, d int, keepdim bool) (*Tensor, error) {
	if keepdim || y.Dim() == 1 {
		return y, nil
	}
	return e.Squeeze(y, d)
}

// Var is the variance along dim with Bessel's correction (n - correction
// in the denominator: 1 is PyTorch's default, unbiased; 0 the population
// variance). A dim of n <= correction gives inf or NaN, as PyTorch's.
func (e *Engine) Var(x *Tensor, dim int, correction float64, keepdim bool) (*Tensor, error) {
	d, err := checkDim("var", x.shape, dim)
	if err != nil {
		return nil, err
	}
	var c chain
	mean := c.do(func() (*Tensor, error) { return e.MeanDim(x, d, true) })
	dev := c.do(func() (*Tensor, error) { return e.Sub(x, mean) })
	sq := c.do(func() (*Tensor, error) { return e.Mul(dev, dev) })
	ss := c.do(func() (*Tensor, error) { return e.SumDim(sq, d, true) })
	// PyTorch divides by max(0, n - correction): 0/0 is NaN for n = 0 too.
	v := c.do(func() (*Tensor, error) { return e.arithRight(OpDiv, ss, max(0, float64(x.shape[d])-correction)) })
	out := c.do(func() (*Tensor, error) { return e.dropDim(v, d, keepdim) })
	return out, c.err
}

// Std is the square root of Var.
func (e *Engine) Std(x *Tensor, dim int, correction float64, keepdim bool) (*Tensor, error) {
	v, err := e.Var(x, dim, correction, keepdim)
	if err != nil {
		return nil, err
	}
	return e.Sqrt(v)
}

// LogSumExp is log(sum(exp(x))) along dim, computed stably: the maximum
// is taken out first (a row of -inf gives -inf, inf gives inf, NaN NaN).
// Its gradient is the softmax along dim.
func (e *Engine) LogSumExp(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	d, err := checkDim("logsumexp", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if x.Numel() == 0 { // log of a sum of nothing: -inf, as PyTorch's
		_, out := reducedShapes(x.shape, d, keepdim)
		return e.filled("logsumexp", []*Tensor{x}, float32(math.Inf(-1)), out)
	}
	var c chain
	m := c.do(func() (*Tensor, error) {
		m, _, err := e.maxDim("logsumexp", x.Detach(), d, true)
		return m, err
	})
	shift := c.do(func() (*Tensor, error) { // the maximum where finite, else 0
		return e.build("logsumexp_shift", m.shape, []*Tensor{m}, func(b *nodes, in []node) node {
			finite := b.mul(b.eq(b.finite(in[0]), in[0]), b.notNaN(in[0]))
			return b.where(finite, in[0], b.fill(in[0], 0))
		})
	})
	centred := c.do(func() (*Tensor, error) { return e.Sub(x, shift) })
	ex := c.do(func() (*Tensor, error) { return e.Exp(centred) })
	s := c.do(func() (*Tensor, error) { return e.SumDim(ex, d, true) })
	l := c.do(func() (*Tensor, error) { return e.Log(s) })
	out := c.do(func() (*Tensor, error) { return e.Add(l, shift) })
	out = c.do(func() (*Tensor, error) { return e.dropDim(out, d, keepdim) })
	return out, c.err
}

// Norm is the vector p-norm along dim (PyTorch's linalg.vector_norm): p
// > 0, or +inf for the largest absolute value. At a zero vector its
// gradient is 0, as PyTorch's (the composed gradient would be 0/0).
func (e *Engine) Norm(x *Tensor, p float64, dim int, keepdim bool) (*Tensor, error) {
	d, err := checkDim("norm", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if !(p > 0) {
		return nil, argErrorf("norm: p must be positive or inf, got %g", p)
	}
	if x.shape[d] == 0 { // the norm of no values: 0, whatever p (PyTorch's)
		_, out := reducedShapes(x.shape, d, keepdim)
		return e.filled("norm", []*Tensor{x}, 0, out)
	}
	var c chain
	abs := c.do(func() (*Tensor, error) { return e.Abs(x) })
	var y *Tensor
	switch {
	case math.IsInf(p, 1):
		y = c.do(func() (*Tensor, error) { return e.amaxDim(abs, d) })
	case p == 1:
		y = c.do(func() (*Tensor, error) { return e.SumDim(abs, d, true) })
	default:
		y = c.do(func() (*Tensor, error) { return e.pNorm(x, abs, p, d) })
	}
	y = c.do(func() (*Tensor, error) { return e.dropDim(y, d, keepdim) })
	return y, c.err
}

// amaxDim is the largest value along d (kept), its gradient shared evenly
// by the elements equal to it, as PyTorch's amax (and inf-norm).
func (e *Engine) amaxDim(x *Tensor, d int) (*Tensor, error) {
	e.tape.noGrad++ // the value's own gradient is replaced below
	y, _, err := e.maxDim("norm", x, d, true)
	e.tape.noGrad--
	if err != nil {
		return nil, err
	}
	m := y
	e.record(y, "amax", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		var c chain
		ties := c.do(func() (*Tensor, error) {
			return e.build("amax_ties", x.shape, []*Tensor{x, m}, func(b *nodes, in []node) node {
				return b.eq(in[0], b.repeat(in[1], ne4(x.shape)))
			})
		})
		count := c.do(func() (*Tensor, error) { return e.SumDim(ties, d, true) })
		share := c.do(func() (*Tensor, error) { return e.Div(g, count) })
		gx := c.do(func() (*Tensor, error) { return e.Mul(ties, share) })
		return []*Tensor{gx}, c.err
	})
	return y, nil
}

// pNorm is (sum |x|^p)^(1/p) along d (kept), with the gradient
// g·|x|^(p-1)·sign(x)/y^(p-1), 0 where y is 0.
func (e *Engine) pNorm(x, abs *Tensor, p float64, d int) (*Tensor, error) {
	e.tape.noGrad++
	var c chain
	pw := c.do(func() (*Tensor, error) { return e.Pow(abs, p) })
	s := c.do(func() (*Tensor, error) { return e.SumDim(pw, d, true) })
	y := c.do(func() (*Tensor, error) { return e.Pow(s, 1/p) })
	e.tape.noGrad--
	if c.err != nil {
		return nil, c.err
	}
	e.record(y, "norm", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		var c chain
		num := c.do(func() (*Tensor, error) { return e.Pow(abs, p-1) })
		den := c.do(func() (*Tensor, error) { return e.Pow(y, p-1) })
		gx := c.do(func() (*Tensor, error) {
			return e.build("norm_back", x.shape, []*Tensor{g, x, num, den, y}, func(b *nodes, in []node) node {
				ne := ne4(x.shape)
				sign := b.unary("sgn", in[1])
				q := b.div(b.mul(b.mul(b.repeat(in[0], ne), in[2]), sign), b.repeat(in[3], ne))
				return b.where(b.isZero(b.repeat(in[4], ne)), b.fill(q, 0), q)
			})
		})
		return []*Tensor{gx}, c.err
	})
	return y, nil
}

// Prod is the product along dim, as a tree of pairwise products, so that
// its gradient is exact with zeros among the factors (as PyTorch's).
func (e *Engine) Prod(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	d, err := checkDim("prod", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if x.Numel() == 0 {
		_, out := reducedShapes(x.shape, d, keepdim)
		return e.filled("prod", []*Tensor{x}, 1, out)
	}
	cur := x
	for cur.shape[d] > 1 {
		n, h := cur.shape[d], cur.shape[d]/2
		var c chain
		a := c.do(func() (*Tensor, error) { return e.Narrow(cur, d, 0, h) })
		b := c.do(func() (*Tensor, error) { return e.Narrow(cur, d, h, h) })
		next := c.do(func() (*Tensor, error) { return e.Mul(a, b) })
		if n%2 == 1 {
			last := c.do(func() (*Tensor, error) { return e.Narrow(cur, d, n-1, 1) })
			next = c.do(func() (*Tensor, error) { return e.Cat([]*Tensor{next, last}, d) })
		}
		if c.err != nil {
			return nil, c.err
		}
		cur = next
	}
	if cur == x {
		if cur, err = e.Clone(x); err != nil {
			return nil, err
		}
	}
	return e.dropDim(cur, d, keepdim)
}

// Cumsum is the running sum along dim: log2(n) steps that each add the
// sum shifted by 2^k (a parallel scan), so its gradient, the reversed
// running sum, comes from the same ops.
func (e *Engine) Cumsum(x *Tensor, dim int) (*Tensor, error) {
	d, err := checkDim("cumsum", x.shape, dim)
	if err != nil {
		return nil, err
	}
	n := x.shape[d]
	cur, err := e.Contiguous(x)
	if err != nil {
		return nil, err
	}
	if cur == x {
		if cur, err = e.Clone(x); err != nil {
			return nil, err
		}
	}
	for s := 1; s < n; s *= 2 {
		zshape := x.Shape()
		zshape[d] = s
		zeros, err := Zeros(zshape...)
		if err != nil {
			return nil, err
		}
		var c chain
		head := c.do(func() (*Tensor, error) { return e.Narrow(cur, d, 0, n-s) })
		shifted := c.do(func() (*Tensor, error) { return e.Cat([]*Tensor{zeros, head}, d) })
		next := c.do(func() (*Tensor, error) { return e.Add(cur, shifted) })
		if c.err != nil {
			return nil, c.err
		}
		cur = next
	}
	return cur, nil
}
