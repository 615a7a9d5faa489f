package core

import "fmt"

// MSELoss is the mean of (a - b)^2.
func (e *Engine) MSELoss(a, b *Tensor) (*Tensor, error) {
	if !sameShape(a.shape, b.shape) {
		return nil, shapeErrorf("mse_loss: input shape %s and target shape %s differ", ShapeString(a.shape), ShapeString(b.shape))
	}
	d, err := e.Sub(a, b)
	if err != nil {
		return nil, err
	}
	sq, err := e.Pow(d, 2)
	if err != nil {
		return nil, err
	}
	return e.Mean(sq)
}

// CrossEntropyOptions are the options of PyTorch's F.cross_entropy. The
// zero value is PyTorch's defaults.
type CrossEntropyOptions struct {
	// Reduction is "mean" (also when empty), "sum" or "none" (one loss per
	// row, shape [batch]).
	Reduction string
	// LabelSmoothing in [0, 1] mixes the target with the uniform
	// distribution over the classes.
	LabelSmoothing float64
	// Weight, when not nil, is a [classes] tensor rescaling each class. With
	// labels, the mean divides by the summed weights of the rows' labels;
	// the weight is not differentiated (PyTorch refuses one that requires
	// grad); with probabilities it is.
	Weight *Tensor
	// IgnoreIndex, when not nil, is a 0-based label whose rows add nothing
	// to the loss nor to the mean's count. Labels only, as in PyTorch.
	IgnoreIndex *int
}

// check validates the options of fn for logits [n, c] and returns the
// reduction.
func (o CrossEntropyOptions) check(fn string, logits *Tensor) (string, error) {
	red, err := lossReduction(fn, o.Reduction, false)
	if err != nil {
		return "", err
	}
	if ls := o.LabelSmoothing; !(ls >= 0 && ls <= 1) {
		return "", argErrorf("%s: label_smoothing must be between 0 and 1, got %g", fn, ls)
	}
	if w := o.Weight; w != nil && (w.Dim() != 1 || w.shape[0] != logits.shape[1]) {
		return "", shapeErrorf("%s: weight of shape %s for %d classes (expected one weight per class, shape %d)", fn, ShapeString(w.shape), logits.shape[1], logits.shape[1])
	}
	return red, nil
}

// lossReduction checks a loss's reduction: "mean" (also when empty), "sum",
// "none", and "batchmean" where batchmean.
func lossReduction(fn, red string, batchmean bool) (string, error) {
	switch red {
	case "":
		return "mean", nil
	case "mean", "sum", "none":
		return red, nil
	case "batchmean":
		if batchmean {
			return red, nil
		}
	}
	if batchmean {
		return "", argErrorf("%s: reduction must be \"mean\", \"sum\", \"none\" or \"batchmean\", got %q", fn, red)
	}
	return "", argErrorf("%s: reduction must be \"mean\", \"sum\" or \"none\", got %q", fn, red)
}

func crossEntropyOptions(opts []CrossEntropyOptions) (CrossEntropyOptions, error) {
	switch len(opts) {
	case 0:
		return CrossEntropyOptions{}, nil
	case 1:
		return opts[0], nil
	}
	return CrossEntropyOptions{}, argErrorf("cross_entropy: %d option sets given, expected at most one", len(opts))
}

// CrossEntropy is PyTorch's F.cross_entropy with class probabilities as the
// target: logits and target are both [batch, classes]; the loss of a row is
// -sum(target * log_softmax(logits)) (times the class weights). Targets
// need not sum to 1. Both operands may need gradients.
func (e *Engine) CrossEntropy(logits, target *Tensor, opts ...CrossEntropyOptions) (*Tensor, error) {
	if logits.Dim() != 2 || !sameShape(logits.shape, target.shape) {
		return nil, shapeErrorf("cross_entropy: logits %s and target %s must both be [batch, classes]", ShapeString(logits.shape), ShapeString(target.shape))
	}
	o, err := crossEntropyOptions(opts)
	if err != nil {
		return nil, err
	}
	red, err := o.check("cross_entropy", logits)
	if err != nil {
		return nil, err
	}
	if o.IgnoreIndex != nil {
		return nil, argErrorf("cross_entropy: ignore_index is not supported for probability targets (as in PyTorch)")
	}
	n, classes := logits.shape[0], logits.shape[1]
	var ch chain
	do := ch.do
	logp := do(func() (*Tensor, error) { return e.LogSoftmax(logits, 1) })
	t := target
	if ls := o.LabelSmoothing; ls > 0 { // target (1 - ls) + ls / classes
		t = do(func() (*Tensor, error) { return e.Scale(target, float32(1-ls)) })
		t = do(func() (*Tensor, error) { return e.AddScalar(t, float32(ls/float64(classes))) })
	}
	prod := do(func() (*Tensor, error) { return e.Mul(logp, t) })
	if o.Weight != nil {
		prod = do(func() (*Tensor, error) { return e.Mul(prod, o.Weight) })
	}
	switch red {
	case "none":
		s := do(func() (*Tensor, error) { return e.SumDim(prod, 1, false) })
		return do(func() (*Tensor, error) { return e.Neg(s) }), ch.err
	case "sum":
		s := do(func() (*Tensor, error) { return e.Sum(prod) })
		return do(func() (*Tensor, error) { return e.Neg(s) }), ch.err
	}
	s := do(func() (*Tensor, error) { return e.Sum(prod) })
	return do(func() (*Tensor, error) { return e.Scale(s, -1/float32(n)) }), ch.err
}

