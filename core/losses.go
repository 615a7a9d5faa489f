package core

import "fmt"

// MSELoss is PyTorch's F.mse_loss: (a - b)^2 reduced by reduction ("mean",
// also when empty, "sum" or "none").
func (e *Engine) MSELoss(a, b *Tensor, reduction string) (*Tensor, error) {
	red, err := lossOperands("mse_loss", a, b, reduction, false)
	if err != nil {
		return nil, err
	}
	d, err := e.Sub(a, b)
	if err != nil {
		return nil, err
	}
	sq, err := e.Pow(d, 2)
	if err != nil {
		return nil, err
	}
	return e.reduceLoss(sq, red)
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

// BCELossOptions are F.binary_cross_entropy's.
type BCELossOptions struct {
	// Reduction is "mean" (also when empty), "sum" or "none".
	Reduction string
	// Weight, when not nil, rescales each element's loss; it broadcasts to
	// the input's shape and is not differentiated.
	Weight *Tensor
}

// BCELoss is PyTorch's F.binary_cross_entropy of probabilities p against
// targets y: per element -(y log p + (1-y) log(1-p)), each log clamped at
// -100 as PyTorch does, times the weight, then reduced. The gradients are
// PyTorch's: (p - y) / max(p (1-p), 1e-12) for p (finite at p = 0 and 1)
// and -logit(p) for y.
func (e *Engine) BCELoss(p, y *Tensor, opts BCELossOptions) (*Tensor, error) {
	red, err := lossOperands("bce_loss", p, y, opts.Reduction, false)
	if err != nil {
		return nil, err
	}
	if err := lossWeight("bce_loss", "weight", opts.Weight, p.shape); err != nil {
		return nil, err
	}
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
		return e.build("bce_loss", p.shape, []*Tensor{y, lp, lq}, func(b *nodes, in []node) node {
			return b.scale(b.add(b.mul(in[0], in[1]), b.mul(b.scaleBias(in[0], -1, 1), in[2])), -1)
		})
	})
	if ch.err != nil {
		return nil, ch.err
	}
	e.Transient(lp, lq)
	e.record(out, "bce_loss", []*Tensor{p, y}, func(g *Tensor) ([]*Tensor, error) {
		var gp, gy *Tensor
		var err error
		if p.requiresGrad {
			gp, err = e.build("bce_back", p.shape, []*Tensor{g, p, y}, func(b *nodes, in []node) node {
				den := b.mul(b.scaleBias(in[1], -1, 1), in[1]) // (1 - p) p
				den = b.nanWhere(den, b.clamp(den, 1e-12, maxF32))
				return b.div(b.mul(b.sub(in[1], in[2]), in[0]), den)
			})
			if err != nil {
				return nil, err
			}
		}
		if y.requiresGrad {
			gy, err = e.build("bce_back", y.shape, []*Tensor{g, p}, func(b *nodes, in []node) node {
				logit := b.unary("log", b.div(in[1], b.scaleBias(in[1], -1, 1))) // log(p / (1 - p))
				return b.scale(b.mul(logit, in[0]), -1)
			})
		}
		return []*Tensor{gp, gy}, err
	})
	if opts.Weight != nil {
		if out, err = e.Mul(out, opts.Weight); err != nil {
			return nil, err
		}
	}
	return e.reduceLoss(out, red)
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
