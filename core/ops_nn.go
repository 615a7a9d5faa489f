package core

import (
	"errors"
	"math"
	"slices"

	"github.com/gglua/gglua/ggmlcgo"
)

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
		return e.unaryOp("softmax", x, savesOut, ctx.SoftMax, func(g, _, y *Tensor) (*Tensor, error) {
			return e.newOp("softmax_back", y.shape, []*Tensor{g, y}, func(c ctx, in []node) (node, error) {
				return c.SoftMaxBack(in[0], in[1])
			})
		})
	})
}

// LogSoftmax along dim, computed stably as PyTorch does: x - max -
// log(sum(exp(x - max))), so a logit far below the row's maximum keeps its
// value instead of becoming -inf. Its gradient is g - softmax(x) * sum(g)
// along the dim.
//
// Differences are taken as sums of negated columns: ggml's CPU sub is
// single-threaded, its add is not, and the two are the same in IEEE
// arithmetic. On the CPU the gradient's softmax is ggml's soft_max of x
// (vectorised and threaded) rather than exp(y) (scalar and single-threaded
// there): the same values within f32 rounding.
func (e *Engine) LogSoftmax(x *Tensor, dim int) (*Tensor, error) {
	if x.Numel() == 0 {
		if _, err := checkDim("log_softmax", x.shape, dim); err != nil {
			return nil, err
		}
		return e.emptyOf("log_softmax", x.shape, x), nil
	}
	return e.alongLastDim("log_softmax", x, dim, func(x *Tensor) (*Tensor, error) {
		cols := int64(x.shape[len(x.shape)-1])
		rows := x.Numel() / cols
		flat := [4]int64{cols, rows, 1, 1}
		// The gradient's softmax comes from x on the CPU, from y elsewhere.
		saves := savesOut
		if e.backend.IsCPU() {
			saves = savesA
		}
		return e.unaryOp("log_softmax", x, saves, func(c ctx, a node) (node, error) {
			b := e.nodes(c)
			x2 := a
			if a.Ne() != flat {
				x2 = b.reshape(a, flat)
			}
			d := b.add(x2, b.scale(b.rowMax(x2, cols, rows), -1)) // the max broadcast along each row
			lse := b.unary("log", b.sumRows(b.unary("exp", d)))
			y := b.add(d, b.scale(lse, -1))
			if a.Ne() != flat {
				y = b.reshape(y, a.Ne())
			}
			return y, b.err
		}, func(g, x, y *Tensor) (*Tensor, error) {
			from := y
			if e.backend.IsCPU() {
				from = x
			}
			return e.build("log_softmax_back", g.shape, []*Tensor{g, from}, func(b *nodes, in []node) node {
				var p node
				if e.backend.IsCPU() {
					p = b.set(b.c.SoftMax(in[1]))
				} else {
					p = b.unary("exp", in[1])
				}
				return b.add(in[0], b.mul(p, b.scale(b.sumRows(in[0]), -1))) // the sum broadcasts along the row
			})
		})
	})
}

