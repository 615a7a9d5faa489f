package core

import (
	"github.com/gglua/gglua/ggmlcgo"
)

// A product is one ggml node, and a compute can be cancelled only between
// nodes: a 4096x4096 product on two cores runs for tens of seconds. So on
// the CPU, a large 2-d product (more than chunkMatmulAbove multiply-adds)
// is built from blocks of rows of x, about chunkMatmulWork multiply-adds
// each: a product per block, written into one output (a padded first
// block, then the others in place). Every element is the same dot product
// as in the single node (ggml's kernels compute each element whole, in an
// order that does not depend on how many rows there are: the blocks keep
// at least two rows, and contiguous rows, so the same kernel runs), so
// the values are identical; the products below the bound are built as
// one node, as before. Not split: batched products, a view as x, the
// gradients' products, the OpenBLAS path, and outputs of 1 GiB or more
// (ggml's in-place write keeps its offset below 1 GiB).
var (
	chunkMatmulAbove int64 = 1 << 29 // vars: tests lower them
	chunkMatmulWork  int64 = 1 << 28
)

// chunkMatmul reports whether the product x·wᵀ (m×k by n×k) is built in
// blocks of rows.
func (e *Engine) chunkMatmul(x, w *Tensor, m, n, k int) bool {
	return e.backend.IsCPU() && x.Dim() == 2 && w.Dim() == 2 && x.base == nil && m >= 4 &&
		int64(m)*int64(n)*int64(k) > chunkMatmulAbove && 4*int64(m)*int64(n) < 1<<30
}

// chunkedMulMat is mul_mat(w, x) for x ne (k, m), w ne (k, n), in blocks of
// rows of x (see chunkMatmulAbove). An x that is not a contiguous f32 node
// is multiplied whole.
func (e *Engine) chunkedMulMat(c ctx, w, x node, m, n, k int) (node, error) {
	if x.IsView() || x.Type() != ggmlcgo.F32 || x.Nbytes() != 4*int64(m)*int64(k) {
		return c.MulMat(w, x)
	}
	rows := max(2, int((chunkMatmulWork+int64(n)*int64(k)-1)/(int64(n)*int64(k))))
	blocks := min((m+rows-1)/rows, m/2, 1024)
	if need := 3*blocks + 4; c.Room() < need {
		fresh, err := ggmlcgo.NewContext(need, 0)
		if err != nil {
			return node{}, err
		}
		e.nodeCtxs = append(e.nodeCtxs, fresh) // freed with the others
		c = fresh
	}
	row := int64(k) * 4 // bytes of one row of x
	var out node
	for b, start := 0, 0; b < blocks; b++ {
		r := m / blocks
		if b < m%blocks {
			r++
		}
		xb, err := c.View(x, [ggmlcgo.MaxDims]int64{int64(k), int64(r), 1, 1}, [ggmlcgo.MaxDims - 1]int64{row, row * int64(r), row * int64(r)}, int64(start)*row)
		if err != nil {
			return node{}, err
		}
		yb, err := c.MulMat(w, xb)
		if err != nil {
			return node{}, err
		}
		if b == 0 {
			out, err = c.PadCPU(yb, 1, 0, m-r) // this path is the CPU's
		} else {
			out, err = c.SetRowsInplace(out, yb, int64(start))
		}
		if err != nil {
			return node{}, err
		}
		start += r
	}
	return out, nil
}

// Matrix products. ggml's mul_mat(a, b) is b·aᵀ, so PyTorch's weight layout
// (Linear: x·wᵀ) is one node; Matmul transposes its second operand first.

