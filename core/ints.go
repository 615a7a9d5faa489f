package core

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// The i32 dtype holds indices and labels exactly: an f32 holds every
// integer only up to 2^24, so a class number or a row index past that would
// round silently. An i32 tensor keeps []int32 on the host (or i32 device
// memory) and is read by the index readers (index_select, gather, the
// scatters, embedding, the losses' labels) through Float64s, exactly.
//
// It is not an operand of arithmetic: PyTorch's integer arithmetic (floor
// division, integer overflow, type promotion) is not built here, so every
// op refuses it with a clear error naming x:float(). It is never changed in
// place either, which is also why its views may be read by gathering: no
// write can make a view and its base disagree.

// maxExactF32 is the magnitude up to which every integer has an exact f32.
const maxExactF32 = 1 << 24

// FromInt32 makes a host i32 tensor of shape holding data (not copied).
func FromInt32(data []int32, shape ...int) (*Tensor, error) {
	n, err := checkShape(shape)
	if err != nil {
		return nil, fmt.Errorf("tensor: %w", err)
	}
	if int64(len(data)) != n {
		return nil, shapeErrorf("tensor: %d values given for shape %s (%d elements)", len(data), ShapeString(shape), n)
	}
	if data == nil { // an empty tensor still holds (no) host values
		data = []int32{}
	}
	return &Tensor{shape: append([]int(nil), shape...), dtype: ggmlcgo.I32, ints: data}, nil
}

// Int32FromFloat is the i32 value of v, or an error when v is not an
// integer in int32's range (the readers of creation tables use it).
func Int32FromFloat(v float64) (int32, error) {
	if v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, argErrorf("i32: %g is not an integer in [-2^31, 2^31)", v)
	}
	return int32(v), nil
}

// Float64s returns the values exactly, as float64: an i32 tensor's integers
// past 2^24 too. Index and label readers use it.
func (t *Tensor) Float64s() ([]float64, error) {
	if t.storage().dtype != ggmlcgo.I32 {
		v, err := t.Float32s()
		return widen(v), err
	}
	ints, err := t.int32s()
	return widen(ints), err
}

// widen converts values to float64, exactly.
func widen[T float32 | int32](v []T) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// int32s is an i32 tensor's values (its storage for a host tensor, a copy
// otherwise).
func (t *Tensor) int32s() ([]int32, error) {
	if t.base != nil {
		src, err := t.base.int32s()
		if err != nil {
			return nil, err
		}
		return gatherView(t, src), nil
	}
	if t.ints != nil {
		return t.ints, nil
	}
	if t.handle == nil {
		return nil, errDropped
	}
	// An i32 tensor's device value never changes in place (copy_ refuses
	// it; a write or an in-place op drops the host copy), so while its
	// memory lives a host copy, once read, is its value: labels kept on the
	// device are read once, not with a wait for the device's queued work
	// every step. (A pass tensor read so becomes a host tensor at the pass
	// reset: pass_memory.go's promote.)
	if !t.handle.Live() {
		return nil, errDropped
	}
	if h := t.handle.HostCopy(); h != nil {
		return decodeInt32s(h), nil
	}
	raw := make([]byte, t.handle.Nbytes())
	if err := t.handle.Read(raw); err != nil {
		return nil, err
	}
	if t.handle.Scope() == residency.Pass || len(raw) <= keepIntsBytes {
		if err := t.handle.KeepHostCopy(raw); err != nil {
			return nil, err
		}
	}
	return decodeInt32s(raw), nil
}

// keepIntsBytes bounds the host copy a persistent i32 tensor keeps once
// read (a batch's labels: 256k of them), never more than its device
// memory; a pass tensor's is kept whatever its size, as its memory goes
// with the next step.
const keepIntsBytes = 1 << 20