// OneHot makes the host tensor [n, classes] of 0-based class labels.
func OneHot(labels []int, classes int) (*Tensor, error) {
	if classes < 1 {
		return nil, argErrorf("one_hot: %d classes", classes)
	}
	data := make([]float32, len(labels)*classes)
	for i, l := range labels {
		if l < 0 || l >= classes {
			return nil, argErrorf("one_hot: label %d at row %d is out of range 1..%d (1-based)", l+1, i+1, classes)
		}
		data[i*classes+l] = 1
	}
	return FromFloat32(data, len(labels), classes)
}

// CrossEntropyLabels is PyTorch's F.cross_entropy against 0-based class
// labels, one per row of logits [batch, classes]. The loss of a row is
// -w[y] log_softmax(logits)[y], mixed with the smoothing term when
// LabelSmoothing > 0, as torch 1.13 computes it; the mean divides by the
// summed weights of the rows not ignored (their count without weights), so
// a mean over no row is NaN. Errors name rows and labels 1-based.
func (e *Engine) CrossEntropyLabels(logits *Tensor, labels []int, opts ...CrossEntropyOptions) (*Tensor, error) {
	if logits.Dim() != 2 || len(labels) != logits.shape[0] {
		return nil, shapeErrorf("cross_entropy: %d labels for logits of shape %s (expected one per row)", len(labels), ShapeString(logits.shape))
	}
	o, err := crossEntropyOptions(opts)
	if err != nil {
		return nil, err
	}
	red, err := o.check("cross_entropy", logits)
	if err != nil {
		return nil, err
	}
	logp, err := e.LogSoftmax(logits, 1)
	if err != nil {
		return nil, err
	}
	return e.labelLoss("cross_entropy", logp, labels, o, red)
}

// labelLoss is the loss of log-probabilities logp [batch, classes] against
// 0-based labels, with o's weights, smoothing and ignored label (checked
// by the caller, red its reduction): cross_entropy after its log_softmax,
// and nll_loss.
func (e *Engine) labelLoss(fn string, logp *Tensor, labels []int, o CrossEntropyOptions, red string) (*Tensor, error) {
	n, classes := logp.shape[0], logp.shape[1]
	var weight []float32
	if o.Weight != nil {
		var err error
		if o.Weight.requiresGrad {
			return nil, argErrorf("%s: the class weight requires grad, but the loss is not differentiable in it for labels (as in PyTorch); detach it", fn)
		}
		if weight, err = o.Weight.Float32s(); err != nil {
			return nil, fmt.Errorf("%s: weight: %w", fn, err)
		}
	}
	// Rows and their (safe) labels: an ignored row picks class 0 and is
	// masked out after.
	idx := make([]int, n)
	kept := make([]float32, n)
	rowWeight := make([]float32, n)
	allKept := true
	denom := 0.0
	for i, l := range labels {
		if o.IgnoreIndex != nil && l == *o.IgnoreIndex {
			idx[i], allKept = i*classes, false
			continue
		}
		if l < 0 || l >= classes {
			return nil, argErrorf("%s: label %d at row %d is out of range 1..%d (labels are 1-based)", fn, l+1, i+1, classes)
		}
		idx[i], kept[i], rowWeight[i] = i*classes+l, 1, 1
		if weight != nil {
			rowWeight[i] = weight[l]
		}
		denom += float64(rowWeight[i])
	}
	ls := o.LabelSmoothing
	var ch chain
	do := ch.do
	// -w[y] logp[y]: picked, not multiplied by a one-hot (0 * -inf is NaN).
	flat := do(func() (*Tensor, error) { return e.Reshape(logp, n*classes, 1) })
	picked := do(func() (*Tensor, error) { return e.IndexSelect(flat, 0, idx) })
	picked = do(func() (*Tensor, error) { return e.Reshape(picked, n) })
	if weight != nil {
		wt := do(func() (*Tensor, error) { return FromFloat32(rowWeight, n) })
		picked = do(func() (*Tensor, error) { return e.Mul(picked, wt) })
	}
	loss := do(func() (*Tensor, error) { return e.Scale(picked, float32(-(1 - ls))) })
	if ls > 0 { // + ls/classes * -sum_c w[c] logp[c]
		s := logp
		if o.Weight != nil {
			s = do(func() (*Tensor, error) { return e.Mul(logp, o.Weight) })
		}
		s = do(func() (*Tensor, error) { return e.SumDim(s, 1, false) })
		s = do(func() (*Tensor, error) { return e.Scale(s, float32(-ls/float64(classes))) })
		loss = do(func() (*Tensor, error) { return e.Add(loss, s) })
	}
	if !allKept { // ignored rows are exactly 0, gradient included
		mask := do(func() (*Tensor, error) { return FromFloat32(kept, n) })
		zero := do(func() (*Tensor, error) { return Zeros(n) })
		loss = do(func() (*Tensor, error) { return e.where(mask, loss, zero) })
	}
	switch red {
	case "none":
		return loss, ch.err
	case "sum":
		return do(func() (*Tensor, error) { return e.Sum(loss) }), ch.err
	}
	s := do(func() (*Tensor, error) { return e.Sum(loss) })
	return do(func() (*Tensor, error) { return e.Scale(s, float32(1/denom)) }), ch.err
}