// Matmul is PyTorch's matmul: 1-d operands are a row (first) or a column
// (second) vector whose dim is removed from the result (two 1-d ones give
// their dot product, shape [1]: gglua has no 0-d tensors); 2-d ones a
// matrix product; higher ones batches of matrices whose batch dims
// broadcast (up to ggml's four dims).
func (e *Engine) Matmul(a, b *Tensor) (*Tensor, error) {
	if a.Dim() == 0 || b.Dim() == 0 || a.shape[a.Dim()-1] != b.shape[max(b.Dim()-2, 0)] {
		return nil, shapeErrorf("matmul: cannot multiply shapes %s and %s (expected [.., m, k] and [.., k, n], or vectors of k)", ShapeString(a.shape), ShapeString(b.shape))
	}
	var c chain
	switch {
	case a.Dim() == 1 && b.Dim() == 1:
		row := c.do(func() (*Tensor, error) { return e.Reshape(a, 1, a.shape[0]) })
		col := c.do(func() (*Tensor, error) { return e.Reshape(b, b.shape[0], 1) })
		y := c.do(func() (*Tensor, error) { return e.matmul(row, col) })
		return c.do(func() (*Tensor, error) { return e.Reshape(y, 1) }), c.err
	case a.Dim() == 1:
		row := c.do(func() (*Tensor, error) { return e.Reshape(a, 1, a.shape[0]) })
		y := c.do(func() (*Tensor, error) { return e.matmul(row, b) })
		return c.do(func() (*Tensor, error) { return e.Squeeze(y, -2) }), c.err
	case b.Dim() == 1:
		col := c.do(func() (*Tensor, error) { return e.Reshape(b, b.shape[0], 1) })
		y := c.do(func() (*Tensor, error) { return e.matmul(a, col) })
		return c.do(func() (*Tensor, error) { return e.Squeeze(y, -1) }), c.err
	}
	return e.matmul(a, b)
}

// Bmm is PyTorch's bmm: a [B, m, k] times b [B, k, n], same B, no
// broadcasting.
func (e *Engine) Bmm(a, b *Tensor) (*Tensor, error) {
	if a.Dim() != 3 || b.Dim() != 3 || a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1] {
		return nil, shapeErrorf("bmm: cannot multiply shapes %s and %s (expected [B, m, k] and [B, k, n])", ShapeString(a.shape), ShapeString(b.shape))
	}
	return e.matmul(a, b)
}

// matmul multiplies matrices a [.., m, k] and b [.., k, n] whose batch dims
// broadcast. Batches become one dim for the product (ggml's mul_mat
// broadcasts only its second operand's batch over the first's, and only
// one way), and the result gets the broadcast batch shape back.
func (e *Engine) matmul(a, b *Tensor) (*Tensor, error) {
	if a.Dim() < 2 || b.Dim() < 2 || a.shape[a.Dim()-1] != b.shape[b.Dim()-2] {
		return nil, shapeErrorf("matmul: cannot multiply shapes %s and %s (expected [.., m, k] and [.., k, n])", ShapeString(a.shape), ShapeString(b.shape))
	}
	m, k, n := a.shape[a.Dim()-2], a.shape[a.Dim()-1], b.shape[b.Dim()-1]
	batch, err := broadcastShape("matmul", a.shape[:a.Dim()-2], b.shape[:b.Dim()-2])
	if err != nil {
		return nil, shapeErrorf("matmul: the batch dims of shapes %s and %s do not broadcast", ShapeString(a.shape), ShapeString(b.shape))
	}
	// ggml's mul_mat(x, y) is y·xᵀ, so a·b = mul_mat(bᵀ, a).
	if len(batch) <= 1 && a.Dim() <= 3 && b.Dim() <= 3 {
		bt, err := e.Transpose(b, -1, -2)
		if err != nil {
			return nil, err
		}
		return e.Linear(a, bt)
	}
	nb := 1
	for _, d := range batch {
		nb *= d
	}
	var c chain
	flat := func(t *Tensor, rows, cols int) *Tensor {
		full := c.do(func() (*Tensor, error) { return e.Expand(t, append(append([]int(nil), batch...), rows, cols)) })
		return c.do(func() (*Tensor, error) { return e.Reshape(full, nb, rows, cols) })
	}
	a3, b3 := flat(a, m, k), flat(b, k, n)
	bt := c.do(func() (*Tensor, error) { return e.Transpose(b3, -1, -2) })
	y := c.do(func() (*Tensor, error) { return e.Linear(a3, bt) })
	out := c.do(func() (*Tensor, error) { return e.Reshape(y, append(append([]int(nil), batch...), m, n)...) })
	return out, c.err
}

