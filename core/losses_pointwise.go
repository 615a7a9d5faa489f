package core

// Pointwise losses (an elementwise loss, then a reduction): BCE with logits,
// L1, smooth L1, Huber, KL divergence, and what they share.

// pointwiseLoss is an elementwise loss of input x and target y (of one
// shape) with extra operands (weights, or values the forward computed) that
// broadcast to them and are not differentiated. loss, dx and dy build the
// loss and its derivatives in x and y, element by element, from the nodes
// x, y and the extras. The result has x's shape; it is reduced by reduce.
type pointwiseLoss struct {
	name   string
	loss   func(b *nodes, x, y node, extra []node) node
	dx, dy func(b *nodes, x, y node, extra []node) node
}

func (l pointwiseLoss) apply(e *Engine, x, y *Tensor, extra ...*Tensor) (*Tensor, error) {
	ins := append([]*Tensor{x, y}, extra...)
	out, err := e.build(l.name, x.shape, ins, func(b *nodes, in []node) node { return l.loss(b, in[0], in[1], in[2:]) })
	if err != nil {
		return nil, err
	}
	e.record(out, l.name, []*Tensor{x, y}, func(g *Tensor) ([]*Tensor, error) {
		grads := []*Tensor{nil, nil}
		for i, d := range []func(b *nodes, x, y node, extra []node) node{l.dx, l.dy} {
			if !ins[i].requiresGrad {
				continue
			}
			gi, err := e.build(l.name+"_backward", x.shape, append([]*Tensor{g}, ins...), func(b *nodes, in []node) node {
				return b.mul(d(b, in[1], in[2], in[3:]), in[0])
			})
			if err != nil {
				return nil, err
			}
			grads[i] = gi
		}
		return grads, nil
	})
	return out, nil
}

// reduceLoss reduces an elementwise loss: red is "none", "sum", "mean" or
// "batchmean" (the sum over the size of dim 1).
func (e *Engine) reduceLoss(l *Tensor, red string) (*Tensor, error) {
	switch red {
	case "none":
		return l, nil
	case "sum":
		return e.Sum(l)
	case "batchmean":
		s, err := e.Sum(l)
		if err != nil {
			return nil, err
		}
		return e.Scale(s, float32(1/float64(l.shape[0])))
	}
	return e.Mean(l)
}

// lossOperands checks that input and target have one shape and returns the
// reduction.
func lossOperands(fn string, x, y *Tensor, red string, batchmean bool) (string, error) {
	if !sameShape(x.shape, y.shape) {
		return "", shapeErrorf("%s: input shape %s and target shape %s differ", fn, ShapeString(x.shape), ShapeString(y.shape))
	}
	return lossReduction(fn, red, batchmean)
}

// lossWeight checks a weight option: it broadcasts to shape (PyTorch's
// rule) and does not require grad.
func lossWeight(fn, name string, w *Tensor, shape []int) error {
	if w == nil {
		return nil
	}
	if w.requiresGrad {
		return argErrorf("%s: %s requires grad, but the loss is not differentiable in it here; detach it", fn, name)
	}
	out, err := broadcastShape(fn+": "+name, shape, w.shape)
	if err != nil {
		return err
	}
	if !sameShape(out, shape) {
		return shapeErrorf("%s: %s of shape %s does not broadcast to the input's shape %s", fn, name, ShapeString(w.shape), ShapeString(shape))
	}
	return nil
}

// BCEWithLogitsOptions are F.binary_cross_entropy_with_logits's.
type BCEWithLogitsOptions struct {
	// Reduction is "mean" (also when empty), "sum" or "none".
	Reduction string
	// Weight, when not nil, rescales each element's loss; PosWeight, when
	// not nil, the positive term's (y log sigmoid(x)) by class. Both
	// broadcast to the input's shape and are not differentiated.
	Weight, PosWeight *Tensor
}

