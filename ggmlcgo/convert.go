package ggmlcgo

// #include "gglua_ops.h"
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Encode is v, rows of ne0 values, as the little-endian bytes of a
// tensor of type t: f32, f16, bf16, or a quantized type (Quantize).
func Encode(t Type, v []float32, ne0 int64) ([]byte, error) {
	switch t {
	case F32:
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		return raw, nil
	case F16, BF16:
		half := make([]uint16, len(v))
		F32ToHalf(t, v, half)
		raw := make([]byte, 2*len(v))
		for i, x := range half {
			binary.LittleEndian.PutUint16(raw[2*i:], x)
		}
		return raw, nil
	}
	if !t.Quantized() {
		return nil, fmt.Errorf("encode: %v is not a type of floating-point values", t)
	}
	return Quantize(t, v, ne0)
}

// F32ToHalf converts src to f16 or bf16 (typ) bits, written to dst, which must
// be len(src) long. It uses ggml's own (round-to-nearest) conversions so that
// host and device agree bit for bit.
func F32ToHalf(typ Type, src []float32, dst []uint16) {
	if len(src) == 0 || len(dst) < len(src) {
		return
	}
	n := C.int64_t(len(src))
	if typ == BF16 {
		C.ggml_fp32_to_bf16_row((*C.float)(&src[0]), (*C.ggml_bf16_t)(unsafe.Pointer(&dst[0])), n)
		return
	}
	C.ggml_fp32_to_fp16_row((*C.float)(&src[0]), (*C.ggml_fp16_t)(&dst[0]), n)
}

// HalfToF32 converts f16 or bf16 (typ) bits in src to f32 in dst.
func HalfToF32(typ Type, src []uint16, dst []float32) {
	if len(src) == 0 || len(dst) < len(src) {
		return
	}
	n := C.int64_t(len(src))
	if typ == BF16 {
		C.ggml_bf16_to_fp32_row((*C.ggml_bf16_t)(unsafe.Pointer(&src[0])), (*C.float)(&dst[0]), n)
		return
	}
	C.ggml_fp16_to_fp32_row((*C.ggml_fp16_t)(&src[0]), (*C.float)(&dst[0]), n)
}

// Decode is the f32 values of raw, the bytes of n values of type t: f32,
// f16, bf16 or a quantized type (whole blocks; ggml's dequantizer).
func Decode(t Type, raw []byte, n int64) ([]float32, error) {
	if !t.Valid() && !t.Quantized() || t == I32 {
		return nil, fmt.Errorf("decode: %v is not a type of floating-point values", t)
	}
	want, err := TensorBytes(t, []int64{n})
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("decode: %d bytes for %d values of %v, expected %d", len(raw), n, t, want)
	}
	out := make([]float32, n)
	if t == F32 {
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	}
	if n > 0 {
		C.gglua_dequantize_rows(C.int(t), unsafe.Pointer(&raw[0]), (*C.float)(&out[0]), C.int64_t(n))
	}
	return out, nil
}