// int32sAsFloat32 is Float32s of an i32 tensor: exact, or an error for a
// value past 2^24 (x:float() rounds as PyTorch does; this path must not).
func (t *Tensor) int32sAsFloat32() ([]float32, error) {
	ints, err := t.int32s()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(ints))
	for i, x := range ints {
		if x > maxExactF32 || x < -maxExactF32 {
			return nil, argErrorf("i32 value %d (element %d) has no exact f32; read it with totable() or convert with x:float()", x, i+1)
		}
		out[i] = float32(x)
	}
	return out, nil
}

func encodeInt32s(v []int32) []byte {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
	}
	return raw
}

func decodeInt32s(raw []byte) []int32 {
	v := make([]int32, len(raw)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// errIntOperand is what an op says when handed an i32 tensor.
func errIntOperand(t *Tensor) error {
	return argErrorf("an i32 tensor (shape %s) holds indices or labels and is not an operand here; convert it with x:float()", ShapeString(t.shape))
}

// ToInt is x:int(): values truncated toward zero, as PyTorch's .int(), into
// a new i32 tensor where x lives (the host, or x's device pool for this
// pass). NaN, inf and values outside int32 are errors (PyTorch's result is
// undefined there). It is not differentiable, as in PyTorch.
func (e *Engine) ToInt(x *Tensor) (*Tensor, error) {
	if x.storage().dtype == ggmlcgo.I32 {
		return x, nil
	}
	v, err := x.Float32s()
	if err != nil {
		return nil, err
	}
	ints := make([]int32, len(v))
	for i, f := range v {
		tr := math.Trunc(float64(f))
		if math.IsNaN(tr) || tr < math.MinInt32 || tr > math.MaxInt32 {
			return nil, argErrorf("int: element %d is %g, outside i32's range", i+1, f)
		}
		ints[i] = int32(tr)
	}
	return e.intResult(x, ints, x.shape)
}

// intToFloat is x:to(f32|f16|bf16) of an i32 tensor: each integer rounded
// to the nearest f32 (as PyTorch's .float()), then stored as dtype.
func (e *Engine) intToFloat(x *Tensor, dtype ggmlcgo.Type) (*Tensor, error) {
	ints, err := x.int32s()
	if err != nil {
		return nil, err
	}
	v := make([]float32, len(ints))
	for i, n := range ints {
		v[i] = float32(n)
	}
	out, err := FromFloat32(v, x.shape...)
	if err == nil && dtype != ggmlcgo.F32 {
		err = out.SetHostDtype(dtype)
	}
	if err != nil || !x.OnDevice() {
		return out, err
	}
	return out.ToDevice(x.storage().engine, residency.Pass, dtype)
}

// intIndexSelect is index_select of an i32 tensor (labels shuffled by a
// permutation, say): rows picked on the host, exactly; the result lives
// where x does.
func (e *Engine) intIndexSelect(x *Tensor, d int, idx []int) (*Tensor, error) {
	ints, err := x.int32s()
	if err != nil {
		return nil, err
	}
	inner := 1
	for _, n := range x.shape[d+1:] {
		inner *= n
	}
	outer := len(ints) / (inner * x.shape[d])
	out := make([]int32, 0, outer*len(idx)*inner)
	for o := range outer {
		block := ints[o*x.shape[d]*inner:]
		for _, i := range idx {
			out = append(out, block[i*inner:(i+1)*inner]...)
		}
	}
	shape := append([]int(nil), x.shape...)
	shape[d] = len(idx)
	return e.intResult(x, out, shape)
}

// cloneInt is clone() of an i32 tensor: a copy of its integers where x lives.
func (e *Engine) cloneInt(x *Tensor) (*Tensor, error) {
	ints, err := x.int32s()
	if err != nil {
		return nil, err
	}
	return e.intResult(x, append([]int32(nil), ints...), x.shape)
}

// intResult makes a new i32 tensor of ints, on the host or, when like is on
// a device, in that device's pass pool.
func (e *Engine) intResult(like *Tensor, ints []int32, shape []int) (*Tensor, error) {
	out, err := FromInt32(ints, shape...)
	if err != nil || !like.OnDevice() {
		return out, err
	}
	return out.ToDevice(like.storage().engine, residency.Pass, ggmlcgo.I32)
}
