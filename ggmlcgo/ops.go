package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import (
	"fmt"
	"math"
)

// The op builders check what ggml would assert on, then add one node to c.
// Compute ops take f32 operands (plus i32 row indices); the storage types
// f16/bf16 are converted by Cpy first.

func (c *Context) checkOp(op string, ts ...Tensor) error {
	if c == nil || c.p == nil {
		return fmt.Errorf("%s: context used after free", op)
	}
	for _, t := range ts {
		if t.p == nil {
			return fmt.Errorf("%s: %w", op, errNilOperand)
		}
	}
	if c.Room() < 1 {
		return fmt.Errorf("%s: context has no room for another node", op)
	}
	return nil
}

func (c *Context) checkF32(op string, ts ...Tensor) error {
	if err := c.checkOp(op, ts...); err != nil {
		return err
	}
	for _, t := range ts {
		if t.Type() != F32 {
			return fmt.Errorf("%s: operand of type %v, expected f32", op, t.Type())
		}
	}
	return nil
}

func result(p *C.struct_ggml_tensor) (Tensor, error) { return Tensor{p: p}, nil }

// canRepeat is ggml_can_repeat: every dim of b divides the same dim of a.
func canRepeat(b Tensor, ne [MaxDims]int64) bool {
	nb := b.Ne()
	for i := range ne {
		if nb[i] == 0 || ne[i]%nb[i] != 0 {
			return false
		}
	}
	return true
}

func sameShape(a, b Tensor) bool { return a.Ne() == b.Ne() }

// One-operand ops that are not elementwise, or need checks of their own.
func (c *Context) unary(op string, a Tensor, f func(*C.struct_ggml_context, *C.struct_ggml_tensor) *C.struct_ggml_tensor) (Tensor, error) {
	if err := c.checkF32(op, a); err != nil {
		return Tensor{}, err
	}
	return result(f(c.p, a.p))
}

// Sum is the sum of all elements (one element).
func (c *Context) Sum(a Tensor) (Tensor, error) { return c.unary("sum", a, cSum) }

// SumRows sums along ne0 (the innermost dim), which becomes 1.
func (c *Context) SumRows(a Tensor) (Tensor, error) { return c.unary("sum_rows", a, cSumRows) }

// SoftMax is the softmax along ne0.
func (c *Context) SoftMax(a Tensor) (Tensor, error) { return c.unary("soft_max", a, cSoftMax) }

// Argmax is the i32 index of the largest element of each row of a matrix.
func (c *Context) Argmax(a Tensor) (Tensor, error) {
	if ne := a.Ne(); a.p != nil && (ne[2] != 1 || ne[3] != 1) {
		return Tensor{}, fmt.Errorf("argmax: ne %v is not a matrix", ne)
	}
	return c.unary("argmax", a, cArgmax)
}

// Arange is the f32 vector start, start+step, ... (stop excluded); ggml
// counts upwards only.
func (c *Context) Arange(start, stop, step float32) (Tensor, error) {
	if err := c.checkOp("arange"); err != nil {
		return Tensor{}, err
	}
	n := math.Ceil(float64(stop-start) / float64(step))
	if !(step > 0) || !(stop > start) || !(n >= 1) || n > 1<<30 {
		return Tensor{}, fmt.Errorf("arange: empty or bad range %g to %g by %g", start, stop, step)
	}
	return result(C.ggml_arange(c.p, C.float(start), C.float(stop), C.float(step)))
}

// Cont makes a contiguous copy (of a strided view).
func (c *Context) Cont(a Tensor) (Tensor, error) {
	if err := c.checkOp("cont", a); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_cont(c.p, a.p))
}

// View is a strided view of a's memory: ne elements (innermost first), nb
// the byte strides of dims 1..3 (dim 0 is a's element size apart), starting
// offset bytes in. Every element it reaches must lie inside a's data.
func (c *Context) View(a Tensor, ne [MaxDims]int64, nb [MaxDims - 1]int64, offset int64) (Tensor, error) {
	if err := c.checkOp("view", a); err != nil {
		return Tensor{}, err
	}
	if err := inside("view", a, ne, nb, offset); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_view_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]),
		C.size_t(nb[0]), C.size_t(nb[1]), C.size_t(nb[2]), C.size_t(offset)))
}