// overRows is f of the 3-d x [b, t, k] seen as b·t rows [b·t, k], its
// [b·t, n] result seen as [b, t, n] again.
func (e *Engine) overRows(x *Tensor, n int, f func(x2 *Tensor) (*Tensor, error)) (*Tensor, error) {
	var c chain
	rows := []int{x.shape[0] * x.shape[1], x.shape[2]}
	x2 := c.do(func() (*Tensor, error) {
		// Under autocast's bf16 products a packed view (LayerNorm's result,
		// attention's) is read in place, by its bf16 copy or as it lies
		// (bf16Operand), not copied first.
		if x.base != nil && x.contiguous() && e.autocast == ggmlcgo.BF16 && e.gemmBF16() {
			return e.View(x, rows...)
		}
		return e.reshapeOp(x, rows)
	})
	y2 := c.do(func() (*Tensor, error) { return f(x2) })
	y := c.do(func() (*Tensor, error) { return e.reshapeOp(y2, []int{x.shape[0], x.shape[1], n}) })
	if c.err == nil {
		e.Transient(y2) // y is a view of its memory, kept if y is
	}
	return y, c.err
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
	if k := x.shape[x.Dim()-1]; k == 0 { // a sum of no products: zeros
		shape := []int{x.shape[x.Dim()-2], w.shape[w.Dim()-2]}
		if x.Dim() == 3 || w.Dim() == 3 {
			shape = append([]int{max(bx, bw)}, shape...)
		}
		return e.filled("linear", []*Tensor{x, w}, 0, shape)
	}
	if x.Dim() == 3 && w.Dim() == 2 && x.dtype == ggmlcgo.F32 && w.dtype != ggmlcgo.I32 {
		// A batch of inputs times one weight is one 2-d product over all
		// their rows. As a batched mul_mat, ggml-cuda ran it 30x slower than
		// one GEMM on an H200 (a [64, 256, 384] input through a 384->1152
		// layer: 7.8 ms against 0.25), and the weight's gradient was an
		// out_prod per batch plus a sum over them. The reshapes are ops of
		// their own (PyTorch's _unsafe_view), so the result is no view and
		// x's changes are reported against x's shape. (An i32 operand takes
		// the path below, whose error names its shape.)
		return e.overRows(x, w.shape[0], func(x2 *Tensor) (*Tensor, error) { return e.Linear(x2, w) })
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
	// prec is the type the products round their first operand to: bf16
	// under autocast (autocast.go), decided now for the gradients too.
	prec, read := e.productType()
	quantized := w.IsQuantized()
	if quantized {
		read = weightAsStored(w, read) // ggml multiplies by the blocks as they are
	}
	if prec == ggmlcgo.F32 && !quantized && e.blasFor(w, m*n*x.shape[x.Dim()-1]) {
		return e.linearGemm(x, w, nil, shape, gemmForm{blasGemm, e.input, asItIs, false})
	}
	if prec == ggmlcgo.BF16 && x.Dim() == 2 && w.Dim() == 2 && e.gemmBF16() && gemmSizes(m, n, x.shape[1]) && !quantized &&
		x.storage().dtype != ggmlcgo.I32 && w.storage().dtype != ggmlcgo.I32 { // (an i32 operand's error is mul_mat's)
		return e.linearGemm(x, w, nil, shape, gemmForm{bf16Gemm, e.storedInput, e.bf16Operand, true})
	}
	k := x.shape[x.Dim()-1]
	y, err := e.newOpReading("matmul", shape, []*Tensor{x, w}, read, func(c ctx, in []node) (node, error) {
		wn, xn, err := productOperands(c, in[1], in[0], prec)
		if err != nil {
			return node{}, err
		}
		if e.chunkMatmul(x, w, m, n, k) && !quantized {
			return e.chunkedMulMat(c, wn, xn, m, n, k)
		}
		return c.MulMat(wn, xn)
	})
	if err != nil {
		return nil, err
	}
	// Only w's gradient reads x: a frozen weight's product (a LoRA base's)
	// keeps no activation, as PyTorch saves them.
	needX, needW, xShape, saved := x.requiresGrad, w.requiresGrad, x.shape, x
	if !needW {
		saved = nil
	}
	e.record(y, "matmul", []*Tensor{x, w}, func(g *Tensor) ([]*Tensor, error) {
		gx, gw, err := e.linearBack(g, saved, w, xShape, needX, needW, prec, read)
		return []*Tensor{gx, gw}, err
	})
	return y, nil
}

// linearBack is Linear(x, w)'s gradients for g, each where need says
// (nil elsewhere), for an x of shape xShape (nil where w's gradient is not
// needed); prec and read are how the forward read its operands.
func (e *Engine) linearBack(g, x, w *Tensor, xShape []int, needX, needW bool, prec ggmlcgo.Type, read func(*Tensor) (node, error)) (gx, gw *Tensor, err error) {
	n, k, quantized := w.shape[w.Dim()-2], xShape[len(xShape)-1], w.IsQuantized()
	// dx = g·w (mul_mat(wᵀ, g)); dw = gᵀ·x, summed over a broadcast batch.
	// Only what needs a gradient is computed (not, say, the input batch's).
	// On a GPU both are out_prod, one cuBLAS GEMM reading the transposes
	// in place: the transposed copies cost more than the product there
	// at large batches (docs/GPU.md). Not for batches of matrices
	// (attention's): ggml-cuda's out_prod runs one GEMM per matrix, 384
	// launches for a [64, 6, 256, 64] product, where the copies and a
	// batched mul_mat cost a tenth of that.
	// (ggml's out_prod is f32 only: not under autocast.)
	outProd := (forceOutProd || !e.backend.IsCPU()) && len(xShape) == 2 && w.Dim() == 2 && cuBLASAligned(n, k) && prec == ggmlcgo.F32
	if needX {
		readBack := read
		if quantized && !e.readsQuantized("out_prod", w.storage().dtype) {
			readBack = e.input // w dequantized to f32 for ggml's out_prod, g as it is
		}
		gx, err = e.newOpReading("matmul_back", xShape, []*Tensor{g, w}, readBack, func(c ctx, in []node) (node, error) {
			if quantized { // a quantized weight has no transpose: its rows, dequantized, times g
				return c.OutProd(in[1], in[0], true)
			}
			if outProd {
				if gx, err := c.OutProd(in[1], in[0], true); err == nil { // Σ_j w[:, j] ⊗ g[j, :]
					return gx, nil
				}
			}
			wp, gn, err := productOperands(c, in[1], in[0], prec)
			if err != nil {
				return node{}, err
			}
			wt, err := e.transposeNode(c, wp)
			if err != nil {
				return node{}, err
			}
			return c.MulMat(wt, gn)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if !needW {
		return gx, nil, nil
	}
	gwShape := w.shape
	if x.Dim() == 3 {
		gwShape = []int{x.shape[0], n, x.shape[2]}
	}
	// gᵀ·x = mul_mat(xᵀ, gᵀ). ggml's out_prod computes the same in one node
	// but measured ~4x slower than mul_mat on the CPU (docs/BENCHMARKS.md),
	// so the two transposed copies pay for themselves.
	gw, err = e.newOpReading("matmul_back", gwShape, []*Tensor{x, g}, read, func(c ctx, in []node) (node, error) {
		if outProd {
			if gw, err := c.OutProd(in[0], in[1], false); err == nil { // Σ_i x[i, :] ⊗ g[i, :]
				return gw, nil
			}
		}
		// x is rounded before its transpose, which then moves half the bytes.
		xp, gn, err := productOperands(c, in[0], in[1], prec)
		if err != nil {
			return node{}, err
		}
		xt, err := e.transposeNode(c, xp)
		if err != nil {
			return node{}, err
		}
		gt, err := e.transposeNode(c, gn)
		if err != nil {
			return node{}, err
		}
		return c.MulMat(xt, gt)
	})
	if err != nil {
		return nil, nil, err
	}
	gw, err = e.sumTo(gw, w.shape)
	return gx, gw, err
}

// transposeNode swaps ne0 and ne1: with gglua's blocked kernel on the CPU,
// with ggml's copy elsewhere (custom ops run on the CPU backend only).
// ggml-cuda takes its tiled transpose kernel only for 3-d operands (with a
// fourth dim it copies element by element, 6x slower: 350 us for a GPT's
// [64, 6, 256, 256] scores), so a packed 4-d node is transposed as 3-d.
func (e *Engine) transposeNode(c ctx, a node) (node, error) {
	if e.backend.IsCPU() && a.Type() == ggmlcgo.F32 && !forceGGMLTranspose {
		if t, err := c.TransposeCPU(a); err == nil {
			return t, nil
		}
	}
	ne := a.Ne()
	if ne[3] == 1 || !a.IsContiguous() {
		return c.Transpose(a)
	}
	a3, err := c.ReshapeView(a, [ggmlcgo.MaxDims]int64{ne[0], ne[1], ne[2] * ne[3], 1})
	if err != nil {
		return node{}, err
	}
	t, err := c.Transpose(a3)
	if err != nil {
		return node{}, err
	}
	return c.ReshapeView(t, [ggmlcgo.MaxDims]int64{ne[1], ne[0], ne[2], ne[3]})
}

// forceGGMLTranspose makes tests take the devices' transposes on the CPU.
var forceGGMLTranspose = false

// blasFor reports whether a product with weight w and about work
// multiply-adds per batch row runs on OpenBLAS: on the CPU, in a build that
// has it, for a 2-d weight, and for products big enough to pay for a BLAS
// call (below that ggml's own kernels win).
func (e *Engine) blasFor(w *Tensor, work int) bool {
	return e.useBLAS && w.Dim() == 2 && work >= 1<<15
}

// gemmBF16 reports whether autocast's 2-d products run as gglua's bf16
// gemm (ggmlcgo.GemmBF16): on a device whose library has it. Against
// ggml's mul_mat of a bf16 operand (which rounds its other operand into a
// scratch copy, has cuBLAS write bf16 and widens that to f32) the gemm
// rounds both operands in one fast pass each, reads the gradients'
// transposes in place and writes f32 sums; the CPU keeps ggml's mul_mat,
// whose bf16 dot products are faster than the reference kernel.
func (e *Engine) gemmBF16() bool {
	return forceGemmBF16 || !e.backend.IsCPU() && e.backend.HasKernel(ggmlcgo.KernelGemmBF16)
}

// forceGemmBF16 makes tests take the devices' bf16 gemm on the CPU.
var forceGemmBF16 = false

// gemmSizes reports whether a product's dims fit cuBLAS's ints (GemmBF16
// takes up to 2^30; larger ones stay ggml's mul_mat).
func gemmSizes(dims ...int) bool {
	for _, d := range dims {
		if d > 1<<30 {
			return false
		}
	}
	return true
}

// A gemmForm is how linearGemm's products run: node multiplies (op(a)·op(b)
// as one node reading transposed operands in place), read gives the nodes
// of its operands, and operand is what x, w and the gradient become first,
// once each, shared by the products that read them.
type gemmForm struct {
	node    func(c ctx, a, b node, ta, tb bool, out [ggmlcgo.MaxDims]int64) (node, error)
	read    func(*Tensor) (node, error)
	operand func(*Tensor) (*Tensor, error)
	bf16    bool // operand rounds to bf16 (the gradient too)
}

// blasGemm is OpenBLAS's f32 gemm (f32 operands: the reader widens).
func blasGemm(c ctx, a, b node, ta, tb bool, out [ggmlcgo.MaxDims]int64) (node, error) {
	return c.Gemm(a, b, ta, tb, out)
}

// bf16Gemm is autocast's: bf16 operands (bf16Operand's), f32 sums.
func bf16Gemm(c ctx, a, b node, ta, tb bool, out [ggmlcgo.MaxDims]int64) (node, error) {
	return c.GemmBF16(a, b, ta, tb, out)
}

func asItIs(t *Tensor) (*Tensor, error) { return t, nil }

// bf16Operand is t rounded to bf16, a tensor of its own (not on the tape:
// the gradient goes to t), so that a product and its gradient's product
// round it once, as PyTorch's autocast keeps one cast copy of a weight,
// and an input, for the backward; t itself where it is stored in bf16 and
// read in place (storedInput).
func (e *Engine) bf16Operand(t *Tensor) (*Tensor, error) {
	if t.dtype == ggmlcgo.BF16 && t.base == nil || packedBF16View(t) {
		return t, nil
	}
	r, err := e.kernelOp("to_bf16", t.shape, []*Tensor{t}, func(c ctx, in []node) (node, error) { return c.RoundBF16Kernel(in[0]) })
	if err != nil {
		return nil, err
	}
	r.dtype = ggmlcgo.BF16
	return r, nil
}

// linearGemm is Linear through gemm nodes: y = x·wᵀ (+ b, where b is
// not nil: added by the product's epilogue), dx = g·w, dw = gᵀ·x (summed
// over every row of a batched x), db = g summed over the rows, with no
// transposed copies; the operands are read by the form's reader and
// packed where they are strided.
func (e *Engine) linearGemm(x, w, b *Tensor, shape []int, f gemmForm) (*Tensor, error) {
	op := func(name string, out []int, a, b *Tensor, ta, tb bool) (*Tensor, error) {
		return e.kernelOpReading(name, out, []*Tensor{a, b}, f.read, func(c ctx, in []node) (node, error) {
			return f.node(c, in[0], in[1], ta, tb, ne4(out))
		})
	}
	var c chain
	xo := c.do(func() (*Tensor, error) { return f.operand(x) })
	wo := c.do(func() (*Tensor, error) { return f.operand(w) })
	inputs := []*Tensor{x, w}
	var y *Tensor
	if b == nil {
		y = c.do(func() (*Tensor, error) { return op("matmul", shape, xo, wo, false, true) })
	} else {
		inputs = append(inputs, b)
		y = c.do(func() (*Tensor, error) { return e.productWithBias(xo, wo, b, shape, ggmlcgo.BF16) })
	}
	if c.err != nil {
		return nil, c.err
	}
	// The gradients read the operands as the product did (under autocast
	// their bf16 copies): the tape keeps those, not x and w themselves,
	// and each only where the other's gradient needs it (a frozen weight
	// keeps no activation, as PyTorch saves them).
	needX, needW, xShape, wShape := x.requiresGrad, w.requiresGrad, x.shape, w.shape
	needB, bShape, nIn := b != nil && b.requiresGrad, []int(nil), len(inputs)
	if b != nil {
		bShape = b.shape
	}
	if !needW {
		xo = nil
	}
	weight := e.savedOperand(w, wo, f.operand)
	if !needX {
		weight = nil
	}
	wo = nil
	e.record(y, "matmul", inputs, func(g *Tensor) ([]*Tensor, error) {
		var gx, gw, gb *Tensor
		var c chain
		if needB {
			gb = c.do(func() (*Tensor, error) { return e.sumTo(g, bShape) })
		}
		if needX || needW {
			gop := c.do(func() (*Tensor, error) { return f.operand(g) })
			if needX {
				wo := c.do(weight)
				gx = c.do(func() (*Tensor, error) { return op("matmul_back", xShape, gop, wo, false, false) })
			}
			if needW {
				gw = c.do(func() (*Tensor, error) { return op("matmul_back", wShape, gop, xo, true, false) })
			}
		}
		return []*Tensor{gx, gw, gb}[:nIn], c.err // (not inputs: the closure would keep x)
	})
	if y.gradFn != nil {
		y.gradFn.roundsGrad = f.bf16
	}
	return y, nil
}

// savedOperand is how a product's gradient gets operand t as the forward
// read it, o (its bf16 copy under autocast): a resident weight's copy is
// made again by the backward, from the weight the tape checks unchanged,
// rather than kept in the pass pool until then (PyTorch's autocast keeps
// it: 14 MB a GPT layer at d=768); anything else keeps o.
func (e *Engine) savedOperand(t, o *Tensor, operand func(*Tensor) (*Tensor, error)) func() (*Tensor, error) {
	if o != t && t.base == nil && t.persistent() {
		return func() (*Tensor, error) { return operand(t) }
	}
	return func() (*Tensor, error) { return o, nil }
}

// LinearBias is x·wᵀ + b, a Linear layer with its bias, for x [.., k], w
// [n, k] and b [n]. Under autocast, where products run as the bf16 gemm
// and the library has the kernel, the bias is added by the product's
// epilogue (cuBLASLt's) to its f32 sums, and the result is written in
// bf16, as PyTorch's autocast writes a Linear layer's: one pass over half
// the bytes, where a product and an add are two in f32, with the values
// and gradients of LinearThen(x, w, b, Add) rounded so. Elsewhere it is
// LinearThen(x, w, b, Add).
func (e *Engine) LinearBias(x, w, b *Tensor) (*Tensor, error) {
	if !e.fusedBias(x, w, b) {
		return e.LinearThen(x, w, b, (*Engine).Add)
	}
	if x.Dim() == 3 { // all rows as one 2-d product, as Linear
		return e.overRows(x, w.shape[0], func(x2 *Tensor) (*Tensor, error) { return e.LinearBias(x2, w, b) })
	}
	return e.linearGemm(x, w, b, []int{x.shape[0], w.shape[0]}, gemmForm{bf16Gemm, e.storedInput, e.bf16Operand, true})
}

// fusedBias reports whether LinearBias adds b in the product's epilogue:
// under autocast, on the bf16 gemm, for a 2-d or 3-d f32 or bf16 x, a
// 2-d w and an f32 bias of its own memory that is one row of w's rows.
func (e *Engine) fusedBias(x, w, b *Tensor) bool {
	if e.autocast != ggmlcgo.BF16 || !e.gemmBF16() || !e.backend.HasKernel(ggmlcgo.KernelGemmBF16Bias) {
		return false
	}
	if x.Dim() < 2 || x.Dim() > 3 || w.Dim() != 2 || b.Dim() != 1 || b.base != nil || b.dtype != ggmlcgo.F32 || (x.dtype != ggmlcgo.F32 && x.dtype != ggmlcgo.BF16) || w.IsQuantized() {
		return false
	}
	k, n := w.shape[1], w.shape[0]
	rows := x.shape[0]
	if x.Dim() == 3 {
		rows *= x.shape[1]
	}
	return x.shape[x.Dim()-1] == k && b.shape[0] == n && gemmSizes(rows, n, k) &&
		x.storage().dtype != ggmlcgo.I32 && w.storage().dtype != ggmlcgo.I32
}

// LinearThen is then(x·wᵀ, b): a Linear layer's product and its bias
// (Add, BiasRelu), the product read by nothing but then (Transient).
func (e *Engine) LinearThen(x, w, b *Tensor, then func(e *Engine, y, b *Tensor) (*Tensor, error)) (*Tensor, error) {
	y, err := e.Linear(x, w)
	if err != nil {
		return nil, err
	}
	out, err := then(e, y, b)
	if err == nil {
		e.Transient(y)
	}
	return out, err
}

// Dot is the dot product of two 1-d tensors of one size (shape [1]). It
// stays f32 under autocast: torch.dot is not on autocast's list of ops
// (matmul of two vectors is).
func (e *Engine) Dot(a, b *Tensor) (*Tensor, error) {
	if a.Dim() != 1 || b.Dim() != 1 || a.shape[0] != b.shape[0] {
		return nil, shapeErrorf("dot: expected two 1-d tensors of one size, got shapes %s and %s", ShapeString(a.shape), ShapeString(b.shape))
	}
	var y *Tensor
	err := e.Autocast(ggmlcgo.F32, func() (err error) {
		y, err = e.Matmul(a, b)
		return err
	})
	return y, err
}

// Outer is the outer product of 1-d a [n] and b [m]: [n, m].
func (e *Engine) Outer(a, b *Tensor) (*Tensor, error) {
	if a.Dim() != 1 || b.Dim() != 1 {
		return nil, shapeErrorf("outer: expected two 1-d tensors, got shapes %s and %s", ShapeString(a.shape), ShapeString(b.shape))
	}
	var c chain
	col := c.do(func() (*Tensor, error) { return e.Reshape(a, a.shape[0], 1) })
	row := c.do(func() (*Tensor, error) { return e.Reshape(b, 1, b.shape[0]) })
	out := c.do(func() (*Tensor, error) { return e.Mul(col, row) })
	return out, c.err
}

// cuBLASAligned reports whether out_prod's leading dims (the sizes given)
// are multiples of 4 floats. cuBLAS runs TF32 tensor-core kernels only on
// 16-byte aligned operands; otherwise it falls back to a plain FMA kernel
// without split-K, and a small output over a long sum crawls on a few of
// the GPU's SMs (a GPT head's [65, 384] gradient over 16384 tokens: 1.9 ms
// on an H200). The transposed copies that mul_mat needs instead cost tens
// of microseconds.
func cuBLASAligned(dims ...int) bool {
	for _, d := range dims {
		if d%4 != 0 {
			return false
		}
	}
	return true
}

// forceOutProd makes tests take the GPU's out_prod gradients on the CPU.
var forceOutProd = false
