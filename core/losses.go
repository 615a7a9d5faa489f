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

// CrossEntropy is the mean over rows of -sum(target * log_softmax(logits))
// for logits [n, c] and target [n, c] (class probabilities, e.g. one-hot).
func (e *Engine) CrossEntropy(logits, target *Tensor) (*Tensor, error) {
	if logits.Dim() != 2 || !sameShape(logits.shape, target.shape) {
		return nil, shapeErrorf("cross_entropy: logits %s and target %s must both be [batch, classes]", ShapeString(logits.shape), ShapeString(target.shape))
	}
	y, err := e.newOp("cross_entropy", []int{1}, []*Tensor{logits, target}, func(c ctx, in []node) (node, error) {
		return c.CrossEntropyLoss(in[0], in[1])
	})
	if err != nil {
		return nil, err
	}
	e.record(y, "cross_entropy", []*Tensor{logits, target}, func(g *Tensor) ([]*Tensor, error) {
		gl, err := e.newOp("cross_entropy_back", logits.shape, []*Tensor{logits, target, g}, func(c ctx, in []node) (node, error) {
			return c.CrossEntropyLossBack(in[0], in[1], in[2])
		})
		if err != nil || !target.requiresGrad {
			return []*Tensor{gl, nil}, err
		}
		// d/dtarget = -log_softmax(logits) * g / rows
		ls, err := e.LogSoftmax(logits, 1)
		if err != nil {
			return nil, err
		}
		gt, err := e.Mul(ls, g)
		if err != nil {
			return nil, err
		}
		gt, err = e.Scale(gt, -1/float32(logits.shape[0]))
		return []*Tensor{gl, gt}, err
	})
	return y, nil
}

// OneHot makes the host tensor [n, classes] of 0-based class labels.
func OneHot(labels []int, classes int) (*Tensor, error) {
	if classes < 1 {
		return nil, argErrorf("one_hot: %d classes", classes)
	}
	data := make([]float32, len(labels)*classes)
	for i, l := range labels {
		if l < 0 || l >= classes {
			return nil, argErrorf("label %d at row %d is out of range for %d classes", l, i, classes)
		}
		data[i*classes+l] = 1
	}
	return FromFloat32(data, len(labels), classes)
}

// CrossEntropyLabels is CrossEntropy against 0-based class labels.
func (e *Engine) CrossEntropyLabels(logits *Tensor, labels []int) (*Tensor, error) {
	if logits.Dim() != 2 || len(labels) != logits.shape[0] {
		return nil, shapeErrorf("cross_entropy: %d labels for logits of shape %s (expected one per row)", len(labels), ShapeString(logits.shape))
	}
	t, err := OneHot(labels, logits.shape[1])
	if err != nil {
		return nil, fmt.Errorf("cross_entropy: %w", err)
	}
	return e.CrossEntropy(logits, t)
}

// BCELoss is the mean binary cross-entropy of probabilities p against
// targets y: -mean(y log p + (1-y) log(1-p)), each log clamped at -100 as
// PyTorch does.
func (e *Engine) BCELoss(p, y *Tensor) (*Tensor, error) {
	if !sameShape(p.shape, y.shape) {
		return nil, shapeErrorf("bce_loss: input shape %s and target shape %s differ", ShapeString(p.shape), ShapeString(y.shape))
	}
	var ch chain
	do := ch.do
	oneMinus := func(x *Tensor) *Tensor {
		n := do(func() (*Tensor, error) { return e.Neg(x) })
		return do(func() (*Tensor, error) { return e.AddScalar(n, 1) })
	}
	clampedLog := func(x *Tensor) *Tensor {
		l := do(func() (*Tensor, error) { return e.Log(x) })
		return do(func() (*Tensor, error) { return e.Clamp(l, -100, 3.4e38) })
	}
	lp, lq := clampedLog(p), clampedLog(oneMinus(p))
	ny := oneMinus(y)
	a := do(func() (*Tensor, error) { return e.Mul(y, lp) })
	b := do(func() (*Tensor, error) { return e.Mul(ny, lq) })
	s := do(func() (*Tensor, error) { return e.Add(a, b) })
	m := do(func() (*Tensor, error) { return e.Mean(s) })
	out := do(func() (*Tensor, error) { return e.Neg(m) })
	return out, ch.err
}
