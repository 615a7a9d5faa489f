package ggmlcgo

// #cgo CPPFLAGS: -I${SRCDIR}
// #include "gglua_ggml.h"
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// MaxDims is the most dimensions a ggml tensor has.
const MaxDims = C.GGLUA_MAX_DIMS

// MaxNameLen is the longest tensor name ggml stores (without its final NUL).
const MaxNameLen = C.GGLUA_MAX_NAME - 1

// MaxTensorBytes bounds a single tensor, so that a shape like 1e9 x 1e9 is an
// error before it becomes an overflowing size or an allocation attempt.
const MaxTensorBytes = int64(1) << 42 // 4 TiB

// Type is a ggml element type: the unquantized types gglua computes with,
// and the quantized ones of llama.cpp's model files, which gglua reads,
// stores and multiplies by (blocks of BlockSize elements in TypeBytes
// bytes each) but does not compute into.
type Type int32

const (
	F32  Type = C.GGML_TYPE_F32
	F16  Type = C.GGML_TYPE_F16
	BF16 Type = C.GGML_TYPE_BF16
	I32  Type = C.GGML_TYPE_I32

	Q4_0 Type = C.GGML_TYPE_Q4_0
	Q4_1 Type = C.GGML_TYPE_Q4_1
	Q5_0 Type = C.GGML_TYPE_Q5_0
	Q5_1 Type = C.GGML_TYPE_Q5_1
	Q8_0 Type = C.GGML_TYPE_Q8_0
	Q4_K Type = C.GGML_TYPE_Q4_K
	Q5_K Type = C.GGML_TYPE_Q5_K
	Q6_K Type = C.GGML_TYPE_Q6_K
)

// typeCount bounds ggml's type numbers (GGML_TYPE_COUNT, checked by the ABI test).
const typeCount = C.GGML_TYPE_COUNT

var typeNames = map[Type]string{F32: "f32", F16: "f16", BF16: "bf16", I32: "i32"}

// quantNames are the quantized types gglua reads, by llama.cpp's names.
var quantNames = map[Type]string{Q4_0: "q4_0", Q4_1: "q4_1", Q5_0: "q5_0", Q5_1: "q5_1", Q8_0: "q8_0", Q4_K: "q4_K", Q5_K: "q5_K", Q6_K: "q6_K"}

// ParseType turns "f32", "f16", "bf16" or "i32" into a Type.
func ParseType(name string) (Type, error) {
	for t, n := range typeNames {
		if strings.EqualFold(name, n) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (expected f32, f16, bf16 or i32)", name)
}

// Valid reports whether t is one of the types gglua computes with.
func (t Type) Valid() bool {
	_, ok := typeNames[t]
	return ok
}

// Quantized reports whether t is one of the quantized types gglua reads.
func (t Type) Quantized() bool {
	_, ok := quantNames[t]
	return ok
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	if n, ok := quantNames[t]; ok {
		return n
	}
	return fmt.Sprintf("ggml_type(%d)", int32(t))
}

// BlockSize is how many elements of t one block holds (1 unquantized).
func (t Type) BlockSize() int64 {
	if !t.Quantized() {
		return 1
	}
	return int64(C.ggml_blck_size(C.enum_ggml_type(t)))
}

// TypeBytes is the bytes one block of t takes (an element's, unquantized).
func (t Type) TypeBytes() int64 {
	if !t.Quantized() {
		return t.Size()
	}
	return int64(C.ggml_type_size(C.enum_ggml_type(t)))
}

// Size is the number of bytes one element of t takes.
func (t Type) Size() int64 {
	switch t {
	case F16, BF16:
		return 2
	default:
		return 4
	}
}

// TensorBytes validates an ne array (innermost first) for a tensor of
// type t, unquantized or quantized, and returns its size in bytes: as
// CheckShape, and for a quantized type rows (ne0) of whole blocks.
func TensorBytes(t Type, ne []int64) (int64, error) {
	if !t.Quantized() {
		n, err := CheckShape(t, ne)
		return n * t.Size(), err
	}
	if len(ne) == 0 || len(ne) > MaxDims {
		return 0, fmt.Errorf("a tensor has 1 to %d dimensions, got %d", MaxDims, len(ne))
	}
	if ne[0] < 1 || ne[0]%t.BlockSize() != 0 {
		return 0, fmt.Errorf("a %v tensor's rows hold whole blocks of %d, got ne %v", t, t.BlockSize(), ne)
	}
	n := ne[0] / t.BlockSize() * t.TypeBytes() // one row's bytes
	for i, d := range ne[1:] {
		if d < 1 {
			return 0, fmt.Errorf("dimension %d has size %d; sizes must be at least 1", i+1, d)
		}
		if d > MaxTensorBytes/n {
			return 0, fmt.Errorf("shape %v of %v is too large (more than %d bytes)", ne, t, MaxTensorBytes)
		}
		n *= d
	}
	if n > MaxTensorBytes {
		return 0, fmt.Errorf("shape %v of %v is too large (more than %d bytes)", ne, t, MaxTensorBytes)
	}
	return n, nil
}

// Quantize is data, rows of ne0 values, in the quantized type t (ggml's
// quantizer, as llama.cpp's llama_model_quantize runs it without an
// importance matrix): the bytes of a tensor of ne (ne0, len(data)/ne0).
func Quantize(t Type, data []float32, ne0 int64) ([]byte, error) {
	if !t.Quantized() {
		return nil, fmt.Errorf("quantize: %v is not a quantized type gglua writes", t)
	}
	if ne0 < 1 || int64(len(data))%ne0 != 0 {
		return nil, fmt.Errorf("quantize: %d values are not rows of %d", len(data), ne0)
	}
	rows := int64(len(data)) / ne0
	n, err := TensorBytes(t, []int64{ne0, rows})
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	out := make([]byte, n)
	if n > 0 {
		C.ggml_quantize_chunk(C.enum_ggml_type(t), (*C.float)(&data[0]), unsafe.Pointer(&out[0]), 0, C.int64_t(rows), C.int64_t(ne0), nil)
	}
	return out, nil
}

// CheckShape validates an ne array (innermost first) for a tensor of type t
// and returns its element count. It refuses what ggml would assert on or what
// no device could hold: no dims, more than MaxDims, a dimension below one, and
// sizes past MaxTensorBytes (checked without overflowing).
func CheckShape(t Type, ne []int64) (int64, error) {
	if !t.Valid() {
		return 0, fmt.Errorf("unsupported dtype %v", t)
	}
	if len(ne) == 0 || len(ne) > MaxDims {
		return 0, fmt.Errorf("a tensor has 1 to %d dimensions, got %d", MaxDims, len(ne))
	}
	n := int64(1)
	limit := MaxTensorBytes / t.Size()
	for i, d := range ne {
		if d < 1 {
			return 0, fmt.Errorf("dimension %d has size %d; sizes must be at least 1", i, d)
		}
		if d > limit || n > limit/d {
			return 0, fmt.Errorf("shape %v of %v is too large (more than %d bytes)", ne, t, MaxTensorBytes)
		}
		n *= d
	}
	return n, nil
}
