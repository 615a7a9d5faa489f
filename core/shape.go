package core

import (
	"fmt"
	"strings"

	"github.com/gglua/gglua/ggmlcgo"
)

// ShapeString formats a shape as "2x3".
func ShapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "x")
}

// MaxHostElements bounds a host tensor (8 GiB of f32), so that an absurd
// request is an error instead of the Go runtime dying out of memory.
const MaxHostElements = int64(1) << 31

// checkShape validates a shape and returns its element count. A size of 0
// is allowed, as PyTorch allows it (an empty tensor: see empty.go); the
// rest is ggml's check, with each 0 counted as 1.
func checkShape(shape []int) (int64, error) {
	ne := make([]int64, len(shape))
	empty := false
	for i, d := range shape {
		ne[i] = int64(d)
		if d == 0 {
			ne[i], empty = 1, true
		}
	}
	n, err := ggmlcgo.CheckShape(ggmlcgo.F32, ne)
	if err != nil {
		return 0, shapeErrorf("shape %s: %v", ShapeString(shape), err)
	}
	if empty {
		return 0, nil
	}
	if n > MaxHostElements {
		return 0, shapeErrorf("shape %s: %d elements is more than a tensor may hold (%d)", ShapeString(shape), n, MaxHostElements)
	}
	return n, nil
}

// ne4 is ggml's innermost-first, 1-padded form of an outermost-first shape.
func ne4(shape []int) [ggmlcgo.MaxDims]int64 {
	ne := [ggmlcgo.MaxDims]int64{1, 1, 1, 1}
	for i, d := range shape {
		ne[len(shape)-1-i] = int64(d)
	}
	return ne
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// broadcastShape is PyTorch's rule: align trailing dims; each pair must be
// equal or contain a 1.
func broadcastShape(op string, a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 1; i <= n; i++ {
		da, db := 1, 1
		if i <= len(a) {
			da = a[len(a)-i]
		}
		if i <= len(b) {
			db = b[len(b)-i]
		}
		switch {
		case da == db || db == 1:
			out[n-i] = da
		case da == 1:
			out[n-i] = db
		default:
			return nil, shapeErrorf("%s: shapes %s and %s do not broadcast (dim %d: %d vs %d)",
				op, ShapeString(a), ShapeString(b), n-i+1, da, db)
		}
	}
	return out, nil
}

// checkDim turns a 0-based dim (negative counts from the end) into an index.
func checkDim(op string, shape []int, dim int) (int, error) {
	d := dim
	if d < 0 {
		d += len(shape)
	}
	if d < 0 || d >= len(shape) {
		shown := dim // messages count dims from 1, as Lua does
		if dim >= 0 {
			shown = dim + 1
		}
		return 0, shapeErrorf("%s: dim %d out of range for a %d-d tensor of shape %s (dims are 1..%d, or -1..-%d from the end)", op, shown, len(shape), ShapeString(shape), len(shape), len(shape))
	}
	return d, nil
}

// reducedShapes is the shape after reducing dim d: kept keeps it with size
// 1, out drops it unless keepdim (a 1-d result stays 1-d).
func reducedShapes(shape []int, d int, keepdim bool) (kept, out []int) {
	kept = append([]int(nil), shape...)
	kept[d] = 1
	out = kept
	if !keepdim && len(kept) > 1 {
		out = append(append([]int(nil), kept[:d]...), kept[d+1:]...)
	}
	return kept, out
}

// chain runs ops one after another and stops at the first error, for ops
// composed of many others (do returns nil once an error has happened).
type chain struct{ err error }

func (c *chain) do(f func() (*Tensor, error)) *Tensor {
	if c.err != nil {
		return nil
	}
	t, err := f()
	c.err = err
	return t
}
