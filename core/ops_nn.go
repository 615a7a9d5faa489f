package core

import "math"

// Neural-network ops: softmax and log_softmax along a dim, layer norm,
// dropout. Losses are in losses.go.

// alongLastDim applies f, which works along the last dim, along dim by
// transposing dim to the end and back.
func (e *Engine) alongLastDim(op string, x *Tensor, dim int, f func(*Tensor) (*Tensor, error)) (*Tensor, error) {
	d, err := checkDim(op, x.shape, dim)
	if err != nil {
		return nil, err
	}
	last := len(x.shape) - 1
	if d == last {
		return f(x)
	}
	xt, err := e.Transpose(x, d, last)
	if err != nil {
		return nil, err
	}
	y, err := f(xt)
	if err != nil {
		return nil, err
	}
	return e.Transpose(y, d, last)
}

// Softmax along dim (0-based, negative from the end).
func (e *Engine) Softmax(x *Tensor, dim int) (*Tensor, error) {
	return e.alongLastDim("softmax", x, dim, func(x *Tensor) (*Tensor, error) {
		return e.unaryOp("softmax", x, ctx.SoftMax, func(g, x, y *Tensor) (*Tensor, error) {
			return e.newOp("softmax_back", x.shape, []*Tensor{g, y}, func(c ctx, in []node) (node, error) {
				return c.SoftMaxBack(in[0], in[1])
			})
		})
	})
}

// LogSoftmax along dim, computed stably as PyTorch does: x - max -
// log(sum(exp(x - max))), so a logit far below the row's maximum keeps its
// value instead of becoming -inf. Its gradient is g - softmax(x) * sum(g)
// along the dim.
func (e *Engine) LogSoftmax(x *Tensor, dim int) (*Tensor, error) {
	return e.alongLastDim("log_softmax", x, dim, func(x *Tensor) (*Tensor, error) {
		cols := int64(x.shape[len(x.shape)-1])
		rows := x.Numel() / cols
		return e.unaryOp("log_softmax", x, func(c ctx, a node) (node, error) {
			b := e.nodes(c)
			x2 := b.reshape(a, [4]int64{cols, rows, 1, 1})
			d := b.sub(x2, b.rowMax(x2, cols, rows)) // the max broadcast along each row
			lse := b.unary("log", b.sumRows(b.unary("exp", d)))
			y := b.reshape(b.sub(d, lse), a.Ne())
			return y, b.err
		}, func(g, x, y *Tensor) (*Tensor, error) {
			return e.newOp("log_softmax_back", x.shape, []*Tensor{g, y}, func(c ctx, in []node) (node, error) {
				p, err := c.Unary("exp", in[1])
				if err != nil {
					return node{}, err
				}
				sg, err := c.SumRows(in[0])
				if err != nil {
					return node{}, err
				}
				ps, err := c.Mul(p, sg) // sg broadcasts along the row
				if err != nil {
					return node{}, err
				}
				return c.Sub(in[0], ps)
			})
		})
	})
}

// LayerNorm normalises over the last dim to zero mean and unit variance
// (biased, as PyTorch), then scales by w and shifts by b when given.
func (e *Engine) LayerNorm(x, w, b *Tensor, eps float32) (*Tensor, error) {
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		return nil, argErrorf("layer_norm: eps must be a finite number >= 0, got %g", eps)
	}
	last := x.shape[len(x.shape)-1]
	for _, p := range []*Tensor{w, b} {
		if p != nil && (p.Dim() != 1 || p.shape[0] != last) {
			return nil, shapeErrorf("layer_norm: weight/bias of shape %s do not match the last dim %d of %s", ShapeString(p.shape), last, ShapeString(x.shape))
		}
	}
	var ch chain
	do := ch.do
	mu := do(func() (*Tensor, error) { return e.MeanDim(x, -1, true) })
	xc := do(func() (*Tensor, error) { return e.Sub(x, mu) })
	sq := do(func() (*Tensor, error) { return e.Mul(xc, xc) })
	v := do(func() (*Tensor, error) { return e.MeanDim(sq, -1, true) })
	sd := do(func() (*Tensor, error) { return e.AddScalar(v, eps) })
	sd = do(func() (*Tensor, error) { return e.Sqrt(sd) })
	y := do(func() (*Tensor, error) { return e.Div(xc, sd) })
	if w != nil {
		y = do(func() (*Tensor, error) { return e.Mul(y, w) })
	}
	if b != nil {
		y = do(func() (*Tensor, error) { return e.Add(y, b) })
	}
	return y, ch.err
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1-p) when training. The mask is drawn on the host from the engine's
// generator and uploaded with the step.
func (e *Engine) Dropout(x *Tensor, p float64, training bool) (*Tensor, error) {
	if !(p >= 0 && p < 1) { // NaN too
		return nil, argErrorf("dropout: probability %g outside [0, 1)", p)
	}
	if !training || p == 0 {
		return x, nil
	}
	mask := make([]float32, x.Numel())
	keep := float32(1 / (1 - p))
	for i := range mask {
		if e.Rand().Float64() >= p {
			mask[i] = keep
		}
	}
	m, err := FromFloat32(mask, x.shape...)
	if err != nil {
		return nil, err
	}
	return e.Mul(x, m)
}