// Acc is a copy of a with b added into the view of it that View(a,
// b.Ne(), nb, offset) would be (ggml_acc): a and b contiguous f32, every
// element the view reaches inside a.
func (c *Context) Acc(a, b Tensor, nb [MaxDims - 1]int64, offset int64) (Tensor, error) {
	if err := c.checkF32("acc", a, b); err != nil {
		return Tensor{}, err
	}
	if !a.contiguous() || !b.contiguous() {
		return Tensor{}, fmt.Errorf("acc: needs contiguous operands, got ne %v and %v", a.Ne(), b.Ne())
	}
	if err := inside("acc", a, b.Ne(), nb, offset); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_acc(c.p, a.p, b.p, C.size_t(nb[0]), C.size_t(nb[1]), C.size_t(nb[2]), C.size_t(offset)))
}

// inside refuses a view of a (ne elements, nb the byte strides of dims
// 1..3, dim 0 packed, from offset bytes in) that reaches outside a's data.
func inside(op string, a Tensor, ne [MaxDims]int64, nb [MaxDims - 1]int64, offset int64) error {
	last := offset // the byte offset of the last element reached
	for i, n := range ne {
		if n < 1 || n > 1<<40 {
			return fmt.Errorf("%s: bad ne %v", op, ne)
		}
		if i > 0 {
			if nb[i-1] < 0 || nb[i-1] > 1<<50 {
				return fmt.Errorf("%s: bad strides %v", op, nb)
			}
			last += (n - 1) * nb[i-1]
		} else {
			last += (n - 1) * a.Type().Size()
		}
	}
	if offset < 0 || last < offset || last+a.Type().Size() > a.Nbytes() {
		return fmt.Errorf("%s: ne %v with strides %v from byte %d reaches past the %d bytes of ne %v", op, ne, nb, offset, a.Nbytes(), a.Ne())
	}
	return nil
}

// Transpose swaps ne0 and ne1 of a, as a contiguous copy.
func (c *Context) Transpose(a Tensor) (Tensor, error) {
	if err := c.checkOp("transpose", a); err != nil {
		return Tensor{}, err
	}
	if c.Room() < 2 {
		return Tensor{}, fmt.Errorf("transpose: context has no room for two nodes")
	}
	return result(C.ggml_cont(c.p, C.ggml_transpose(c.p, a.p)))
}

// Permute moves dim i of a to position axes[i], as a contiguous copy.
func (c *Context) Permute(a Tensor, axes [MaxDims]int) (Tensor, error) {
	if err := c.checkOp("permute", a); err != nil {
		return Tensor{}, err
	}
	seen := [MaxDims]bool{}
	for _, x := range axes {
		if x < 0 || x >= MaxDims || seen[x] {
			return Tensor{}, fmt.Errorf("permute: %v is not a permutation of 0..3", axes)
		}
		seen[x] = true
	}
	if c.Room() < 2 {
		return Tensor{}, fmt.Errorf("permute: context has no room for two nodes")
	}
	v := C.ggml_permute(c.p, a.p, C.int(axes[0]), C.int(axes[1]), C.int(axes[2]), C.int(axes[3]))
	return result(C.ggml_cont(c.p, v))
}

// Scale is a*s; ScaleBias is a*s + b.
func (c *Context) Scale(a Tensor, s float32) (Tensor, error) {
	if err := c.checkF32("scale", a); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_scale(c.p, a.p, C.float(s)))
}

func (c *Context) ScaleBias(a Tensor, s, b float32) (Tensor, error) {
	if err := c.checkF32("scale_bias", a); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_scale_bias(c.p, a.p, C.float(s), C.float(b)))
}

