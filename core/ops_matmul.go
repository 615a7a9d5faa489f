package core

import (
	"github.com/gglua/gglua/ggmlcgo"
)

// Matrix products. ggml's mul_mat(a, b) is b·aᵀ, so PyTorch's weight layout
// (Linear: x·wᵀ) is one node; Matmul transposes its second operand first.

// Matmul is the matrix product of a [m, k] and b [k, n], or batched: a
// [B, m, k] and b [B, k, n] (either batch may be 1 or absent).
func (e *Engine) Matmul(a, b *Tensor) (*Tensor, error) {
	if a.Dim() < 2 || b.Dim() < 2 || a.Dim() > 3 || b.Dim() > 3 || a.shape[a.Dim()-1] != b.shape[b.Dim()-2] {
		return nil, shapeErrorf("matmul: cannot multiply shapes %s and %s (expected [.., m, k] and [.., k, n])", ShapeString(a.shape), ShapeString(b.shape))
	}
	// ggml's mul_mat(x, y) is y·xᵀ, so a·b = mul_mat(bᵀ, a).
	bt, err := e.Transpose(b, -1, -2)
	if err != nil {
		return nil, err
	}
	return e.Linear(a, bt)
}

func batchOf(t *Tensor) int {
	if t.Dim() == 3 {
		return t.shape[0]
	}
	return 1
}

// Linear is x·wᵀ for x [.., m, k] and w [.., n, k] (PyTorch's weight
// layout; batches of 1 broadcast): one ggml mul_mat, no transpose.
func (e *Engine) Linear(x, w *Tensor) (*Tensor, error) {
	bx, bw := batchOf(x), batchOf(w)
	if x.Dim() < 2 || w.Dim() < 2 || x.Dim() > 3 || w.Dim() > 3 || x.shape[x.Dim()-1] != w.shape[w.Dim()-1] || (bx != bw && bx != 1 && bw != 1) {
		return nil, shapeErrorf("linear: cannot multiply shape %s by the transpose of %s (expected [.., m, k] and [.., n, k])", ShapeString(x.shape), ShapeString(w.shape))
	}
	m, n := x.shape[x.Dim()-2], w.shape[w.Dim()-2]
	if bw > bx { // mul_mat broadcasts only w's batch over x's
		var err error
		if x, err = e.expandTo(x, []int{bw, m, x.shape[x.Dim()-1]}); err != nil {
			return nil, err
		}
	}
	shape := []int{m, n}
	if x.Dim() == 3 || w.Dim() == 3 {
		shape = []int{max(bx, bw), m, n}
	}
	if e.blasFor(w, m*n*x.shape[x.Dim()-1]) {
		return e.linearBLAS(x, w, shape)
	}
	y, err := e.newOp("matmul", shape, []*Tensor{x, w}, func(c ctx, in []node) (node, error) { return c.MulMat(in[1], in[0]) })
	if err != nil {
		return nil, err
	}
	e.record(y, "matmul", []*Tensor{x, w}, func(g *Tensor) ([]*Tensor, error) {
		// dx = g·w (mul_mat(wᵀ, g)); dw = gᵀ·x, summed over a broadcast batch.
		// Only what needs a gradient is computed (not, say, the input batch's).
		var gx, gw *Tensor
		var err error
		if x.requiresGrad {
			gx, err = e.newOp("matmul_back", x.shape, []*Tensor{g, w}, func(c ctx, in []node) (node, error) {
				wt, err := e.transposeNode(c, in[1])
				if err != nil {
					return node{}, err
				}
				return c.MulMat(wt, in[0])
			})
			if err != nil {
				return nil, err
			}
		}
		if !w.requiresGrad {
			return []*Tensor{gx, nil}, nil
		}
		gwShape := w.shape
		if x.Dim() == 3 {
			gwShape = []int{x.shape[0], n, x.shape[2]}
		}
		// gᵀ·x = mul_mat(xᵀ, gᵀ). ggml's out_prod computes the same in one node
		// but measured ~4x slower than mul_mat on the CPU (docs/BENCHMARKS.md),
		// so the two transposed copies pay for themselves.
		gw, err = e.newOp("matmul_back", gwShape, []*Tensor{x, g}, func(c ctx, in []node) (node, error) {
			xt, err := e.transposeNode(c, in[0])
			if err != nil {
				return node{}, err
			}
			gt, err := e.transposeNode(c, in[1])
			if err != nil {
				return node{}, err
			}
			return c.MulMat(xt, gt)
		})
		if err != nil {
			return nil, err
		}
		gw, err = e.sumTo(gw, w.shape)
		return []*Tensor{gx, gw}, err
	})
	return y, nil
}

// transposeNode swaps ne0 and ne1: with gglua's blocked kernel on the CPU,
// with ggml's copy elsewhere (custom ops run on the CPU backend only).
func (e *Engine) transposeNode(c ctx, a node) (node, error) {
	if e.backend.IsCPU() && a.Type() == ggmlcgo.F32 {
		if t, err := c.TransposeCPU(a); err == nil {
			return t, nil
		}
	}
	return c.Transpose(a)
}

// blasFor reports whether a product with weight w and about work
// multiply-adds per batch row runs on OpenBLAS: on the CPU, in a build that
// has it, for a 2-d weight, and for products big enough to pay for a BLAS
// call (below that ggml's own kernels win).
func (e *Engine) blasFor(w *Tensor, work int) bool {
	return e.useBLAS && w.Dim() == 2 && work >= 1<<15
}

// linearBLAS is Linear through OpenBLAS: y = x·wᵀ, dx = g·w, dw = gᵀ·x (summed
// over every row of a batched x), with no transposed copies.
func (e *Engine) linearBLAS(x, w *Tensor, shape []int) (*Tensor, error) {
	gemm := func(name string, out []int, a, b *Tensor, ta, tb bool) (*Tensor, error) {
		return e.newOp(name, out, []*Tensor{a, b}, func(c ctx, in []node) (node, error) {
			return c.Gemm(in[0], in[1], ta, tb, ne4(out))
		})
	}
	y, err := gemm("matmul", shape, x, w, false, true)
	if err != nil {
		return nil, err
	}
	e.record(y, "matmul", []*Tensor{x, w}, func(g *Tensor) ([]*Tensor, error) {
		var gx, gw *Tensor
		var err error
		if x.requiresGrad {
			if gx, err = gemm("matmul_back", x.shape, g, w, false, false); err != nil {
				return nil, err
			}
		}
		if w.requiresGrad {
			gw, err = gemm("matmul_back", w.shape, g, x, true, false)
		}
		return []*Tensor{gx, gw}, err
	})
	return y, nil
}
