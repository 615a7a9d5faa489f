package core

import (
	"slices"

	"github.com/gglua/gglua/ggmlcgo"
)

// MLP is a transformer's feed-forward block, nn.Sequential{Linear(w1, b1),
// GELU(), Linear(w2, b2)}: GELU (exact) of x·w1ᵀ + b1, times w2ᵀ, plus b2.
//
// Under autocast, where products run as the bf16 gemm and the backend has
// gglua's kernels, it is one op, whose values are PyTorch's autocast's: the
// first product writes its result h in bf16 (PyTorch's autocast writes
// every product so), GELU reads h and writes bf16 (what the second product
// reads), and the tape keeps only x's bf16 copy and h. GELU's result is
// made again by the backward (as torch.compile's partitioner recomputes
// it): a GPT layer keeps 62 MB where the composition kept h in f32 and
// GELU's result too (162 MB at d=768 over 8192 rows), and the passes over
// the widest tensors read and write half the bytes. Elsewhere it is the
// composition, LinearBias, Gelu, LinearBias, with GELU's result made
// again by the backward on a device in f32 (remadeMLP).
func (e *Engine) MLP(x, w1, b1, w2, b2 *Tensor) (*Tensor, error) {
	if e.remadeMLP(x, w1, b1, w2, b2) {
		return e.mlpRemade(x, w1, b1, w2, b2)
	}
	if !e.fusedMLP(x, w1, b1, w2, b2) {
		var c chain
		h := c.do(func() (*Tensor, error) { return e.LinearBias(x, w1, b1) })
		a := c.do(func() (*Tensor, error) { return e.Gelu(h, "none") })
		return c.do(func() (*Tensor, error) { return e.LinearBias(a, w2, b2) }), c.err
	}
	if x.Dim() == 3 { // all rows as one 2-d product, as Linear
		return e.overRows(x, w2.shape[0], func(x2 *Tensor) (*Tensor, error) { return e.MLP(x2, w1, b1, w2, b2) })
	}
	rows, hidden, out := x.shape[0], w1.shape[0], w2.shape[0]
	bf16 := gemmForm{bf16Gemm, e.storedInput, e.bf16Operand, true}
	var c chain
	xo := c.do(func() (*Tensor, error) { return bf16.operand(x) })
	w1o := c.do(func() (*Tensor, error) { return bf16.operand(w1) })
	w2o := c.do(func() (*Tensor, error) { return bf16.operand(w2) })
	h := c.do(func() (*Tensor, error) { return e.productWithBias(xo, w1o, b1, []int{rows, hidden}, ggmlcgo.BF16) })
	a := c.do(func() (*Tensor, error) { return e.geluBF16(h) })
	y := c.do(func() (*Tensor, error) { return e.productWithBias(a, w2o, b2, []int{rows, out}, ggmlcgo.F32) })
	if c.err != nil {
		return nil, c.err
	}
	e.Transient(a) // only the second product reads it; the backward makes it again
	inputs := []*Tensor{x, w1, b1, w2, b2}
	need := make([]bool, len(inputs)) // as the forward found them (gradients follow what the tape recorded)
	for i, t := range inputs {
		need[i] = t.requiresGrad
	}
	shapes := [][]int{x.shape, w1.shape, b1.shape, w2.shape, b2.shape}
	if !need[1] {
		xo = nil // dw1 = dhᵀ·x: only w1's gradient reads x
	}
	weight1, weight2 := e.savedOperand(w1, w1o, bf16.operand), e.savedOperand(w2, w2o, bf16.operand)
	if !need[0] {
		weight1 = nil // only x's gradient reads w1
	}
	w1o, w2o = nil, nil
	e.record(y, "mlp", inputs, func(g *Tensor) ([]*Tensor, error) {
		grads := make([]*Tensor, len(need)) // (not inputs: the closure would keep x)
		var c chain
		mm := func(name string, shape []int, p, q *Tensor, tp bool) *Tensor {
			return c.do(func() (*Tensor, error) {
				return e.kernelOpReading(name, shape, []*Tensor{p, q}, bf16.read, func(c ctx, in []node) (node, error) {
					return c.GemmBF16(in[0], in[1], tp, false, ne4(shape))
				})
			})
		}
		gop := c.do(func() (*Tensor, error) { return bf16.operand(g) })
		if need[4] {
			grads[4] = c.do(func() (*Tensor, error) { return e.sumTo(g, shapes[4]) })
		}
		if need[3] { // dw2 = gᵀ·gelu(h), GELU made again
			a := c.do(func() (*Tensor, error) { return e.geluBF16(h) })
			grads[3] = mm("matmul_back", shapes[3], gop, a, true)
		}
		if !need[0] && !need[1] && !need[2] {
			return grads, c.err
		}
		da := mm("matmul_back", []int{rows, hidden}, gop, c.do(weight2), false)
		// dh in bf16: each of its readers, a product and the bias's sum,
		// reads it so (PyTorch's autocast sums the bias's gradient from the
		// bf16 one too).
		dh := c.do(func() (*Tensor, error) {
			d, err := e.kernelOpReading("gelu_back", []int{rows, hidden}, []*Tensor{da, h}, e.storedInput, func(c ctx, in []node) (node, error) {
				return c.GeluErfBackKernel(in[0], in[1], ggmlcgo.BF16)
			})
			if err == nil {
				d.dtype = ggmlcgo.BF16
			}
			return d, err
		})
		if need[2] {
			grads[2] = c.do(func() (*Tensor, error) {
				return e.kernelOpReading("sum_to", shapes[2], []*Tensor{dh}, e.storedInput, func(c ctx, in []node) (node, error) { return c.ColumnSumKernel(in[0]) })
			})
		}
		if need[1] {
			grads[1] = mm("matmul_back", shapes[1], dh, xo, true)
		}
		if need[0] {
			grads[0] = mm("matmul_back", shapes[0], dh, c.do(weight1), false)
		}
		e.Transient(da, dh)
		return grads, c.err
	})
	if y.gradFn != nil {
		y.gradFn.roundsGrad = true // the gradient is read rounded to bf16
	}
	return y, nil
}