// Clamp limits a to [lo, hi].
func (c *Context) Clamp(a Tensor, lo, hi float32) (Tensor, error) {
	if err := c.checkF32("clamp", a); err != nil {
		return Tensor{}, err
	}
	if c.Room() < 2 {
		return Tensor{}, fmt.Errorf("clamp: context has no room for two nodes")
	}
	// ggml_clamp works in place on its operand: clamp a copy.
	return result(C.ggml_clamp(c.p, C.ggml_cont(c.p, a.p), C.float(lo), C.float(hi)))
}

// Fill is a tensor of a's shape holding v everywhere. It reads nothing of
// a's data, so it makes constants on the device without an upload.
func (c *Context) Fill(a Tensor, v float32) (Tensor, error) {
	if err := c.checkF32("fill", a); err != nil {
		return Tensor{}, err
	}
	if !a.contiguous() { // ggml asserts it
		return Tensor{}, fmt.Errorf("fill: operand of ne %v is not contiguous", a.Ne())
	}
	return result(C.ggml_fill(c.p, a.p, C.float(v)))
}

// Binary elementwise ops: b is broadcast (repeated) into a's shape.
func (c *Context) binary(op string, a, b Tensor, f func(*C.struct_ggml_context, *C.struct_ggml_tensor, *C.struct_ggml_tensor) *C.struct_ggml_tensor) (Tensor, error) {
	if err := c.checkF32(op, a, b); err != nil {
		return Tensor{}, err
	}
	if !canRepeat(b, a.Ne()) {
		return Tensor{}, fmt.Errorf("%s: cannot broadcast ne %v into %v", op, b.Ne(), a.Ne())
	}
	return result(f(c.p, a.p, b.p))
}

func (c *Context) Add(a, b Tensor) (Tensor, error) { return c.binary("add", a, b, cAdd) }
func (c *Context) Sub(a, b Tensor) (Tensor, error) { return c.binary("sub", a, b, cSub) }
func (c *Context) Mul(a, b Tensor) (Tensor, error) { return c.binary("mul", a, b, cMul) }
func (c *Context) Div(a, b Tensor) (Tensor, error) { return c.binary("div", a, b, cDiv) }

// MulInplace is Mul written into a's own memory: one kernel where Mul and
// a copy back would be two (a gradient scaled in place by clipping).
func (c *Context) MulInplace(a, b Tensor) (Tensor, error) {
	return c.binary("mul_inplace", a, b, cMulInplace)
}

// Repeat tiles a up to ne; every dim of a must divide ne's.
func (c *Context) Repeat(a Tensor, ne [MaxDims]int64) (Tensor, error) {
	if err := c.checkOp("repeat", a); err != nil {
		return Tensor{}, err
	}
	if !canRepeat(a, ne) {
		return Tensor{}, fmt.Errorf("repeat: cannot tile ne %v up to %v", a.Ne(), ne)
	}
	return result(C.ggml_repeat_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3])))
}

// RepeatBack sums a down to like's shape (the gradient of Repeat): a dim
// whose size differs is summed over.
func (c *Context) RepeatBack(a, like Tensor) (Tensor, error) {
	if err := c.checkF32("repeat_back", a); err != nil {
		return Tensor{}, err
	}
	if like.p == nil || !canRepeat(like, a.Ne()) {
		return Tensor{}, fmt.Errorf("repeat_back: cannot sum ne %v down to %v", a.Ne(), like.Ne())
	}
	return result(C.ggml_repeat_back(c.p, a.p, like.p))
}

// Reshape is a contiguous copy of a with ne (same element count).
func (c *Context) Reshape(a Tensor, ne [MaxDims]int64) (Tensor, error) {
	if err := c.checkOp("reshape", a); err != nil {
		return Tensor{}, err
	}
	if ne[0]*ne[1]*ne[2]*ne[3] != a.Nelements() {
		return Tensor{}, fmt.Errorf("reshape: ne %v does not hold the %d elements of %v", ne, a.Nelements(), a.Ne())
	}
	return result(C.ggml_cont_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3])))
}

