package core

import "github.com/gglua/gglua/ggmlcgo"

// Reductions: sums and means (all elements or along a dim), max/min and
// argmax. The gradient of a reduction spreads g back over what was reduced.

// sumTo sums g (of a broadcast shape) down to shape: the gradient of
// broadcasting.
func (e *Engine) sumTo(g *Tensor, shape []int) (*Tensor, error) {
	if sameShape(g.shape, shape) {
		return g, nil
	}
	return e.newOp("sum_to", shape, []*Tensor{g}, func(c ctx, in []node) (node, error) {
		like, err := template(c, shape)
		if err != nil {
			return node{}, err
		}
		return c.RepeatBack(in[0], like)
	})
}

// Sum adds all elements (a one-element result of shape [1]).
func (e *Engine) Sum(x *Tensor) (*Tensor, error) {
	y, err := e.newOp("sum", []int{1}, []*Tensor{x}, func(c ctx, in []node) (node, error) { return c.Sum(in[0]) })
	if err != nil {
		return nil, err
	}
	e.record(y, "sum", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.expandTo(g, x.shape)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// Mean is the mean of all elements.
func (e *Engine) Mean(x *Tensor) (*Tensor, error) {
	s, err := e.Sum(x)
	if err != nil {
		return nil, err
	}
	return e.Scale(s, float32(1/float64(x.Numel())))
}

// SumDim sums along dim (0-based, negative from the end); keepdim keeps it
// with size 1, as PyTorch does.
func (e *Engine) SumDim(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	d, err := checkDim("sum", x.shape, dim)
	if err != nil {
		return nil, err
	}
	kept, out := reducedShapes(x.shape, d, keepdim)
	y, err := e.newOp("sum", out, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		like, err := template(c, kept)
		if err != nil {
			return node{}, err
		}
		s, err := c.RepeatBack(in[0], like)
		if err != nil || sameShape(out, kept) {
			return s, err
		}
		return c.Reshape(s, ne4(out))
	})
	if err != nil {
		return nil, err
	}
	e.record(y, "sum", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gk, err := e.Reshape(g, kept...)
		if err != nil {
			return nil, err
		}
		gx, err := e.expandTo(gk, x.shape)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// MeanDim is the mean along dim.
func (e *Engine) MeanDim(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	d, err := checkDim("mean", x.shape, dim)
	if err != nil {
		return nil, err
	}
	s, err := e.SumDim(x, d, keepdim)
	if err != nil {
		return nil, err
	}
	return e.Scale(s, float32(1/float64(x.shape[d])))
}

// ---- max, min, argmax ----

// rowsAlong lays x out as rows whose elements run along dim: dim moved last,
// the rest folded into rows. It returns the rows and dim as an index.
func (e *Engine) rowsAlong(op string, x *Tensor, dim int) (*Tensor, int, error) {
	d, err := checkDim(op, x.shape, dim)
	if err != nil {
		return nil, 0, err
	}
	xt := x
	if last := len(x.shape) - 1; d != last {
		if xt, err = e.Transpose(x, d, last); err != nil {
			return nil, 0, err
		}
	}
	rows, err := e.asRows(xt)
	return rows, d, err
}

// asRows reshapes x to [rows, last dim] (the form the row ops take).
func (e *Engine) asRows(x *Tensor) (*Tensor, error) {
	c := x.shape[len(x.shape)-1]
	if x.Dim() == 2 {
		return x, nil
	}
	return e.Reshape(x, int(x.Numel())/c, c)
}

// maxRows is the largest element of each row of x [r, c], shape [r]. Its
// gradient goes to every element equal to the maximum (ties share it).
func (e *Engine) maxRows(x *Tensor) (*Tensor, error) {
	r, cols := x.shape[0], x.shape[1]
	y, err := e.newOp("max", []int{r}, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		idx, err := c.Argmax(in[0]) // ne (r)
		if err != nil {
			return node{}, err
		}
		idx, err = c.Reshape(idx, [4]int64{1, int64(r), 1, 1})
		if err != nil {
			return node{}, err
		}
		cells, err := c.Reshape(in[0], [4]int64{1, int64(cols), int64(r), 1}) // each element its own row
		if err != nil {
			return node{}, err
		}
		picked, err := c.GetRows(cells, idx) // ne (1, 1, r)
		if err != nil {
			return node{}, err
		}
		return c.Reshape(picked, [4]int64{int64(r), 1, 1, 1})
	})
	if err != nil {
		return nil, err
	}
	e.record(y, "max", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.newOp("max_back", x.shape, []*Tensor{g, x, y}, func(c ctx, in []node) (node, error) {
			m, err := c.Reshape(in[2], [4]int64{1, int64(r), 1, 1})
			if err != nil {
				return node{}, err
			}
			d, err := c.Sub(in[1], m) // x - max, broadcast along the row
			if err == nil {
				d, err = c.Unary("abs", d)
			}
			if err == nil {
				d, err = c.Unary("step", d)
			}
			if err == nil {
				d, err = c.ScaleBias(d, -1, 1) // 1 where x == max
			}
			if err != nil {
				return node{}, err
			}
			gr, err := c.Reshape(in[0], [4]int64{1, int64(r), 1, 1})
			if err != nil {
				return node{}, err
			}
			return c.Mul(d, gr)
		})
		return []*Tensor{gx}, err
	})
	return y, nil
}

// MaxDim is the maximum along dim (0-based, negative from the end).
func (e *Engine) MaxDim(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	rows, d, err := e.rowsAlong("max", x, dim)
	if err != nil {
		return nil, err
	}
	m, err := e.maxRows(rows)
	if err != nil {
		return nil, err
	}
	_, out := reducedShapes(x.shape, d, keepdim)
	return e.Reshape(m, out...)
}

// Max is the largest element (shape [1]).
func (e *Engine) Max(x *Tensor) (*Tensor, error) {
	flat, err := e.Reshape(x, 1, int(x.Numel()))
	if err != nil {
		return nil, err
	}
	return e.maxRows(flat)
}

// MinDim and Min are -max(-x).
func (e *Engine) MinDim(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	return e.negated(x, func(n *Tensor) (*Tensor, error) { return e.MaxDim(n, dim, keepdim) })
}

func (e *Engine) Min(x *Tensor) (*Tensor, error) {
	return e.negated(x, e.Max)
}

func (e *Engine) negated(x *Tensor, f func(*Tensor) (*Tensor, error)) (*Tensor, error) {
	n, err := e.Neg(x)
	if err != nil {
		return nil, err
	}
	m, err := f(n)
	if err != nil {
		return nil, err
	}
	return e.Neg(m)
}

// ArgmaxDim is the 0-based index of the maximum along dim, computed now and
// returned as a host tensor (indices are read, not differentiated).
func (e *Engine) ArgmaxDim(x *Tensor, dim int) (*Tensor, error) {
	rows, d, err := e.rowsAlong("argmax", x, dim)
	if err != nil {
		return nil, err
	}
	idx, err := e.newOp("argmax", []int{rows.shape[0]}, []*Tensor{rows}, func(c ctx, in []node) (node, error) { return c.Argmax(in[0]) })
	if err != nil {
		return nil, err
	}
	idx.dtype = ggmlcgo.I32
	v, err := idx.Float32s()
	if err != nil {
		return nil, err
	}
	out := x.Shape()
	out = append(out[:d], out[d+1:]...)
	if len(out) == 0 {
		out = []int{1}
	}
	return FromFloat32(v, out...)
}