// BCEWithLogits is PyTorch's F.binary_cross_entropy_with_logits: per
// element (1-y) x + (1 + (pw-1) y) softplus(-x), times the weight, with
// softplus(-x) = max(-x, 0) + log(1 + exp(-|x|)), finite for any finite
// logit. The gradients are PyTorch's: ((1 + (pw-1) y) sigmoid(x) - pw y)
// for x and -x + (pw-1) softplus(-x) for y (times the weight).
func (e *Engine) BCEWithLogits(x, y *Tensor, opts BCEWithLogitsOptions) (*Tensor, error) {
	const fn = "binary_cross_entropy_with_logits"
	red, err := lossOperands(fn, x, y, opts.Reduction, false)
	if err != nil {
		return nil, err
	}
	if err := lossWeight(fn, "weight", opts.Weight, x.shape); err != nil {
		return nil, err
	}
	if err := lossWeight(fn, "pos_weight", opts.PosWeight, x.shape); err != nil {
		return nil, err
	}
	sp, err := e.build("softplus", x.shape, []*Tensor{x}, func(b *nodes, in []node) node { // softplus(-x)
		tail := b.unary("log", b.scaleBias(b.unary("exp", b.scale(b.unary("abs", in[0]), -1)), 1, 1))
		return b.add(b.unary("relu", b.scale(in[0], -1)), tail)
	})
	if err != nil {
		return nil, err
	}
	// extra: softplus(-x), then pos_weight and weight when given.
	extra, pw, w := []*Tensor{sp}, -1, -1
	if opts.PosWeight != nil {
		extra, pw = append(extra, opts.PosWeight), len(extra)
	}
	if opts.Weight != nil {
		extra, w = append(extra, opts.Weight), len(extra)
	}
	weighted := func(b *nodes, v node, c []node) node {
		if w < 0 {
			return v
		}
		return b.mul(v, c[w])
	}
	// logWeight is 1 + (pw-1) y, or nil without pos_weight.
	logWeight := func(b *nodes, y node, c []node) node {
		return b.scaleBias(b.mul(y, b.scaleBias(c[pw], 1, -1)), 1, 1)
	}
	l := pointwiseLoss{
		name: fn,
		loss: func(b *nodes, x, y node, c []node) node {
			neg := c[0]
			if pw >= 0 {
				neg = b.mul(neg, logWeight(b, y, c))
			}
			return weighted(b, b.add(b.mul(b.scaleBias(y, -1, 1), x), neg), c)
		},
		dx: func(b *nodes, x, y node, c []node) node {
			s := b.unary("sigmoid", x)
			if pw < 0 {
				return weighted(b, b.sub(s, y), c)
			}
			return weighted(b, b.sub(b.mul(logWeight(b, y, c), s), b.mul(y, c[pw])), c)
		},
		dy: func(b *nodes, x, y node, c []node) node {
			d := b.scale(x, -1)
			if pw >= 0 {
				d = b.add(d, b.mul(c[0], b.scaleBias(c[pw], 1, -1)))
			}
			return weighted(b, d, c)
		},
	}
	out, err := l.apply(e, x, y, extra...)
	if err != nil {
		return nil, err
	}
	return e.reduceLoss(out, red)
}

// L1Loss is PyTorch's F.l1_loss: |x - y|, reduced; its gradient is
// sign(x - y) (0 where x = y), for both operands.
func (e *Engine) L1Loss(x, y *Tensor, reduction string) (*Tensor, error) {
	red, err := lossOperands("l1_loss", x, y, reduction, false)
	if err != nil {
		return nil, err
	}
	var ch chain
	do := ch.do
	d := do(func() (*Tensor, error) { return e.Sub(x, y) })
	a := do(func() (*Tensor, error) { return e.Abs(d) })
	return do(func() (*Tensor, error) { return e.reduceLoss(a, red) }), ch.err
}

// SmoothL1Loss is PyTorch's F.smooth_l1_loss: with d = x - y, 0.5 d²/beta
// where |d| < beta and |d| - 0.5 beta elsewhere (beta >= 0), reduced. Its
// gradient in x is clamp(d, -beta, beta)/beta; for beta = 0 (|d|) it is
// torch 1.13's: -1 where d <= 0, 1 where d > 0 (and in y, as torch, the
// same with x and y swapped: -1 where d = 0 too).
func (e *Engine) SmoothL1Loss(x, y *Tensor, reduction string, beta float64) (*Tensor, error) {
	const fn = "smooth_l1_loss"
	if err := checkFinite(fn, "beta", beta, true); err != nil {
		return nil, err
	}
	if beta > 0 {
		return e.huberLike(fn, x, y, reduction, float32(beta), float32(1/beta))
	}
	red, err := lossOperands(fn, x, y, reduction, false)
	if err != nil {
		return nil, err
	}
	grad := func(b *nodes, a, c node) node { // d|a - c| / da, -1 at a = c
		d := b.sub(a, c)
		return b.nanWhere(d, b.scaleBias(b.unary("step", d), 2, -1))
	}
	l := pointwiseLoss{
		name: fn,
		loss: func(b *nodes, x, y node, _ []node) node { return b.unary("abs", b.sub(x, y)) },
		dx:   func(b *nodes, x, y node, _ []node) node { return grad(b, x, y) },
		dy:   func(b *nodes, x, y node, _ []node) node { return grad(b, y, x) },
	}
	out, err := l.apply(e, x, y)
	if err != nil {
		return nil, err
	}
	return e.reduceLoss(out, red)
}