// ReshapeView is a with the shape ne, sharing a's memory (ggml_reshape_4d):
// no copy. a must be contiguous.
func (c *Context) ReshapeView(a Tensor, ne [MaxDims]int64) (Tensor, error) {
	if err := c.checkOp("reshape", a); err != nil {
		return Tensor{}, err
	}
	if ne[0]*ne[1]*ne[2]*ne[3] != a.Nelements() || !a.contiguous() {
		return Tensor{}, fmt.Errorf("reshape: cannot view ne %v (contiguous: %v) as %v", a.Ne(), a.contiguous(), ne)
	}
	return result(C.ggml_reshape_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3])))
}

// MulMat is ggml_mul_mat: for a of ne (k, m) and b of ne (k, n) the result has
// ne (m, n), i.e. b times the transpose of a; batch dims of a broadcast over b.
func (c *Context) MulMat(a, b Tensor) (Tensor, error) {
	if err := c.checkOp("mul_mat", a, b); err != nil {
		return Tensor{}, err
	}
	na, nb := a.Ne(), b.Ne()
	if na[0] != nb[0] || nb[2]%na[2] != 0 || nb[3]%na[3] != 0 || b.Type() != F32 || a.Type() == I32 {
		return Tensor{}, fmt.Errorf("mul_mat: incompatible ne %v (%v) and %v (%v)", na, a.Type(), nb, b.Type())
	}
	// Rows may be strided (views), their elements not: ggml asserts it.
	if !a.contiguousRows() || !b.contiguousRows() || int64(a.p.nb[0]) > int64(a.p.nb[1]) {
		return Tensor{}, fmt.Errorf("mul_mat: operands of ne %v and %v must have packed rows", na, nb)
	}
	return result(C.ggml_mul_mat(c.p, a.p, b.p))
}

// OutProd is ggml_out_prod: for a ne (k, j) and b ne (n, j) the result,
// ne (k, n), is Σ_j a[:, j] ⊗ b[:, j] — a linear layer's weight gradient
// gᵀ·x from x ne (k, m) and g ne (n, m) with no transposed copy. With
// transB it reads b ne (j, n) through a transposed view (g·w from w and g).
// ggml-cuda runs it as one cuBLAS GEMM that takes the transpose as a flag.
func (c *Context) OutProd(a, b Tensor, transB bool) (Tensor, error) {
	if err := c.checkF32("out_prod", b); err != nil {
		return Tensor{}, err
	}
	if err := c.checkOp("out_prod", a); err != nil {
		return Tensor{}, err
	}
	if a.Type() != F32 && !a.Type().Quantized() { // a quantized a: a frozen weight's rows, dequantized
		return Tensor{}, fmt.Errorf("out_prod: operand of type %v, expected f32 or a quantized type", a.Type())
	}
	if c.Room() < 2 {
		return Tensor{}, fmt.Errorf("out_prod: context has no room for two nodes")
	}
	na, nb := a.Ne(), b.Ne()
	if transB {
		nb[0], nb[1] = nb[1], nb[0]
	}
	if na[1] != nb[1] || nb[2]%na[2] != 0 || nb[3]%na[3] != 0 || !a.contiguousRows() || !b.contiguousRows() {
		return Tensor{}, fmt.Errorf("out_prod: incompatible ne %v and %v (transposed: %v)", a.Ne(), b.Ne(), transB)
	}
	bp := b.p
	if transB && nb[1] == 1 {
		// b is one row (ne (1, j)): its transpose is the same elements as a
		// column, a contiguous view; a transposed view of it would not look
		// transposed to ggml-cuda, which would pass cuBLAS a bad ldb.
		bp = C.ggml_view_4d(c.p, b.p, C.int64_t(nb[0]), 1, C.int64_t(nb[2]), C.int64_t(nb[3]), C.size_t(4*nb[0]), b.p.nb[2], b.p.nb[3], 0)
	} else if transB {
		bp = C.ggml_transpose(c.p, b.p)
	}
	if a.Type() == F32 && !outProdFitsCuBLAS(a.p, bp) { // (ggml-cuda's out_prod is f32 only)
		return Tensor{}, fmt.Errorf("out_prod: ne %v and %v have strides cuBLAS refuses", a.Ne(), b.Ne())
	}
	return result(C.ggml_out_prod(c.p, a.p, bp))
}