// BCELoss is the mean binary cross-entropy of probabilities p against
// targets y: -mean(y log p + (1-y) log(1-p)), each log clamped at -100 as
// PyTorch does. The gradients are PyTorch's: (p - y) / max(p (1-p), 1e-12)
// for p (finite at p = 0 and 1) and -logit(p) for y, each over the count.
func (e *Engine) BCELoss(p, y *Tensor) (*Tensor, error) {
	if !sameShape(p.shape, y.shape) {
		return nil, shapeErrorf("bce_loss: input shape %s and target shape %s differ", ShapeString(p.shape), ShapeString(y.shape))
	}
	count := float32(p.Numel())
	var ch chain
	do := ch.do
	clampedLog := func(b *nodes, a node) node { // max(log a, -100), NaN kept
		l := b.unary("log", a)
		return b.nanWhere(l, b.clamp(l, -100, maxF32))
	}
	lp := do(func() (*Tensor, error) {
		return e.build("bce_log", p.shape, []*Tensor{p}, func(b *nodes, in []node) node { return clampedLog(b, in[0]) })
	})
	lq := do(func() (*Tensor, error) {
		return e.build("bce_log", p.shape, []*Tensor{p}, func(b *nodes, in []node) node {
			return clampedLog(b, b.scaleBias(in[0], -1, 1))
		})
	})
	out := do(func() (*Tensor, error) {
		return e.build("bce_loss", []int{1}, []*Tensor{y, lp, lq}, func(b *nodes, in []node) node {
			t := b.add(b.mul(in[0], in[1]), b.mul(b.scaleBias(in[0], -1, 1), in[2]))
			if b.err != nil {
				return node{}
			}
			return b.scale(b.set(b.c.Sum(t)), -1/count)
		})
	})
	if ch.err != nil {
		return nil, ch.err
	}
	e.record(out, "bce_loss", []*Tensor{p, y}, func(g *Tensor) ([]*Tensor, error) {
		var gp, gy *Tensor
		var err error
		if p.requiresGrad {
			gp, err = e.build("bce_back", p.shape, []*Tensor{g, p, y}, func(b *nodes, in []node) node {
				den := b.mul(b.scaleBias(in[1], -1, 1), in[1]) // (1 - p) p
				den = b.nanWhere(den, b.clamp(den, 1e-12, maxF32))
				return b.scale(b.div(b.mul(b.sub(in[1], in[2]), in[0]), den), 1/count)
			})
			if err != nil {
				return nil, err
			}
		}
		if y.requiresGrad {
			gy, err = e.build("bce_back", y.shape, []*Tensor{g, p}, func(b *nodes, in []node) node {
				logit := b.unary("log", b.div(in[1], b.scaleBias(in[1], -1, 1))) // log(p / (1 - p))
				return b.scale(b.mul(logit, in[0]), -1/count)
			})
		}
		return []*Tensor{gp, gy}, err
	})
	return out, nil
}

// NLLLossOptions are F.nll_loss's; the zero value is PyTorch's defaults
// but for IgnoreIndex (PyTorch's -100, which no label can be here).
type NLLLossOptions struct {
	// Reduction is "mean" (also when empty), "sum" or "none".
	Reduction string
	// Weight, when not nil, is a [classes] tensor rescaling each class; the
	// mean divides by the summed weights of the rows' labels. It is not
	// differentiated (PyTorch refuses one that requires grad).
	Weight *Tensor
	// IgnoreIndex, when not nil, is a 0-based label whose rows add nothing
	// to the loss nor to the mean's count.
	IgnoreIndex *int
}

// NLLLoss is PyTorch's F.nll_loss of log-probabilities logp [batch,
// classes] against 0-based labels, one per row: the loss of a row is
// -w[y] logp[y]; it is CrossEntropyLabels without the log_softmax.
func (e *Engine) NLLLoss(logp *Tensor, labels []int, opts NLLLossOptions) (*Tensor, error) {
	if logp.Dim() != 2 || len(labels) != logp.shape[0] {
		return nil, shapeErrorf("nll_loss: %d labels for input of shape %s (expected log-probabilities [batch, classes] and one label per row)", len(labels), ShapeString(logp.shape))
	}
	o := CrossEntropyOptions{Reduction: opts.Reduction, Weight: opts.Weight, IgnoreIndex: opts.IgnoreIndex}
	red, err := o.check("nll_loss", logp)
	if err != nil {
		return nil, err
	}
	return e.labelLoss("nll_loss", logp, labels, o, red)
}

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