// HuberLoss is PyTorch's F.huber_loss: with d = x - y, 0.5 d² where |d| <
// delta and delta (|d| - 0.5 delta) elsewhere (delta > 0), reduced: delta
// times smooth_l1_loss of beta delta. Its gradient in x is clamp(d,
// -delta, delta).
func (e *Engine) HuberLoss(x, y *Tensor, reduction string, delta float64) (*Tensor, error) {
	const fn = "huber_loss"
	if err := checkFinite(fn, "delta", delta, true); err != nil {
		return nil, err
	}
	if delta == 0 {
		return nil, argErrorf("%s: delta must be > 0, got 0", fn)
	}
	return e.huberLike(fn, x, y, reduction, float32(delta), 1)
}

// huberLike is s (0.5 m² + k (|d| - m)) with m = min(|d|, k) and d = x - y:
// huber_loss for s = 1, smooth_l1_loss of beta k for s = 1/k. The gradient
// in x is s clamp(d, -k, k) (NaN kept), in y its negative.
func (e *Engine) huberLike(fn string, x, y *Tensor, reduction string, k, s float32) (*Tensor, error) {
	red, err := lossOperands(fn, x, y, reduction, false)
	if err != nil {
		return nil, err
	}
	grad := func(b *nodes, x, y node, sign float32) node {
		d := b.sub(x, y)
		return b.scale(b.nanWhere(d, b.clamp(d, -k, k)), sign*s)
	}
	l := pointwiseLoss{
		name: fn,
		loss: func(b *nodes, x, y node, _ []node) node {
			a := b.unary("abs", b.sub(x, y))
			m := b.nanWhere(a, b.clamp(a, 0, k))
			quad := b.scale(b.mul(m, m), 0.5)
			return b.scale(b.add(quad, b.scale(b.sub(a, m), k)), s)
		},
		dx: func(b *nodes, x, y node, _ []node) node { return grad(b, x, y, 1) },
		dy: func(b *nodes, x, y node, _ []node) node { return grad(b, x, y, -1) },
	}
	out, err := l.apply(e, x, y)
	if err != nil {
		return nil, err
	}
	return e.reduceLoss(out, red)
}

// KLDiv is PyTorch's F.kl_div of log-probabilities x against
// probabilities y: per element y (log y - x), 0 where y = 0 (PyTorch's
// xlogy), or exp(y) (y - x) when logTarget; reduced by "mean" (over every
// element, as PyTorch's default), "batchmean" (over dim 1), "sum" or
// "none". The gradients are torch 1.13's: -y (-exp(y)) in x; in y, log y +
// 1 - x, NaN where y = 0 (its xlogy's y/y), or exp(y) (y - x + 1).
func (e *Engine) KLDiv(x, y *Tensor, reduction string, logTarget bool) (*Tensor, error) {
	red, err := lossOperands("kl_div", x, y, reduction, true)
	if err != nil {
		return nil, err
	}
	if red == "batchmean" && x.Dim() == 0 {
		return nil, shapeErrorf("kl_div: batchmean needs a batch dim")
	}
	l := pointwiseLoss{
		name: "kl_div",
		loss: func(b *nodes, x, y node, _ []node) node {
			if logTarget {
				return b.mul(b.unary("exp", y), b.sub(y, x))
			}
			logy := b.unary("log", b.add(y, b.isZero(y))) // 0 where y = 0
			return b.mul(y, b.sub(logy, x))
		},
		dx: func(b *nodes, x, y node, _ []node) node {
			if logTarget {
				return b.scale(b.unary("exp", y), -1)
			}
			return b.scale(y, -1)
		},
		dy: func(b *nodes, x, y node, _ []node) node {
			if logTarget {
				return b.mul(b.unary("exp", y), b.scaleBias(b.sub(y, x), 1, 1))
			}
			logy := b.unary("log", b.add(y, b.isZero(y)))
			return b.sub(b.add(logy, b.div(y, y)), x)
		},
	}
	out, err := l.apply(e, x, y)
	if err != nil {
		return nil, err
	}
	return e.reduceLoss(out, red)
}