// productWithBias is x·wᵀ + b as one bf16 gemm node whose sums are written
// as out (x and w bf16 operands, b an f32 row).
func (e *Engine) productWithBias(x, w, b *Tensor, shape []int, out ggmlcgo.Type) (*Tensor, error) {
	y, err := e.kernelOpReading("linear", shape, []*Tensor{x, w, b}, e.storedInput, func(c ctx, in []node) (node, error) {
		return c.GemmBF16Bias(in[0], in[1], in[2], false, true, ne4(shape), out)
	})
	if err == nil {
		y.dtype = out
	}
	return y, err
}

// geluBF16 is GELU of h rounded to bf16 (a product's operand), not recorded.
func (e *Engine) geluBF16(h *Tensor) (*Tensor, error) {
	a, err := e.kernelOpReading("gelu", h.shape, []*Tensor{h}, e.storedInput, func(c ctx, in []node) (node, error) { return c.GeluBF16Kernel(in[0]) })
	if err == nil {
		a.dtype = ggmlcgo.BF16
	}
	return a, err
}

// fusedMLP reports whether MLP runs as one op: under autocast, on the bf16
// gemm with the MLP's kernels, for a 2-d or 3-d f32 or bf16 x and f32
// weights and biases of their own memory whose shapes chain.
func (e *Engine) fusedMLP(x, w1, b1, w2, b2 *Tensor) bool {
	if e.autocast != ggmlcgo.BF16 || !e.gemmBF16() || !e.backend.HasKernel(ggmlcgo.KernelMLPBF16) || forceComposedMLP {
		return false
	}
	return mlpChains(x, w1, b1, w2, b2) && (x.dtype == ggmlcgo.F32 || x.dtype == ggmlcgo.BF16) && x.storage().dtype != ggmlcgo.I32
}

// mlpChains reports whether the MLP's shapes chain: a 2-d or 3-d x, f32
// weights and biases of their own memory, with sizes cuBLAS takes.
func mlpChains(x, w1, b1, w2, b2 *Tensor) bool {
	for _, p := range []*Tensor{w1, b1, w2, b2} {
		if p == nil || p.base != nil || p.dtype != ggmlcgo.F32 {
			return false
		}
	}
	if x.Dim() < 2 || x.Dim() > 3 || w1.Dim() != 2 || w2.Dim() != 2 || b1.Dim() != 1 || b2.Dim() != 1 {
		return false
	}
	d, hidden, out := w1.shape[1], w1.shape[0], w2.shape[0]
	rows := x.Numel() / int64(max(d, 1))
	return x.shape[x.Dim()-1] == d && b1.shape[0] == hidden && w2.shape[1] == hidden && b2.shape[0] == out &&
		d > 0 && hidden > 0 && out > 0 && gemmSizes(int(rows), d, hidden, out)
}

// remadeMLP reports whether MLP keeps GELU's input alone for the second
// product's gradient and makes GELU's result again in the backward: in f32
// on a device, while the tape records, with gglua's GELU gradient kernel.
// A GPT layer at d=768 over 8192 rows then keeps 100 MB less, where the
// recomputation costs one elementwise pass. The CPU, where that pass is a
// larger share of the step (erf over the widest tensor), keeps the
// composition, which keeps both, as PyTorch's eager mode does.
func (e *Engine) remadeMLP(x, w1, b1, w2, b2 *Tensor) bool {
	return e.autocast == ggmlcgo.F32 && e.recording() && (!e.backend.IsCPU() || forceRemadeMLP) && !forceComposedMLP &&
		e.backend.HasKernel(ggmlcgo.KernelGeluBack) && !forceComposedGeluBack &&
		x.dtype == ggmlcgo.F32 && x.storage().dtype == ggmlcgo.F32 && mlpChains(x, w1, b1, w2, b2)
}