// LayerNorm normalises over the last dim to zero mean and unit variance
// (biased, as PyTorch), then scales by w and shifts by b when given.
//
// Where the backend has gglua's kernels (the CPU, and a GPU whose library
// has them) it is two fused nodes (layerNormFused). Elsewhere it is one op
// with its own gradient rather than a composition of mean, sub, mul, sqrt
// and div: composed, their gradients made about 60 nodes per LayerNorm
// (docs/BENCHMARKS.md). Without OpenBLAS (and on GPUs) that forward
// computes the same values, in the same order, as the composition did;
// with it the row means are BLAS sums (see rowOps), equal within f32
// rounding.
func (e *Engine) LayerNorm(x, w, b *Tensor, eps float32) (*Tensor, error) {
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		return nil, argErrorf("layer_norm: eps must be a finite number >= 0, got %g", eps)
	}
	if x.Dim() == 0 {
		return nil, shapeErrorf("layer_norm: expected a tensor of at least 1 dim, got a scalar")
	}
	last := x.shape[len(x.shape)-1]
	for _, p := range []*Tensor{w, b} {
		if p != nil && (p.Dim() != 1 || p.shape[0] != last) {
			return nil, shapeErrorf("layer_norm: weight/bias of shape %s do not match the last dim %d of %s", ShapeString(p.shape), last, ShapeString(x.shape))
		}
	}
	if x.Numel() == 0 {
		return e.emptyOf("layer_norm", x.shape, x, w, b), nil
	}
	if e.fusedLayerNorm(x) {
		return e.layerNormFused(x, w, b, eps)
	}
	rowShape := append(append([]int(nil), x.shape[:len(x.shape)-1]...), 1)
	var ch chain
	do := ch.do
	r, err := e.newRowOps(x)
	if err != nil {
		return nil, err
	}
	// xc = x - mean(x), as x + (-mean): sub is single-threaded in ggml's CPU
	// backend, add is not, and the two are the same in IEEE arithmetic.
	xc := do(func() (*Tensor, error) {
		return e.build("layer_norm", x.shape, r.with(x), func(n *nodes, in []node) node {
			rows := contiguousRows(n, in[0])
			return n.add(rows, r.spread(n, in, r.negMean(n, in, rows), rows.Ne()))
		})
	})
	var sd, xhat *Tensor
	if e.rmsLayerNorm(last) {
		// x̂ is the RMS norm of the centred rows: one pass, and its
		// gradient one pass too (layerNormBackRMS).
		xhat = do(func() (*Tensor, error) {
			return e.newOp("layer_norm", x.shape, []*Tensor{xc}, func(c ctx, in []node) (node, error) { return c.RMSNorm(in[0], eps) })
		})
	} else {
		// sd = sqrt(mean(xc²) + eps), one per row, spread along the rows
		// when r has its rows of constants (the backward divides by it too).
		sdShape := rowShape
		if r.ones != nil {
			sdShape = x.shape
		}
		sd = do(func() (*Tensor, error) {
			return e.build("layer_norm", sdShape, r.with(xc), func(n *nodes, in []node) node {
				v := n.scaleBias(r.negMean(n, in, n.mul(in[0], in[0])), -1, eps)
				return r.spread(n, in, n.unary("sqrt", v), in[0].Ne())
			})
		})
		xhat = do(func() (*Tensor, error) {
			return e.build("layer_norm", x.shape, []*Tensor{xc, sd}, func(n *nodes, in []node) node { return n.div(in[0], in[1]) })
		})
	}
	if ch.err != nil {
		return nil, ch.err
	}
	inputs, affine := []*Tensor{x}, []*Tensor{xhat}
	for _, p := range []*Tensor{w, b} {
		if p != nil {
			inputs, affine = append(inputs, p), append(affine, p)
		}
	}
	y := xhat
	if len(affine) > 1 {
		y = do(func() (*Tensor, error) {
			return e.build("layer_norm", x.shape, affine, func(n *nodes, in []node) node {
				out, k := in[0], 1
				if w != nil {
					out, k = n.mul(out, in[k]), k+1
				}
				if b != nil {
					out = n.add(out, in[k])
				}
				return out
			})
		})
		if ch.err != nil {
			return nil, ch.err
		}
	}
	e.record(y, "layer_norm", inputs, func(g *Tensor) ([]*Tensor, error) {
		if sd == nil {
			return e.layerNormBackRMS(g, x, w, b, xc, xhat, eps, r)
		}
		return e.layerNormBack(g, x, w, b, xhat, sd, r)
	})
	return y, nil
}