// outProdFitsCuBLAS checks the leading dimensions ggml-cuda's out_prod
// passes cuBLAS (out-prod.cu): a bad one is a CUDA error, which aborts.
func outProdFitsCuBLAS(a, b *C.struct_ggml_tensor) bool {
	trans := b.nb[0] > b.nb[1] // ggml_is_transposed
	lda, ldb := int64(a.nb[1])/4, int64(b.nb[1])/4
	unit, need := int64(b.nb[0]), int64(b.ne[0]) // cuBLAS op T: ldb >= n
	if trans {
		ldb, unit, need = int64(b.nb[0])/4, int64(b.nb[1]), int64(a.ne[1]) // op N: ldb >= k
	}
	return unit == 4 && lda >= max(1, int64(a.ne[0])) && ldb >= max(1, need)
}

// contiguousRows reports whether t's elements are contiguous along ne0.
func (t Tensor) contiguousRows() bool { return int64(t.p.nb[0]) == t.Type().TypeBytes() }

// Cpy writes a (converted to dst's type) into dst's memory; the result is a
// view of dst that later nodes can depend on.
func (c *Context) Cpy(a, dst Tensor) (Tensor, error) {
	if err := c.checkOp("cpy", a, dst); err != nil {
		return Tensor{}, err
	}
	if a.Nelements() != dst.Nelements() || a.Type() == I32 || dst.Type() == I32 {
		return Tensor{}, fmt.Errorf("cpy: cannot copy ne %v (%v) into %v (%v)", a.Ne(), a.Type(), dst.Ne(), dst.Type())
	}
	return result(C.ggml_cpy(c.p, a.p, dst.p))
}

// GetRows picks rows of a (ne (k, n)) by the i32 indices idx (ne (r)); the
// result has ne (k, r). Indices are not range-checked here (their values
// live on the device): callers check them where they know them.
func (c *Context) GetRows(a, idx Tensor) (Tensor, error) {
	if err := c.checkOp("get_rows", a, idx); err != nil {
		return Tensor{}, err
	}
	na, ni := a.Ne(), idx.Ne()
	if idx.Type() != I32 || (a.Type() != F32 && !a.Type().Quantized()) || na[2] != ni[1] || ni[3] != 1 || na[3] != 1 {
		return Tensor{}, fmt.Errorf("get_rows: cannot index ne %v (%v) with ne %v (%v)", na, a.Type(), ni, idx.Type())
	}
	return result(C.ggml_get_rows(c.p, a.p, idx.p))
}

// GetRowsBack scatters grad (ne (k, r)) back into a tensor shaped like like,
// adding the rows that idx picked (the gradient of GetRows).
func (c *Context) GetRowsBack(grad, idx, like Tensor) (Tensor, error) {
	if err := c.checkOp("get_rows_back", grad, idx, like); err != nil {
		return Tensor{}, err
	}
	if idx.Type() != I32 || grad.Ne()[0] != like.Ne()[0] || grad.Ne()[1] != idx.Ne()[0] || like.Ne()[2] != 1 || like.Ne()[3] != 1 {
		return Tensor{}, fmt.Errorf("get_rows_back: incompatible ne %v, %v and %v", grad.Ne(), idx.Ne(), like.Ne())
	}
	return result(C.ggml_get_rows_back(c.p, grad.p, idx.p, like.p))
}

// SoftMaxBack is the gradient of SoftMax, given its output y.
func (c *Context) SoftMaxBack(grad, y Tensor) (Tensor, error) { return c.SoftMaxExtBack(grad, y, 1) }

