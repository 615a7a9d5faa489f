package ggmlcgo

// #cgo CPPFLAGS: -I${SRCDIR}
// #include "gglua_ggml.h"
import "C"

import (
	"fmt"
	"strings"
)

// MaxDims is the most dimensions a ggml tensor has.
const MaxDims = C.GGLUA_MAX_DIMS

// MaxNameLen is the longest tensor name ggml stores (without its final NUL).
const MaxNameLen = C.GGLUA_MAX_NAME - 1

// MaxTensorBytes bounds a single tensor, so that a shape like 1e9 x 1e9 is an
// error before it becomes an overflowing size or an allocation attempt.
const MaxTensorBytes = int64(1) << 42 // 4 TiB

// Type is a ggml element type. Only the unquantized types gglua stores are
// named here.
type Type int32

const (
	F32  Type = C.GGML_TYPE_F32
	F16  Type = C.GGML_TYPE_F16
	BF16 Type = C.GGML_TYPE_BF16
	I32  Type = C.GGML_TYPE_I32
)

// typeCount bounds ggml's type numbers (GGML_TYPE_COUNT, checked by the ABI test).
const typeCount = C.GGML_TYPE_COUNT

var typeNames = map[Type]string{F32: "f32", F16: "f16", BF16: "bf16", I32: "i32"}

// ParseType turns "f32", "f16", "bf16" or "i32" into a Type.
func ParseType(name string) (Type, error) {
	for t, n := range typeNames {
		if strings.EqualFold(name, n) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (expected f32, f16, bf16 or i32)", name)
}

// Valid reports whether t is one of the types gglua supports.
func (t Type) Valid() bool {
	_, ok := typeNames[t]
	return ok
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("ggml_type(%d)", int32(t))
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
