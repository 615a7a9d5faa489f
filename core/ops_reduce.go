package core

import "math"

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
//
// PyTorch's rules: a NaN is the maximum (and the minimum) of any row it is
// in, the index returned is the first NaN's, else the first of tied maxima;
// max(dim)'s gradient goes to that one element, a full max()'s is shared
// evenly by the elements equal to it (amax). ggml's argmax breaks ties
// differently on each backend and skips NaN, so the selection is built from
// elementwise ops whose results do not depend on the backend: a score per
// element, unique in its row, highest at the element PyTorch selects.

// rowsAlong lays x out as rows whose elements run along dim: dim moved last
// (the other dims keep their order), the rest folded into rows. It returns
// the rows and dim as an index.
func (e *Engine) rowsAlong(op string, x *Tensor, dim int) (*Tensor, int, error) {
	d, err := checkDim(op, x.shape, dim)
	if err != nil {
		return nil, 0, err
	}
	xt := x
	if last := len(x.shape) - 1; d != last {
		axes := make([]int, 0, len(x.shape))
		for i := range x.shape {
			if i != d {
				axes = append(axes, i)
			}
		}
		if xt, err = e.Permute(x, append(axes, d)...); err != nil {
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

// isNaNNode is 1 where a is NaN, else 0: tanh keeps NaN and maps the rest
// into [-1, 1], and step(NaN) is 0 on every backend.
func isNaNNode(c ctx, a node) (node, error) {
	t, err := c.Unary("tanh", a)
	if err == nil {
		t, err = c.ScaleBias(t, 1, 2)
	}
	if err == nil {
		t, err = c.Unary("step", t)
	}
	if err != nil {
		return node{}, err
	}
	return c.ScaleBias(t, -1, 1)
}

// finiteNode is a with NaN made 0 (relu(NaN) is 0 on every backend) and
// ±inf made ±max float, so that comparisons on it are exact.
func finiteNode(c ctx, a node) (node, error) {
	pos, err := c.Unary("relu", a)
	if err != nil {
		return node{}, err
	}
	na, err := c.Scale(a, -1)
	if err == nil {
		na, err = c.Unary("relu", na)
	}
	if err != nil {
		return node{}, err
	}
	d, err := c.Sub(pos, na)
	if err != nil {
		return node{}, err
	}
	return c.Clamp(d, -math.MaxFloat32, math.MaxFloat32)
}

// eqNode is 1 where a == b (both finite; b broadcasts), else 0.
func eqNode(c ctx, a, b node) (node, error) {
	d, err := c.Sub(a, b)
	if err == nil {
		d, err = c.Unary("abs", d)
	}
	if err == nil {
		d, err = c.Unary("step", d)
	}
	if err != nil {
		return node{}, err
	}
	return c.ScaleBias(d, -1, 1)
}

// pickRows is a [r, n] node's element idx[i] of each row i (idx i32 [r]).
func pickRows(c ctx, a, idx node, r, n int64) (node, error) {
	cells, err := c.Reshape(a, [4]int64{1, n, r, 1}) // each element its own row
	if err != nil {
		return node{}, err
	}
	idx, err = c.Reshape(idx, [4]int64{1, r, 1, 1})
	if err != nil {
		return node{}, err
	}
	picked, err := c.GetRows(cells, idx) // ne (1, 1, r)
	if err != nil {
		return node{}, err
	}
	return c.Reshape(picked, [4]int64{r, 1, 1, 1})
}

// maxScore scores each element of x [r, n] (ne (n, r)): the first NaN of a
// row scores 2n, later NaNs less; without NaN the first of the tied maxima
// scores n, later ones less; everything else 0. The row's highest score is
// unique, so any argmax finds it.
func maxScore(c ctx, x node, r, n int64) (node, error) {
	var ch nodeChain
	nan := ch.do(func() (node, error) { return isNaNNode(c, x) })
	xs := ch.do(func() (node, error) { return finiteNode(c, x) })
	top := ch.do(func() (node, error) { return c.Argmax(xs) })
	m := ch.do(func() (node, error) { return pickRows(c, xs, top, r, n) })
	m = ch.do(func() (node, error) { return c.Reshape(m, [4]int64{1, r, 1, 1}) })
	eq := ch.do(func() (node, error) { return eqNode(c, xs, m) })
	notNaN := ch.do(func() (node, error) { return c.ScaleBias(nan, -1, 1) })
	eq = ch.do(func() (node, error) { return c.Mul(eq, notNaN) })
	iota := ch.do(func() (node, error) { return c.Arange(0, float32(n), 1) })
	rev := ch.do(func() (node, error) { return c.ScaleBias(iota, -1, float32(n)) }) // n, n-1, ..., 1
	revN := ch.do(func() (node, error) { return c.ScaleBias(rev, 1, float32(n)) })
	a := ch.do(func() (node, error) { return c.Mul(nan, revN) })
	b := ch.do(func() (node, error) { return c.Mul(eq, rev) })
	return ch.do(func() (node, error) { return c.Add(a, b) }), ch.err
}

// nodeChain is chain for node builders.
type nodeChain struct{ err error }

func (ch *nodeChain) do(f func() (node, error)) node {
	if ch.err != nil {
		return node{}
	}
	n, err := f()
	ch.err = err
	return n
}

// selectMax picks, in each row of x [r, n], the element PyTorch's max
// selects: its value [r] (differentiable, the gradient going to that
// element alone) and its 0-based index [r] (f32, not differentiated).
func (e *Engine) selectMax(op string, x *Tensor) (vals, idx *Tensor, err error) {
	r, n := x.shape[0], x.shape[1]
	score, err := e.newOp(op+"_score", x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		return maxScore(c, in[0], int64(r), int64(n))
	})
	if err != nil {
		return nil, nil, err
	}
	// sel is 1 at the selected element: the only one at its row's top score.
	sel, err := e.newOp(op+"_select", x.shape, []*Tensor{score}, func(c ctx, in []node) (node, error) {
		top, err := c.Argmax(in[0])
		if err != nil {
			return node{}, err
		}
		best, err := pickRows(c, in[0], top, int64(r), int64(n))
		if err == nil {
			best, err = c.Reshape(best, [4]int64{1, int64(r), 1, 1})
		}
		if err != nil {
			return node{}, err
		}
		return eqNode(c, in[0], best)
	})
	if err != nil {
		return nil, nil, err
	}
	vals, err = e.newOp(op, []int{r}, []*Tensor{x, score}, func(c ctx, in []node) (node, error) {
		top, err := c.Argmax(in[1])
		if err != nil {
			return node{}, err
		}
		return pickRows(c, in[0], top, int64(r), int64(n))
	})
	if err != nil {
		return nil, nil, err
	}
	e.record(vals, op, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gr, err := e.Reshape(g, r, 1)
		if err != nil {
			return nil, err
		}
		gx, err := e.Mul(sel, gr)
		return []*Tensor{gx}, err
	})
	idx, err = e.newOp(op+"_index", []int{r}, []*Tensor{sel}, func(c ctx, in []node) (node, error) {
		iota, err := c.Arange(0, float32(n), 1)
		if err != nil {
			return node{}, err
		}
		at, err := c.Mul(in[0], iota) // one-hot times 0..n-1
		if err != nil {
			return node{}, err
		}
		return c.SumRows(at)
	})
	if err == nil {
		idx, err = e.Reshape(idx, r)
	}
	return vals, idx, err
}

// MaxDim is the maximum along dim (0-based, negative from the end) and its
// 0-based indices (an f32 tensor, not differentiated).
func (e *Engine) MaxDim(x *Tensor, dim int, keepdim bool) (*Tensor, *Tensor, error) {
	rows, d, err := e.rowsAlong("max", x, dim)
	if err != nil {
		return nil, nil, err
	}
	vals, idx, err := e.selectMax("max", rows)
	if err != nil {
		return nil, nil, err
	}
	_, out := reducedShapes(x.shape, d, keepdim)
	if vals, err = e.Reshape(vals, out...); err != nil {
		return nil, nil, err
	}
	idx, err = e.Reshape(idx, out...)
	return vals, idx, err
}

// MinDim is max(-x)'s: the minimum along dim and its indices.
func (e *Engine) MinDim(x *Tensor, dim int, keepdim bool) (*Tensor, *Tensor, error) {
	n, err := e.Neg(x)
	if err != nil {
		return nil, nil, err
	}
	vals, idx, err := e.MaxDim(n, dim, keepdim)
	if err != nil {
		return nil, nil, err
	}
	vals, err = e.Neg(vals)
	return vals, idx, err
}

// ArgmaxDim is the 0-based index of the maximum along dim (the first of
// ties; the first NaN), an f32 tensor.
func (e *Engine) ArgmaxDim(x *Tensor, dim int) (*Tensor, error) {
	_, idx, err := e.MaxDim(x, dim, false)
	return idx, err
}

// Max is the largest element (shape [1]); its gradient is shared evenly by
// the elements equal to it (by the NaNs, if it is NaN), as PyTorch's.
func (e *Engine) Max(x *Tensor) (*Tensor, error) {
	flat, err := e.Reshape(x, 1, int(x.Numel()))
	if err != nil {
		return nil, err
	}
	e.tape.noGrad++ // the value's own gradient is replaced below
	vals, _, err := e.selectMax("max", flat)
	e.tape.noGrad--
	if err != nil {
		return nil, err
	}
	e.record(vals, "max", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.newOp("max_back", []int{1, int(x.Numel())}, []*Tensor{flat, vals, g}, func(c ctx, in []node) (node, error) {
			var ch nodeChain
			xnan := ch.do(func() (node, error) { return isNaNNode(c, in[0]) })
			vnan := ch.do(func() (node, error) { return isNaNNode(c, in[1]) })
			xs := ch.do(func() (node, error) { return finiteNode(c, in[0]) })
			vs := ch.do(func() (node, error) { return finiteNode(c, in[1]) })
			eq := ch.do(func() (node, error) { return eqNode(c, xs, vs) })
			// mask = vnan ? xnan : eq·(1 - xnan)
			notX := ch.do(func() (node, error) { return c.ScaleBias(xnan, -1, 1) })
			eq = ch.do(func() (node, error) { return c.Mul(eq, notX) })
			notV := ch.do(func() (node, error) { return c.ScaleBias(vnan, -1, 1) })
			a := ch.do(func() (node, error) { return c.Mul(xnan, vnan) })
			b := ch.do(func() (node, error) { return c.Mul(eq, notV) })
			mask := ch.do(func() (node, error) { return c.Add(a, b) })
			count := ch.do(func() (node, error) { return c.SumRows(mask) })
			share := ch.do(func() (node, error) { return c.Div(in[2], count) })
			return ch.do(func() (node, error) { return c.Mul(mask, share) }), ch.err
		})
		if err != nil {
			return nil, err
		}
		gx, err = e.Reshape(gx, x.shape...)
		return []*Tensor{gx}, err
	})
	return vals, nil
}

// Min is the smallest element, -max(-x).
func (e *Engine) Min(x *Tensor) (*Tensor, error) {
	n, err := e.Neg(x)
	if err != nil {
		return nil, err
	}
	m, err := e.Max(n)
	if err != nil {
		return nil, err
	}
	return e.Neg(m)
}