// mlpRemade is the composition with its middle as one recorded op: h =
// x·w1ᵀ + b1 is recorded as LinearBias is; GELU(h)·w2ᵀ is computed off the
// tape and recorded with h and w2 as its inputs, its backward making
// GELU(h) again for w2's gradient; b2 is added as LinearBias adds it (its
// gradient reads nothing). Values and gradients are the composition's,
// bit for bit.
func (e *Engine) mlpRemade(x, w1, b1, w2, b2 *Tensor) (*Tensor, error) {
	if x.Dim() == 3 { // all rows as one 2-d product, as Linear
		return e.overRows(x, w2.shape[0], func(x2 *Tensor) (*Tensor, error) { return e.MLP(x2, w1, b1, w2, b2) })
	}
	h, err := e.LinearBias(x, w1, b1)
	if err != nil {
		return nil, err
	}
	var p *Tensor
	if err := e.NoGrad(func() error {
		var c chain
		a := c.do(func() (*Tensor, error) { return e.Gelu(h, "none") })
		p = c.do(func() (*Tensor, error) { return e.Linear(a, w2) })
		if c.err == nil {
			e.Transient(a) // only the product reads it; the backward makes it again
		}
		return c.err
	}); err != nil {
		return nil, err
	}
	needH, needW := h.requiresGrad, w2.requiresGrad // as the forward found them
	prec, read := e.productType()
	e.record(p, "mlp", []*Tensor{h, w2}, func(g *Tensor) ([]*Tensor, error) {
		var a *Tensor // only w2's gradient reads GELU's result
		if needW {
			var err error
			if a, err = e.Gelu(h, "none"); err != nil {
				return nil, err
			}
		}
		dh, dw2, err := e.linearBack(g, a, w2, h.shape, needH, needW, prec, read)
		if err == nil && needH {
			da := dh
			dh, err = e.geluBack(da, h)
			e.Transient(da)
		}
		if a != nil {
			e.Transient(a)
		}
		return []*Tensor{dh, dw2}, err
	})
	y, err := e.Add(p, b2)
	if err == nil {
		e.Transient(p)
	}
	return y, err
}

// forceComposedMLP makes tests take the composition where the fused MLP
// would run; forceRemadeMLP, the devices' f32 form on the CPU.
var forceComposedMLP, forceRemadeMLP = false, false

// SwiGLU is silu(g)·u, the gate of a llama feed-forward block (PyTorch's
// F.silu(g) * u), for g and u of one shape. The tape keeps g and u, and the
// backward makes silu(g) again for u's gradient: the composition keeps
// silu(g) besides (a third tensor of the block's widest shape, 92 MB a
// TinyLlama layer over 4096 rows), as PyTorch's does. Values and gradients
// are the composition's, bit for bit. Under autocast g and u are read
// rounded to bf16, as PyTorch's autocast products give them, and the tape
// keeps those: half the bytes.
func (e *Engine) SwiGLU(g, u *Tensor) (*Tensor, error) {
	if !slices.Equal(g.shape, u.shape) {
		return nil, shapeErrorf("swiglu: the gate has shape %s and the up projection %s (expected one shape)", ShapeString(g.shape), ShapeString(u.shape))
	}
	inputs := []*Tensor{g, u}
	if e.autocast == ggmlcgo.BF16 && e.backend.HasKernel(ggmlcgo.KernelGemmBF16) {
		for _, t := range []**Tensor{&g, &u} {
			if (*t).dtype != ggmlcgo.F32 {
				continue
			}
			r, err := e.bf16Operand(*t)
			if err != nil {
				return nil, err
			}
			*t = r
		}
	}
	var y *Tensor
	if err := e.NoGrad(func() error {
		var c chain
		s := c.do(func() (*Tensor, error) { return e.Silu(g) })
		y = c.do(func() (*Tensor, error) { return e.Mul(s, u) })
		if c.err == nil {
			e.Transient(s)
		}
		return c.err
	}); err != nil {
		return nil, err
	}
	needG, needU := inputs[0].requiresGrad, inputs[1].requiresGrad // as the forward found them
	// Where the tape keeps neither, the rounded copies are read by y alone.
	if !e.recording() || !needG && !needU {
		for i, t := range []*Tensor{g, u} {
			if t != inputs[i] {
				e.Transient(t)
			}
		}
	}
	if !needG {
		u = nil // only g's gradient reads u
	}
	e.record(y, "swiglu", inputs, func(dy *Tensor) ([]*Tensor, error) {
		var c chain
		var dg, du *Tensor
		if needU { // dy·silu(g)
			s := c.do(func() (*Tensor, error) { return e.Silu(g) })
			du = c.do(func() (*Tensor, error) { return e.Mul(dy, s) })
			e.Transient(s)
		}
		if needG { // silu'(g)·(dy·u)
			ds := c.do(func() (*Tensor, error) { return e.Mul(dy, u) })
			dg = c.do(func() (*Tensor, error) { return e.siluBack(ds, g) })
			e.Transient(ds)
		}
		return []*Tensor{dg, du}, c.err
	})
	return y, nil
}