// SoftMaxExt is the softmax along ne0 of a·scale + mask: one node. mask (may
// be nil) is f32 ne (ne0, ≥ ne1, d2, d3) with d2, d3 dividing a's, broadcast
// over a's outer dims. A non-contiguous a is copied first.
func (c *Context) SoftMaxExt(a, mask Tensor, scale float32) (Tensor, error) {
	if err := c.checkF32("soft_max_ext", a); err != nil {
		return Tensor{}, err
	}
	var mp *C.struct_ggml_tensor
	if mask.p != nil {
		na, nm := a.Ne(), mask.Ne()
		if mask.Type() != F32 || !mask.contiguous() || nm[0] != na[0] || nm[1] < na[1] || na[2]%nm[2] != 0 || na[3]%nm[3] != 0 {
			return Tensor{}, fmt.Errorf("soft_max_ext: mask ne %v (%v) does not fit ne %v", nm, mask.Type(), na)
		}
		mp = mask.p
	}
	if !a.contiguous() {
		if c.Room() < 2 {
			return Tensor{}, fmt.Errorf("soft_max_ext: context has no room for two nodes")
		}
		var err error
		if a, err = c.Cont(a); err != nil {
			return Tensor{}, err
		}
	}
	return result(C.ggml_soft_max_ext(c.p, a.p, mp, C.float(scale), 0))
}

// SoftMaxExtBack is the gradient of SoftMaxExt with respect to a, given its
// output y: scale·y·(grad - Σ grad·y).
func (c *Context) SoftMaxExtBack(grad, y Tensor, scale float32) (Tensor, error) {
	if err := c.checkF32("soft_max_back", grad, y); err != nil {
		return Tensor{}, err
	}
	if !sameShape(grad, y) {
		return Tensor{}, fmt.Errorf("soft_max_back: ne %v and %v differ", grad.Ne(), y.Ne())
	}
	return result(C.ggml_soft_max_ext_back(c.p, grad.p, y.p, C.float(scale), 0))
}

// SiluBack is the gradient of Silu at x.
func (c *Context) SiluBack(grad, x Tensor) (Tensor, error) {
	if err := c.checkF32("silu_back", grad, x); err != nil {
		return Tensor{}, err
	}
	if !sameShape(grad, x) {
		return Tensor{}, fmt.Errorf("silu_back: ne %v and %v differ", grad.Ne(), x.Ne())
	}
	return result(C.ggml_silu_back(c.p, grad.p, x.p))
}

// CrossEntropyLoss is the mean over rows of -sum(labels * log_softmax(logits))
// along ne0 (one element).
func (c *Context) CrossEntropyLoss(logits, labels Tensor) (Tensor, error) {
	if err := c.checkF32("cross_entropy_loss", logits, labels); err != nil {
		return Tensor{}, err
	}
	if !sameShape(logits, labels) {
		return Tensor{}, fmt.Errorf("cross_entropy_loss: logits ne %v and labels ne %v differ", logits.Ne(), labels.Ne())
	}
	return result(C.ggml_cross_entropy_loss(c.p, logits.p, labels.p))
}

// CrossEntropyLossBack is the gradient of CrossEntropyLoss wrt the logits,
// given the (one-element) gradient of the loss.
func (c *Context) CrossEntropyLossBack(logits, labels, grad Tensor) (Tensor, error) {
	if err := c.checkF32("cross_entropy_loss_back", logits, labels, grad); err != nil {
		return Tensor{}, err
	}
	if !sameShape(logits, labels) || grad.Nelements() != 1 {
		return Tensor{}, fmt.Errorf("cross_entropy_loss_back: incompatible ne %v, %v and %v", logits.Ne(), labels.Ne(), grad.Ne())
	}
	// ggml's header names the operands (logits, labels, grad); its code
	// asserts the first is the scalar gradient, which is the order it uses.
	return result(C.ggml_cross_entropy_loss_back(c.p, grad.p, logits.p, labels.p))
}

// Concat joins a and b along dim (ne order).
func (c *Context) Concat(a, b Tensor, dim int) (Tensor, error) {
	if err := c.checkF32("concat", a, b); err != nil {
		return Tensor{}, err
	}
	na, nb := a.Ne(), b.Ne()
	if dim < 0 || dim >= MaxDims {
		return Tensor{}, fmt.Errorf("concat: dim %d out of range", dim)
	}
	for i := range na {
		if i != dim && na[i] != nb[i] {
			return Tensor{}, fmt.Errorf("concat: ne %v and %v differ outside dim %d", na, nb, dim)
		}
	}
	return result(C.ggml_concat(c.p, a.p, b.p, C.int(dim)))
}

