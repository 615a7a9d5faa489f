package core

import (
	"fmt"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Quantized weights: the blocks of llama.cpp's model files (q4_0 ... q6_K),
// kept as they were read in the persistent pool and never trainable (a
// fine-tune trains adapters beside them). Linear multiplies by them as
// they are (ggml's quantized products), Embedding picks their rows, and
// every other op reads them dequantized to f32, as it reads half-precision
// storage (input).

// Weight is a tensor of shape (outermost first) as a model file stores it:
// raw, the bytes of typ (f32, f16, bf16, or a quantized type gglua reads:
// whole blocks along the innermost dim), placed in the persistent pool as
// they are. Ops read f16 and bf16 widened to f32, as every half-precision
// tensor; a quantized one is never trainable.
func (e *Engine) Weight(raw []byte, typ ggmlcgo.Type, shape []int) (*Tensor, error) {
	if !typ.Quantized() && typ != ggmlcgo.F32 && typ != ggmlcgo.F16 && typ != ggmlcgo.BF16 {
		return nil, argErrorf("weight: %v is not a type gglua reads (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K)", typ)
	}
	h, err := e.res.Upload(residency.Request{Shape: shape, Type: typ, Scope: residency.Persistent}, raw)
	if err != nil {
		return nil, fmt.Errorf("weight: %w", err)
	}
	return &Tensor{shape: append([]int(nil), shape...), dtype: typ, engine: e, handle: h}, nil
}

// Stored is t's bytes as its pool holds them (a quantized weight's blocks
// as they were read) and their type, or, for a tensor not placed, its f32
// values: what a model file writes back.
func (t *Tensor) Stored() ([]byte, ggmlcgo.Type, error) {
	if t.handle != nil && !t.pending && t.base == nil {
		raw := make([]byte, t.handle.Nbytes())
		if err := t.handle.Read(raw); err != nil {
			return nil, 0, err
		}
		return raw, t.dtype, nil
	}
	v, err := t.Float32s()
	if err != nil {
		return nil, 0, err
	}
	raw, err := encode(ggmlcgo.F32, v)
	return raw, ggmlcgo.F32, err
}

// IsQuantized reports whether t (or its base) is stored in a quantized type.
func (t *Tensor) IsQuantized() bool { return t.storage().dtype.Quantized() }

// errQuantizedGrad refuses a gradient for a quantized weight.
func errQuantizedGrad(t *Tensor) error {
	return argErrorf("requires_grad: a %v weight (shape %s) is never trainable: train adapters beside it (LoRA), or a dequantized f32 copy", t.storage().dtype, ShapeString(t.shape))
}

// dequantized is t's values in f32: one node (ggml's copy from the blocks).
func (e *Engine) dequantized(t *Tensor) (*Tensor, error) {
	return e.newOp("dequantize", t.shape, []*Tensor{t}, func(c ctx, in []node) (node, error) { return in[0], nil })
}

// forceDequantizeKernel makes the CPU read quantized tensors as a device
// does, through gglua's dequantize node (tests).
var forceDequantizeKernel bool

// toF32 is n, a quantized tensor's node, in f32: ggml's copy on the CPU;
// on a device, gglua's dequantize node, which takes the K-quants that
// ggml-cuda's copy does not.
func (e *Engine) toF32(c ctx, n node) (node, error) {
	if (forceDequantizeKernel || !e.backend.IsCPU()) && e.backend.HasKernel(ggmlcgo.KernelDequantize) {
		return c.DequantizeKernel(n)
	}
	return c.Cast(n, ggmlcgo.F32)
}

// readsQuantized reports whether ggml's op on this backend reads a tensor
// of type typ as it is stored: every op on the CPU; on a device mul_mat,
// and get_rows of the simple block types (ggml-cuda's get_rows lacks the
// K-quants and its out_prod takes f32 only).
func (e *Engine) readsQuantized(op string, typ ggmlcgo.Type) bool {
	if e.backend.IsCPU() && !forceDequantizeKernel {
		return true
	}
	switch op {
	case "mul_mat":
		return true
	case "get_rows":
		return typ == ggmlcgo.Q4_0 || typ == ggmlcgo.Q4_1 || typ == ggmlcgo.Q5_0 || typ == ggmlcgo.Q5_1 || typ == ggmlcgo.Q8_0
	}
	return false
}

// weightAsStored is read, but w, a quantized weight, as it is stored.
func weightAsStored(w *Tensor, read func(*Tensor) (node, error)) func(*Tensor) (node, error) {
	return func(t *Tensor) (node, error) {
		if t == w {
			return w.engine.storedInput(t)
		}
		return read(t)
	}
}
