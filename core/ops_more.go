package core

import (
	"fmt"
	"math"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// uploadInts puts 0-based indices on the device (pass pool) as i32.
func (e *Engine) uploadInts(idx []int) (*Tensor, error) {
	h, err := e.res.Upload(residency.Request{Shape: []int{len(idx)}, Type: ggmlcgo.I32}, encodeInts(idx))
	if err != nil {
		return nil, err
	}
	return &Tensor{shape: []int{len(idx)}, dtype: ggmlcgo.I32, handle: h, engine: e}, nil
}

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
				d, err = c.Abs(d)
			}
			if err == nil {
				d, err = c.Step(d)
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

// Gelu is the tanh approximation of GELU (PyTorch's approximate="tanh"),
// built from differentiable ops: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func (e *Engine) Gelu(x *Tensor) (*Tensor, error) {
	var ch chain
	do := ch.do
	x3 := do(func() (*Tensor, error) { return e.Pow(x, 3) })
	in := do(func() (*Tensor, error) {
		return e.axpby(float32(math.Sqrt(2/math.Pi)), x, float32(0.044715*math.Sqrt(2/math.Pi)), x3)
	})
	th := do(func() (*Tensor, error) { return e.Tanh(in) })
	one := do(func() (*Tensor, error) { return e.AddScalar(th, 1) })
	h := do(func() (*Tensor, error) { return e.Mul(x, one) })
	return do(func() (*Tensor, error) { return e.Scale(h, 0.5) }), ch.err
}

// LayerNorm normalises over the last dim to zero mean and unit variance
// (biased, as PyTorch), then scales by w and shifts by b when given.
func (e *Engine) LayerNorm(x, w, b *Tensor, eps float32) (*Tensor, error) {
	last := x.shape[len(x.shape)-1]
	for _, p := range []*Tensor{w, b} {
		if p != nil && (p.Dim() != 1 || p.shape[0] != last) {
			return nil, fmt.Errorf("layer_norm: weight/bias of shape %s do not match the last dim %d of %s", ShapeString(p.shape), last, ShapeString(x.shape))
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

// Narrow is x's elements start..start+length-1 (0-based) along dim.
func (e *Engine) Narrow(x *Tensor, dim, start, length int) (*Tensor, error) {
	d, err := checkDim("narrow", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if start < 0 || length < 1 || start+length > x.shape[d] {
		return nil, fmt.Errorf("narrow: start %d and length %d are outside dim %d of shape %s", start, length, dim, ShapeString(x.shape))
	}
	shape := x.Shape()
	shape[d] = length
	k := len(x.shape) - 1 - d // the dim in ne order
	y, err := e.newOp("narrow", shape, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		return c.Narrow(in[0], k, int64(start), int64(length))
	})
	if err != nil {
		return nil, err
	}
	e.record(y, "narrow", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		var pad [ggmlcgo.MaxDims][2]int
		pad[k] = [2]int{start, x.shape[d] - start - length}
		gx, err := e.newOp("narrow_back", x.shape, []*Tensor{g}, func(c ctx, in []node) (node, error) { return c.Pad(in[0], pad) })
		return []*Tensor{gx}, err
	})
	return y, nil
}

// Cat joins tensors along dim; all other dims must agree.
func (e *Engine) Cat(ts []*Tensor, dim int) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("cat: no tensors")
	}
	d, err := checkDim("cat", ts[0].shape, dim)
	if err != nil {
		return nil, err
	}
	out := ts[0]
	for i, t := range ts[1:] {
		if t.Dim() != out.Dim() {
			return nil, fmt.Errorf("cat: tensor %d has shape %s, tensor 1 has %s", i+2, ShapeString(t.shape), ShapeString(ts[0].shape))
		}
		shape := out.Shape()
		for j := range shape {
			if j != d && shape[j] != t.shape[j] {
				return nil, fmt.Errorf("cat: shapes %s and %s differ outside dim %d", ShapeString(out.shape), ShapeString(t.shape), dim)
			}
		}
		shape[d] += t.shape[d]
		a, b := out, t
		k := len(shape) - 1 - d
		joined, err := e.newOp("cat", shape, []*Tensor{a, b}, func(c ctx, in []node) (node, error) { return c.Concat(in[0], in[1], k) })
		if err != nil {
			return nil, err
		}
		e.record(joined, "cat", []*Tensor{a, b}, func(g *Tensor) ([]*Tensor, error) {
			ga, err := e.Narrow(g, d, 0, a.shape[d])
			if err != nil {
				return nil, err
			}
			gb, err := e.Narrow(g, d, a.shape[d], b.shape[d])
			return []*Tensor{ga, gb}, err
		})
		out = joined
	}
	return out, nil
}

// IndexSelect picks rows of a 2-d x [r, c] (dim 0) by 0-based indices: an
// embedding lookup. Its gradient adds each picked row's gradient back.
func (e *Engine) IndexSelect(x *Tensor, dim int, idx []int) (*Tensor, error) {
	d, err := checkDim("index_select", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if x.Dim() != 2 || d != 0 {
		return nil, fmt.Errorf("index_select: only rows (dim 1) of a 2-d tensor are supported, got dim %d of shape %s", dim+1, ShapeString(x.shape))
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("index_select: no indices")
	}
	for i, v := range idx {
		if v < 0 || v >= x.shape[0] {
			return nil, fmt.Errorf("index_select: index %d (position %d) is out of range for %d rows", v+1, i+1, x.shape[0])
		}
	}
	it, err := e.uploadInts(idx)
	if err != nil {
		return nil, err
	}
	y, err := e.newOp("index_select", []int{len(idx), x.shape[1]}, []*Tensor{x, it}, func(c ctx, in []node) (node, error) {
		return c.GetRows(in[0], in[1])
	})
	if err != nil {
		return nil, err
	}
	e.record(y, "index_select", []*Tensor{x, it}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.newOp("index_select_back", x.shape, []*Tensor{g, it, x}, func(c ctx, in []node) (node, error) {
			return c.GetRowsBack(in[0], in[1], in[2])
		})
		return []*Tensor{gx, nil}, err
	})
	return y, nil
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1-p) when training. The mask is drawn on the host from the engine's
// generator and uploaded with the step.
func (e *Engine) Dropout(x *Tensor, p float64, training bool) (*Tensor, error) {
	if p < 0 || p >= 1 {
		return nil, fmt.Errorf("dropout: probability %g outside [0, 1)", p)
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