// Narrow is the contiguous copy of a's elements start..start+length-1
// along dim (ne order).
func (c *Context) Narrow(a Tensor, dim int, start, length int64) (Tensor, error) {
	if err := c.checkOp("narrow", a); err != nil {
		return Tensor{}, err
	}
	ne := a.Ne()
	if dim < 0 || dim >= MaxDims || start < 0 || length < 1 || start+length > ne[dim] {
		return Tensor{}, fmt.Errorf("narrow: range %d..%d of dim %d is outside ne %v", start, start+length, dim, ne)
	}
	if c.Room() < 2 {
		return Tensor{}, fmt.Errorf("narrow: context has no room for two nodes")
	}
	ne[dim] = length
	nb := a.p.nb
	v := C.ggml_view_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]),
		nb[1], nb[2], nb[3], C.size_t(start)*nb[dim])
	return result(C.ggml_cont(c.p, v))
}

// Pad adds pad[d][0] zeros before and pad[d][1] after dim d (ne order).
func (c *Context) Pad(a Tensor, pad [MaxDims][2]int) (Tensor, error) {
	if err := c.checkF32("pad", a); err != nil {
		return Tensor{}, err
	}
	for _, p := range pad {
		if p[0] < 0 || p[1] < 0 || p[0] > 1<<30 || p[1] > 1<<30 {
			return Tensor{}, fmt.Errorf("pad: bad padding %v", pad)
		}
	}
	return result(C.ggml_pad_ext(c.p, a.p, C.int(pad[0][0]), C.int(pad[0][1]), C.int(pad[1][0]), C.int(pad[1][1]),
		C.int(pad[2][0]), C.int(pad[2][1]), C.int(pad[3][0]), C.int(pad[3][1])))
}

// SetRowsInplace writes the f32 matrix b (contiguous, ne (k, r)) into rows
// row..row+r-1 of the contiguous f32 matrix a (ne (k, n)); the result is a
// view of all of a, after the write, that later nodes depend on. ggml keeps
// the byte offset in an int32 below 1 GiB.
func (c *Context) SetRowsInplace(a, b Tensor, row int64) (Tensor, error) {
	if err := c.checkF32("set_2d_inplace", a, b); err != nil {
		return Tensor{}, err
	}
	na, nb := a.Ne(), b.Ne()
	contiguous := func(t Tensor, ne [MaxDims]int64) bool {
		return int64(t.p.nb[0]) == 4 && int64(t.p.nb[1]) == 4*ne[0] && int64(t.p.nb[2]) == 4*ne[0]*ne[1] && int64(t.p.nb[3]) == 4*ne[0]*ne[1]*ne[2]
	}
	offset := row * 4 * na[0]
	if na[0] != nb[0] || na[2] != 1 || na[3] != 1 || nb[2] != 1 || nb[3] != 1 || row < 0 || row+nb[1] > na[1] ||
		!contiguous(a, na) || !contiguous(b, nb) || offset >= 1<<30 || 4*na[0] > math.MaxInt32 {
		return Tensor{}, fmt.Errorf("set_2d_inplace: cannot write ne %v into ne %v from row %d", nb, na, row)
	}
	return result(C.ggml_set_2d_inplace(c.p, a.p, b.p, a.p.nb[1], C.size_t(offset)))
}

