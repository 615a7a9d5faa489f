package core

import (
	"github.com/gglua/gglua/ggmlcgo"
)

// Autocast is PyTorch's torch.autocast(dtype=torch.bfloat16) for gglua's
// products: inside it, matmul, bmm, linear and conv (and attention's
// products, which are matmuls) multiply bf16 copies of their f32 operands,
// summing in f32, and so do their gradients' products. Weights, their
// gradients and the optimizer's state stay f32 (the "master weights"): only
// the operands of each product are rounded, once per use, as PyTorch's
// autocast does. Everything else (sums, norms, softmax, losses) stays f32.
//
// On a device with gglua's kernels, 2-d products run as its bf16 gemm
// (ops_matmul.go), and a Linear layer with its bias writes its result in
// bf16, as PyTorch's does (LinearBias): half the bytes to write, and to
// keep where a gradient reads it. One difference from PyTorch, documented
// in docs/PYTORCH.md: other products' results are f32 tensors where
// PyTorch's are bf16, the f32 sums of the bf16 operands' products (a
// batched product ggml gives cuBLAS comes back as cuBLAS writes it, bf16,
// widened by ggml), as are every product's on the CPU: no more rounded
// than PyTorch's; ops read a bf16 result widened to f32 (compute in f32
// here). Gradients compute in the precision their forward recorded
// (Backward turns autocast off), and dot is not autocast (as torch.dot;
// matmul of two vectors is).
//
// f16 is refused: ggml-cuda multiplies f16 operands with f16 sums unless a
// product asks for f32 precision, and then it converts them back to f32,
// so neither is what torch.autocast(dtype=torch.float16) does.

// Autocast runs fn with products computed from operands rounded to dtype:
// bf16, or f32 to turn autocast off inside fn (PyTorch's enabled=False).
// Nested calls restore the outer setting when they return.
func (e *Engine) Autocast(dtype ggmlcgo.Type, fn func() error) error {
	switch dtype {
	case ggmlcgo.BF16, ggmlcgo.F32:
	case ggmlcgo.F16:
		return argErrorf("autocast: dtype f16 is not supported (bf16, or f32 to turn autocast off): ggml-cuda sums f16 products in f16")
	default:
		return argErrorf("autocast: dtype %s is not supported (bf16, or f32 to turn autocast off)", dtype)
	}
	defer e.setAutocast(dtype)()
	return fn()
}

// setAutocast makes products round to dtype until the returned function
// restores the setting it replaced (Autocast, and Backward, which turns it
// off).
func (e *Engine) setAutocast(dtype ggmlcgo.Type) (restore func()) {
	outer := e.autocast
	e.autocast = dtype
	return func() { e.autocast = outer }
}

// AutocastType is the type products round their operands to: bf16 inside
// Autocast, f32 outside it.
func (e *Engine) AutocastType() ggmlcgo.Type { return e.autocast }

// TakeAutocast makes e's products round as old's do (device.use inside an
// autocast block: the new engine carries on under it; the block's end
// restores old's setting on old, which is closed by then).
func (e *Engine) TakeAutocast(old *Engine) { e.autocast = old.autocast }

// productType is the type a product's first ggml operand (src0: the
// weight, or a transposed operand in a gradient) is rounded to, and the
// reader of the product's inputs: f32 and input outside autocast; inside
// it, the stored type is read as it is (a bf16 weight is not widened to be
// rounded again) and productOperands converts.
func (e *Engine) productType() (ggmlcgo.Type, func(*Tensor) (node, error)) {
	if e.autocast == ggmlcgo.F32 {
		return ggmlcgo.F32, e.input
	}
	return e.autocast, e.storedInput
}

// productOperands are mul_mat's operands for a product computed in prec:
// src0 rounded to prec, src1 in f32. ggml converts src1 to src0's type
// itself, inside the product (on CUDA into a scratch buffer, and only 2-d
// src1 may arrive in bf16), so it is left f32.
func productOperands(c ctx, src0, src1 node, prec ggmlcgo.Type) (node, node, error) {
	a, err := src0, error(nil)
	if !src0.Type().Quantized() { // a weight's blocks are multiplied as they are
		a, err = asType(c, src0, prec)
	}
	if err != nil {
		return node{}, node{}, err
	}
	b, err := asType(c, src1, ggmlcgo.F32)
	return a, b, err
}

// asType is n in type t: n itself when it is, else a converted copy.
func asType(c ctx, n node, t ggmlcgo.Type) (node, error) {
	if n.Type() == t {
		return n, nil
	}
	return c.Cast(n, t)
}
