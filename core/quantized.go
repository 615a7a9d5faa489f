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

// Quantized is a weight of shape (outermost first) stored in the quantized
// type typ, its bytes raw (whole blocks along the innermost dim), placed in
// the persistent pool.
func (e *Engine) Quantized(raw []byte, typ ggmlcgo.Type, shape []int) (*Tensor, error) {
	if !typ.Quantized() {
		return nil, argErrorf("quantized: %v is not a quantized type gglua reads", typ)
	}
	h, err := e.res.Upload(residency.Request{Shape: shape, Type: typ, Scope: residency.Persistent}, raw)
	if err != nil {
		return nil, fmt.Errorf("quantized: %w", err)
	}
	return &Tensor{shape: append([]int(nil), shape...), dtype: typ, engine: e, handle: h}, nil
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

// weightAsStored is read, but w, a quantized weight, as it is stored.
func weightAsStored(w *Tensor, read func(*Tensor) (node, error)) func(*Tensor) (node, error) {
	return func(t *Tensor) (node, error) {
		if t == w {
			return w.engine.storedInput(t)
		}
		return read(t)
	}
}