// SetRows writes row i of the f32 matrix b (ne (k, n)) into row idx[i] of
// a (ne (k, r)), for idx an i32 vector of n; the result is a view of all of
// a after the writes. The indices must be in [0, r) and all different:
// ggml checks neither (the caller has, on the host).
func (c *Context) SetRows(a, b, idx Tensor) (Tensor, error) {
	if err := c.checkF32("set_rows", a, b); err != nil {
		return Tensor{}, err
	}
	if err := c.checkOp("set_rows", idx); err != nil {
		return Tensor{}, err
	}
	na, nb, ni := a.Ne(), b.Ne(), idx.Ne()
	if idx.Type() != I32 || na[0] != nb[0] || nb[1] != ni[0] || na[2] != 1 || na[3] != 1 || nb[2] != 1 || nb[3] != 1 ||
		ni[1] != 1 || ni[2] != 1 || ni[3] != 1 || !a.contiguousRows() || !b.contiguousRows() {
		return Tensor{}, fmt.Errorf("set_rows: cannot write ne %v into ne %v by %v indices of ne %v", nb, na, idx.Type(), ni)
	}
	return result(C.ggml_set_rows(c.p, a.p, b.p, idx.p))
}

// RMSNorm is each row of a divided by sqrt(mean(row²) + eps): ggml's
// rms_norm, one pass. a must be contiguous, eps >= 0.
func (c *Context) RMSNorm(a Tensor, eps float32) (Tensor, error) {
	if err := c.checkF32("rms_norm", a); err != nil {
		return Tensor{}, err
	}
	if !a.contiguous() || !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return Tensor{}, fmt.Errorf("rms_norm: needs a contiguous operand and a finite eps >= 0 (ne %v, eps %g)", a.Ne(), eps)
	}
	return result(C.ggml_rms_norm(c.p, a.p, C.float(eps)))
}

// RMSNormBack is the gradient of RMSNorm(x, eps) for the gradient g of its
// result: (g - y·mean(g·y)) / sqrt(mean(x²) + eps) row by row, y the
// normalised x. Both contiguous, of one shape. (ggml's header names the
// operands the other way round; its CPU and CUDA kernels read the
// gradient first.)
func (c *Context) RMSNormBack(g, x Tensor, eps float32) (Tensor, error) {
	if err := c.checkF32("rms_norm_back", g, x); err != nil {
		return Tensor{}, err
	}
	if g.Ne() != x.Ne() || !g.contiguous() || !x.contiguous() || !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return Tensor{}, fmt.Errorf("rms_norm_back: needs contiguous operands of one shape and a finite eps >= 0 (ne %v and %v, eps %g)", g.Ne(), x.Ne(), eps)
	}
	return result(C.ggml_rms_norm_back(c.p, g.p, x.p, C.float(eps)))
}

// Cast converts a (f32, f16 or bf16) to type t in a new tensor.
func (c *Context) Cast(a Tensor, t Type) (Tensor, error) {
	if err := c.checkOp("cast", a); err != nil {
		return Tensor{}, err
	}
	if a.Type() == I32 || t == I32 || !t.Valid() {
		return Tensor{}, fmt.Errorf("cast: cannot convert %v to %v", a.Type(), t)
	}
	return result(C.ggml_cast(c.p, a.p, C.enum_ggml_type(t)))
}

// OptStepAdamW is ggml's fused AdamW step: it updates a, m and v in place
// (the result is a view of a) from grad and params = [alpha, beta1, beta2,
// eps, wd, beta1h, beta2h], where beta1h = 1/(1-beta1^t), and likewise for
// beta2. All f32, same shapes. a must be a leaf: it is flagged as a param.
func (c *Context) OptStepAdamW(a, grad, m, v, params Tensor) (Tensor, error) {
	if err := c.checkF32("opt_step_adamw", a, grad, m, v, params); err != nil {
		return Tensor{}, err
	}
	if !sameShape(a, grad) || !sameShape(a, m) || !sameShape(a, v) || params.Nelements() != 7 {
		return Tensor{}, fmt.Errorf("opt_step_adamw: ne %v, %v, %v, %v and %d params", a.Ne(), grad.Ne(), m.Ne(), v.Ne(), params.Nelements())
	}
	if a.p.op != C.GGML_OP_NONE || a.p.nb[0] != 4 {
		return Tensor{}, fmt.Errorf("opt_step_adamw: the parameter must be a contiguous leaf tensor")
	}
	C.ggml_set_param(a.p)
	return result(C.ggml_opt_step_adamw(c.p, a.p, grad.p, m.p, v.p, params.p))
}