// fusedLayerNorm reports whether x's LayerNorm runs as gglua's two fused
// nodes (layer_norm.c, gglua-kernels.cu): on the CPU, and on a device whose
// library has them; the composition below serves the others.
func (e *Engine) fusedLayerNorm(x *Tensor) bool {
	return x.Numel() > 0 && x.storage().dtype == ggmlcgo.F32 && e.backend.HasKernel(ggmlcgo.KernelLayerNorm) && !forceComposedLayerNorm
}

// forceComposedLayerNorm makes tests take the composed LayerNorm.
var forceComposedLayerNorm = false

// layerNormFused is LayerNorm as one node, whose run holds y and each
// row's mean and 1/sd, and its gradient as another, whose run holds dx, dw
// and db: a step keeps x and the two statistics, not x - mean and x̂ (a
// GPT's 25 LayerNorms held ~2 GB of them at 12/12/768/1024/8).
func (e *Engine) layerNormFused(x, w, b *Tensor, eps float32) (*Tensor, error) {
	n := x.shape[len(x.shape)-1]
	rows := int(x.Numel()) / n
	inputs := []*Tensor{x}
	for _, p := range []*Tensor{w, b} {
		if p != nil {
			inputs = append(inputs, p)
		}
	}
	// affine is which of w and b in are, by their place after x.
	affine := func(in []node) (wn, bn *node) {
		k := 1
		if w != nil {
			wn, k = &in[k], k+1
		}
		if b != nil {
			bn = &in[k]
		}
		return wn, bn
	}
	run, err := e.kernelOp("layer_norm", []int{rows*n + 2*rows}, inputs, func(c ctx, in []node) (node, error) {
		wn, bn := affine(in)
		return c.LayerNorm(in[0], wn, bn, eps)
	})
	if err != nil {
		return nil, err
	}
	y := viewOf(run, x.shape, 0, contiguousStrides(x.shape))
	if !e.recording() || !slices.ContainsFunc(inputs, func(in *Tensor) bool { return in.requiresGrad }) {
		return y, nil
	}
	// The gradient reads x and each row's mean and 1/sd, as PyTorch's
	// saves them: a copy of the statistics (two numbers a row), so that
	// the tape keeps no y (a view of run would keep all of it).
	stats, err := e.Contiguous(viewOf(run, []int{2 * rows}, int64(rows*n), []int64{1}))
	if err != nil {
		return nil, err
	}
	e.record(y, "layer_norm", inputs, func(g *Tensor) ([]*Tensor, error) {
		ins := []*Tensor{g, x, stats}
		if w != nil {
			ins = append(ins, w)
		}
		grads, err := e.kernelOp("layer_norm_back", []int{rows*n + 2*n}, ins, func(c ctx, in []node) (node, error) {
			var wn *node
			if w != nil {
				wn = &in[3]
			}
			return c.LayerNormBack(in[0], in[1], in[2], wn, eps)
		})
		if err != nil {
			return nil, err
		}
		out := []*Tensor{viewOf(grads, x.shape, 0, contiguousStrides(x.shape))}
		if w != nil {
			out = append(out, viewOf(grads, []int{n}, int64(rows*n), []int64{1}))
		}
		if b != nil {
			out = append(out, viewOf(grads, []int{n}, int64(rows*n+n), []int64{1}))
		}
		return out, nil
	})
	return y, nil
}

