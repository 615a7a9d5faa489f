package core

import (
	"sync/atomic"

	"github.com/gglua/gglua/ggmlcgo"
)

// Reductions: sums and means (all elements or along a dim), max/min and
// argmax. The gradient of a reduction spreads g back over what was reduced.

// sumTo sums g (of a broadcast shape) down to shape: the gradient of
// broadcasting.
func (e *Engine) sumTo(g *Tensor, shape []int) (*Tensor, error) {
	if sameShape(g.shape, shape) {
		return g, nil
	}
	if out, done, err := e.sumToFront(g, shape); done || err != nil {
		return out, err
	}
	if rows, k, ok := e.leadingSum(g.shape, shape); ok {
		return e.kernelOp("sum_to", shape, []*Tensor{g}, func(c ctx, in []node) (node, error) {
			x, err := c.ReshapeView(in[0], ne4([]int{rows, k})) // size-1 dims folded away
			if err != nil {
				return node{}, err
			}
			s, err := c.ColumnSumKernel(x)
			if err != nil {
				return node{}, err
			}
			return c.ReshapeView(s, ne4(shape))
		})
	}
	return e.newOp("sum_to", shape, []*Tensor{g}, func(c ctx, in []node) (node, error) {
		return e.repeatBack(c, in[0], g.shape, shape)
	})
}

// leadingSum reports whether summing from down to to, on a GPU with
// gglua's kernels, sums the leading dims of from and keeps the rest (a
// bias's gradient: [B, T, n] to [n]): one column-sum kernel over the rows.
// ggml-cuda's repeat_back gives each output one thread that walks all its
// rows (4 ms a step for the 8192-row bias gradients of the H200 MLP
// benchmark), and a cuBLAS product with a column of ones took 186 us for a
// [8192, 768] gradient, 13% of a GPT step (docs/BENCHMARKS.md).
func (e *Engine) leadingSum(from, to []int) (rows, k int, ok bool) {
	if (e.backend.IsCPU() && !colSumsOnCPU) || !e.backend.HasKernel(ggmlcgo.KernelBiasReluBF16) {
		return 0, 0, false
	}
	ff, ft := foldedShapes(from, to)
	if len(ff) != 2 || ft[0] != 1 || ft[1] != ff[1] {
		return 0, 0, false
	}
	return ff[0], ff[1], true
}

// colSumsOnCPU makes tests take the GPU's column sums on the CPU.
var colSumsOnCPU = false

// cudaRepeatBackLimit is ggml-cuda's limit on repeat_back: its source's
// ne2*ne3 (past it the op is not supported on the GPU).
const cudaRepeatBackLimit = 1 << 15

// foldRepeatBackOnCPU makes the CPU take the GPU's path, and
// repeatBackFolds counts the times it is taken (for tests).
var (
	foldRepeatBackOnCPU = false
	repeatBackFolds     atomic.Int64
)

// repeatBack sums x (of shape from) down to shape to (each dim equal or
// 1): ggml's repeat_back. On a GPU, where repeat_back takes at most 32768
// for the source's two outer dims multiplied, neighbouring dims that are
// both kept or both summed are merged first ([B, H, T, D] summed to [1, H,
// T, D] is [B, H·T·D] summed to [1, H·T·D]); the sums are the same.
func (e *Engine) repeatBack(c ctx, x node, from, to []int) (node, error) {
	if e.foldRepeatBack(from) {
		repeatBackFolds.Add(1)
		ff, ft := foldedShapes(from, to)
		cont, err := c.Cont(x)
		if err != nil {
			return node{}, err
		}
		if x, err = c.Reshape(cont, ne4(ff)); err != nil {
			return node{}, err
		}
		like, err := template(c, ft)
		if err != nil {
			return node{}, err
		}
		s, err := c.RepeatBack(x, like)
		if err != nil {
			return node{}, err
		}
		return c.Reshape(s, ne4(to))
	}
	if sumsLastDimOnly(from, to) {
		// ggml's CPU repeat_back adds one float at a time when the
		// innermost dim is summed (LayerNorm's mean and deviation
		// gradients, [B, T, E] to [B, T, 1]), and ggml-cuda's gives each
		// output one thread; sum_rows adds whole rows (a block per row on
		// CUDA), exactly in f32.
		var err error
		if !x.IsContiguous() {
			if x, err = c.Cont(x); err != nil {
				return node{}, err
			}
		}
		s, err := c.SumRows(x)
		if err != nil {
			return node{}, err
		}
		return c.Reshape(s, ne4(to))
	}
	like, err := template(c, to)
	if err != nil {
		return node{}, err
	}
	return c.RepeatBack(x, like)
}

