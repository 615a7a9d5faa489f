package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import "unsafe"

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