// layerNormBack is LayerNorm's gradient, with x̂ = (x - mean) / sd the
// normalised rows, ĝ = g·w (g without a weight) and n the row length:
//
//	dx = (ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) / sd,  dw = Σ g·x̂,  db = Σ g
//
// summed over every row for dw and db. The means are subtracted as added
// negative means (see LayerNorm).
func (e *Engine) layerNormBack(g, x, w, b, xhat, sd *Tensor, r rowOps) ([]*Tensor, error) {
	var gx *Tensor
	var ch chain
	do := ch.do
	if x.requiresGrad {
		ins := []*Tensor{g, xhat, sd}
		if w != nil {
			ins = append(ins, w)
		}
		gx = do(func() (*Tensor, error) {
			return e.build("layer_norm_back", x.shape, r.with(ins...), func(n *nodes, in []node) node {
				gh := contiguousRows(n, in[0])
				if w != nil {
					gh = n.mul(gh, in[3])
				}
				ne := gh.Ne()
				m1 := r.spread(n, in, r.negMean(n, in, gh), ne)
				m2 := r.spread(n, in, r.negMean(n, in, n.mul(gh, in[1])), ne)
				return n.div(n.add(n.add(gh, m1), n.mul(in[1], m2)), in[2])
			})
		})
	}
	affine, err := e.layerNormAffineBack(g, w, b, xhat)
	return append([]*Tensor{gx}, affine...), errors.Join(ch.err, err)
}

// layerNormAffineBack is the gradients of LayerNorm's weight and bias (one
// each that is given, nil where it needs none): dw = Σ g·x̂, db = Σ g.
func (e *Engine) layerNormAffineBack(g, w, b, xhat *Tensor) ([]*Tensor, error) {
	var ch chain
	do := ch.do
	var grads []*Tensor
	if w != nil {
		var gw *Tensor
		if w.requiresGrad {
			gxh := do(func() (*Tensor, error) {
				return e.build("layer_norm_back", xhat.shape, []*Tensor{g, xhat}, func(n *nodes, in []node) node { return n.mul(in[0], in[1]) })
			})
			gw = do(func() (*Tensor, error) { return e.sumTo(gxh, w.shape) })
		}
		grads = append(grads, gw)
	}
	if b != nil {
		var gb *Tensor
		if b.requiresGrad {
			gb = do(func() (*Tensor, error) { return e.sumTo(g, b.shape) })
		}
		grads = append(grads, gb)
	}
	return grads, ch.err
}

// rmsLayerNorm reports whether LayerNorm over rows of n takes ggml's RMS
// norm of the centred rows and its fused gradient: on devices (on the CPU
// the composed form's row ops are BLAS GEMMs), for rows whose length
// ggml-cuda's rms_norm_back takes (a multiple of 32).
func (e *Engine) rmsLayerNorm(n int) bool {
	return forceRMSLayerNorm || (!e.backend.IsCPU() && n%32 == 0)
}

// forceRMSLayerNorm makes tests take the devices' LayerNorm on the CPU.
var forceRMSLayerNorm = false

// layerNormBackRMS is layerNormBack for x̂ = rms_norm(xc): the gradient of
// the RMS norm is one ggml node, and the centring's gradient subtracts its
// row means (the mean of (ĝ - x̂·mean(ĝ·x̂)) / sd is mean(ĝ) / sd, x̂'s rows
// summing to 0), which is the formula of layerNormBack.
func (e *Engine) layerNormBackRMS(g, x, w, b, xc, xhat *Tensor, eps float32, r rowOps) ([]*Tensor, error) {
	var ch chain
	do := ch.do
	grads := []*Tensor{nil}
	if x.requiresGrad {
		ins := []*Tensor{g, xc}
		if w != nil {
			ins = append(ins, w)
		}
		grads[0] = do(func() (*Tensor, error) {
			return e.build("layer_norm_back", x.shape, r.with(ins...), func(n *nodes, in []node) node {
				gh := contiguousRows(n, in[0])
				if w != nil {
					gh = n.mul(gh, in[2])
				}
				dxc := n.set(n.c.RMSNormBack(gh, in[1], eps))
				return n.add(dxc, r.spread(n, in, r.negMean(n, in, dxc), dxc.Ne()))
			})
		})
	}
	affine, err := e.layerNormAffineBack(g, w, b, xhat)
	return append(grads, affine...), errors.Join(ch.err, err)
}