// sumsLastDimOnly reports whether summing from down to to sums the last
// dim and keeps every other.
func sumsLastDimOnly(from, to []int) bool {
	n := len(from)
	if n == 0 || len(to) != n || to[n-1] != 1 || from[n-1] == 1 {
		return false
	}
	for i := range n - 1 {
		if from[i] != to[i] {
			return false
		}
	}
	return true
}

// foldRepeatBack reports whether a repeat_back from shape from takes the
// GPU's limited path.
func (e *Engine) foldRepeatBack(from []int) bool {
	ne := ne4(from)
	return (!e.backend.IsCPU() || foldRepeatBackOnCPU) && ne[2]*ne[3] > cudaRepeatBackLimit
}

// foldedShapes merges neighbouring dims of from that are both kept or both
// summed in to (which may have fewer dims: broadcasting), and returns the
// merged shapes.
func foldedShapes(from, to []int) (ff, ft []int) {
	padded := append(ones(len(from)-len(to)), to...)
	last := 0 // 1: the group being built keeps its dims, 2: sums them
	for i := range from {
		st := 2
		switch {
		case from[i] == 1:
			st = last // a dim of 1 goes with either
		case from[i] == padded[i]:
			st = 1
		}
		if st == last && len(ff) > 0 {
			ff[len(ff)-1] *= from[i]
			ft[len(ft)-1] *= padded[i]
			continue
		}
		ff, ft, last = append(ff, from[i]), append(ft, padded[i]), st
	}
	return ff, ft
}

// sumToFront is sumTo for the case merging cannot bring within the GPU's
// repeat_back limit (a summed dim between two kept ones whose outer part
// is large): the summed dims move to the front, the rest is flattened, one
// [S, K] -> [1, K] sum, and the result takes shape's layout back. It is
// made of recorded ops, so it is differentiable.
func (e *Engine) sumToFront(g *Tensor, shape []int) (*Tensor, bool, error) {
	if !e.foldRepeatBack(g.shape) {
		return nil, false, nil
	}
	if ff, _ := foldedShapes(g.shape, shape); ne4(ff)[2]*ne4(ff)[3] <= cudaRepeatBackLimit {
		return nil, false, nil // merging is enough: repeatBack does it
	}
	padded := append(ones(g.Dim()-len(shape)), shape...)
	var summed, kept []int
	s, k := 1, 1
	for i := range g.shape {
		if padded[i] == g.shape[i] {
			kept = append(kept, i)
			k *= g.shape[i]
		} else {
			summed = append(summed, i)
			s *= g.shape[i]
		}
	}
	var c chain
	front := c.do(func() (*Tensor, error) { return e.permute("sum_to", g, append(summed, kept...)) })
	rows := c.do(func() (*Tensor, error) { return e.Reshape(front, s, k) })
	sum := c.do(func() (*Tensor, error) { return e.SumDim(rows, 0, true) }) // recorded, unlike sumTo
	out := c.do(func() (*Tensor, error) { return e.Reshape(sum, shape...) })
	return out, true, c.err
}

// Sum adds all elements (a one-element result of shape [1]).
func (e *Engine) Sum(x *Tensor) (*Tensor, error) {
	if x.Numel() == 0 {
		return e.filled("sum", []*Tensor{x}, 0, []int{1})
	}
	y, err := e.newOp("sum", []int{1}, []*Tensor{x}, func(c ctx, in []node) (node, error) { return c.Sum(in[0]) })
	if err != nil {
		return nil, err
	}
	xshape := x.shape // the tape keeps no value
	e.record(y, "sum", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.expandTo(g, xshape)
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
	if x.Numel() == 0 {
		return e.filled("sum", []*Tensor{x}, 0, out)
	}
	if s, done, err := e.sumToFront(x, kept); done || err != nil {
		if err != nil {
			return nil, err
		}
		return e.Reshape(s, out...)
	}
	y, err := e.newOp("sum", out, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		s, err := e.repeatBack(c, in[0], x.shape, kept)
		if err != nil || sameShape(out, kept) {
			return s, err
		}
		return c.Reshape(s, ne4(out))
	})
	if err != nil {
		return nil, err
	}
	xshape := x.shape // the tape keeps no value
	e.record(y, "sum", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gk, err := e.Reshape(g, kept...)
		if err != nil {
			return nil, err
		}
		gx, err := e.expandTo(gk, xshape)
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

// maxScore scores each element of x [r, n] (ne (n, r)): the first NaN of a
// row scores 2n, later NaNs less; without NaN the first of the tied maxima
// scores n, later ones less; everything else 0. The row's highest score is
// unique, so any argmax finds it.
func maxScore(b *nodes, x node, r, n int64) node {
	nan := b.scaleBias(b.notNaN(x), -1, 1)
	xs := b.finite(x)
	m := b.rowPick(xs, b.scale(xs, 0.5), n, r) // ne (1, r); halved: above argmax's start on every backend
	eq := b.mul(b.eq(xs, m), b.notNaN(x))
	iota := b.set(b.c.Arange(0, float32(n), 1))
	rev := b.scaleBias(iota, -1, float32(n)) // n, n-1, ..., 1
	return b.add(b.mul(nan, b.scaleBias(rev, 1, float32(n))), b.mul(eq, rev))
}

// selectMax picks, in each row of x [r, n], the element PyTorch's max
// selects: its value [r] (differentiable, the gradient going to that
// element alone) and its 0-based index [r] (f32, not differentiated).
func (e *Engine) selectMax(op string, x *Tensor) (vals, idx *Tensor, err error) {
	r, n := x.shape[0], x.shape[1]
	score, err := e.build(op+"_score", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
		return maxScore(b, in[0], int64(r), int64(n))
	})
	if err != nil {
		return nil, nil, err
	}
	// sel is 1 at the selected element: the only one at its row's top score.
	sel, err := e.build(op+"_select", x.shape, []*Tensor{score}, func(b *nodes, in []node) node {
		return b.eq(in[0], b.rowMax(in[0], int64(n), int64(r)))
	})
	if err != nil {
		return nil, nil, err
	}
	vals, err = e.build(op, []int{r}, []*Tensor{x, score}, func(b *nodes, in []node) node {
		return b.reshape(b.rowPick(in[0], in[1], int64(n), int64(r)), [4]int64{int64(r), 1, 1, 1})
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
	return e.maxDim("max", x, dim, keepdim)
}

// maxDim is MaxDim for the op named op (as its errors name it).
func (e *Engine) maxDim(op string, x *Tensor, dim int, keepdim bool) (*Tensor, *Tensor, error) {
	if x.Numel() == 0 {
		d, err := checkDim(op, x.shape, dim)
		if err != nil {
			return nil, nil, err
		}
		if x.shape[d] == 0 {
			return nil, nil, argErrorf("%s: dim %d of shape %s has size 0, so no %s (PyTorch's error too)", op, d+1, ShapeString(x.shape), op)
		}
		_, out := reducedShapes(x.shape, d, keepdim)
		return e.emptyOf(op, out, x), emptyTensor(out), nil
	}
	rows, d, err := e.rowsAlong(op, x, dim)
	if err != nil {
		return nil, nil, err
	}
	vals, idx, err := e.selectMax(op, rows)
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
	vals, idx, err := e.maxDim("min", n, dim, keepdim)
	if err != nil {
		return nil, nil, err
	}
	vals, err = e.Neg(vals)
	return vals, idx, err
}

// ArgmaxDim is the 0-based index of the maximum along dim (the first of
// ties; the first NaN), an f32 tensor.
func (e *Engine) ArgmaxDim(x *Tensor, dim int) (*Tensor, error) {
	_, idx, err := e.maxDim("argmax", x, dim, false)
	return idx, err
}

// Max is the largest element (shape [1]); its gradient is shared evenly by
// the elements equal to it (by the NaNs, if it is NaN), as PyTorch's.
func (e *Engine) Max(x *Tensor) (*Tensor, error) {
	if x.Numel() == 0 {
		return nil, argErrorf("max: the tensor of shape %s has no elements, so no maximum (PyTorch's error too); give a dim", ShapeString(x.shape))
	}
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
		gx, err := e.build("max_back", []int{1, int(x.Numel())}, []*Tensor{flat, vals, g}, func(b *nodes, in []node) node {
			// mask = vals is NaN ? x's NaNs : x == vals (NaNs excluded)
			notX, notV := b.notNaN(in[0]), b.notNaN(in[1])
			eq := b.mul(b.eq(b.finite(in[0]), b.finite(in[1])), notX)
			both := b.mul(b.scaleBias(notX, -1, 1), b.scaleBias(notV, -1, 1))
			mask := b.add(both, b.mul(eq, notV))
			return b.mul(mask, b.div(in[2], b.sumRows(mask)))
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