// rowOps are LayerNorm's means along rows (negated: what it needs) and
// its spreads of one value per row along its row. ggml's CPU sum_rows is
// single-threaded, and its add, mul and div broadcast a column one element
// at a time (a function call each: 3-4x the time of the same op on two full
// operands), its repeat single-threaded too. On the CPU with OpenBLAS both
// are GEMMs split over the threads instead: a negated mean is rows times a
// column of -1/n (f32 sums in BLAS's order, where sum_rows adds in f64), a
// spread col times a row of ones (exact copies). Elsewhere (ones nil) they
// are sum_rows scaled by -1/n and the column itself, which the binary ops
// broadcast.
type rowOps struct {
	n       int     // the row length
	ones    *Tensor // [n] of 1, or nil
	negAvgs *Tensor // [n] of -1/n, or nil
}

// newRowOps makes the rows of constants for rows like x's last dim, where
// GEMMs are used.
func (e *Engine) newRowOps(x *Tensor) (rowOps, error) {
	n := x.shape[len(x.shape)-1]
	r := rowOps{n: n}
	if !e.useBLAS {
		return r, nil
	}
	fill := func(v float32) (*Tensor, error) {
		return e.build("layer_norm", []int{n}, []*Tensor{x}, func(b *nodes, in []node) node {
			// fill reads nothing of its operand: any [n] view of x will do.
			n4 := int64(n)
			first := b.set(b.c.View(in[0], [4]int64{n4, 1, 1, 1}, [3]int64{4 * n4, 4 * n4, 4 * n4}, 0))
			if !in[0].IsContiguous() {
				first = b.set(b.c.Cont(first))
			}
			return b.fill(first, v)
		})
	}
	var err error
	if r.ones, err = fill(1); err != nil {
		return r, err
	}
	r.negAvgs, err = fill(float32(-1 / float64(n)))
	return r, err
}

// with is a build's inputs, the rows of constants last when there are.
func (r rowOps) with(in ...*Tensor) []*Tensor {
	if r.ones == nil {
		return in
	}
	return append(append([]*Tensor(nil), in...), r.ones, r.negAvgs)
}

// negMean is minus the mean of each row of a (contiguous, ne [n, rows..]):
// ne [1, rows..].
func (r rowOps) negMean(b *nodes, in []node, a node) node {
	if b.err != nil {
		return node{}
	}
	if r.ones == nil {
		return b.scale(b.sumRows(a), float32(-1/float64(r.n)))
	}
	ne := a.Ne()
	ne[0] = 1
	return b.set(b.c.Gemm(a, in[len(in)-1], false, true, ne))
}

// spread is col (ne [1, rows..]) repeated along rows of ne, or col itself
// without the rows of constants.
func (r rowOps) spread(b *nodes, in []node, col node, ne [4]int64) node {
	if b.err != nil || r.ones == nil {
		return col
	}
	return b.set(b.c.Gemm(col, in[len(in)-2], false, false, ne))
}

// contiguousRows is a, copied contiguous if it is a strided view: sum_rows
// reads each row as packed floats.
func contiguousRows(n *nodes, a node) node {
	if n.err != nil || a.IsContiguous() {
		return a
	}
	return n.set(n.c.Cont(a))
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1-p) when training. The mask is drawn on the host from the engine's
// generator and uploaded with the step.
func (e *Engine) Dropout(x *Tensor, p float64, training bool) (*Tensor, error) {
	if !(p >= 0 && p <= 1) { // NaN too
		return nil, argErrorf("dropout: probability %g outside [0, 1]", p)
	}
	if !training || p == 0 {
		return x, nil
	}
	mask := make([]float32, x.Numel())
	if p < 1 { // p = 1 drops everything: x times zeros, as PyTorch (NaN stays NaN)
		keep := float32(1 / (1 - p))
		for i := range mask {
			if e.Rand().Float64() >= p {
				mask[i] = keep
			}
		}
	}
	m, err := FromFloat32(mask, x.shape...)
	if err != nil {
		return nil, err
	}
	return e.Mul(x, m)
}
