package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Tensor is an N-dimensional array (1 to 4 dims) on the host or on a device.
type Tensor struct {
	shape  []int
	dtype  ggmlcgo.Type
	host   []float32         // host storage, nil on the device
	handle *residency.Handle // device storage, nil on the host
	engine *Engine
}

// FromFloat32 makes a host tensor of shape holding data (not copied).
func FromFloat32(data []float32, shape ...int) (*Tensor, error) {
	n, err := checkShape(shape)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("tensor: %d values given for shape %s (%d elements)", len(data), ShapeString(shape), n)
	}
	return &Tensor{shape: append([]int(nil), shape...), dtype: ggmlcgo.F32, host: data}, nil
}

// Zeros makes a host tensor of zeros.
func Zeros(shape ...int) (*Tensor, error) {
	n, err := checkShape(shape)
	if err != nil {
		return nil, err
	}
	return FromFloat32(make([]float32, n), shape...)
}

func checkShape(shape []int) (int64, error) {
	ne := make([]int64, len(shape))
	for i, d := range shape {
		ne[i] = int64(d)
	}
	n, err := ggmlcgo.CheckShape(ggmlcgo.F32, ne)
	if err != nil {
		return 0, fmt.Errorf("tensor: shape %s: %w", ShapeString(shape), err)
	}
	return n, nil
}

// ShapeString formats a shape as "2x3".
func ShapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "x")
}

// Shape is the tensor's shape, outermost first.
func (t *Tensor) Shape() []int { return append([]int(nil), t.shape...) }

// Dim is the number of dimensions.
func (t *Tensor) Dim() int { return len(t.shape) }

// Numel is the number of elements.
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= int64(d)
	}
	return n
}

// Dtype is the storage type.
func (t *Tensor) Dtype() ggmlcgo.Type { return t.dtype }

// OnDevice reports whether the data lives on a device.
func (t *Tensor) OnDevice() bool { return t.handle != nil }

// Device is "host" for host tensors, else the engine's device ("cpu", "cuda0").
func (t *Tensor) Device() string {
	if t.handle == nil {
		return "host"
	}
	return t.engine.DeviceName()
}

// Scope is the pool of a device tensor ("pass" or "persistent"), "host" for
// host tensors.
func (t *Tensor) Scope() string {
	if t.handle == nil {
		return "host"
	}
	return t.handle.Scope().String()
}

// Handle is the residency handle of a device tensor (nil on the host).
func (t *Tensor) Handle() *residency.Handle { return t.handle }

// ToDevice copies the tensor into a pool of e's device, stored as dtype.
func (t *Tensor) ToDevice(e *Engine, scope residency.Scope, dtype ggmlcgo.Type) (*Tensor, error) {
	data, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	raw, err := encode(dtype, data)
	if err != nil {
		return nil, err
	}
	h, err := e.res.Upload(residency.Request{Shape: t.shape, Type: dtype, Scope: scope}, raw)
	if err != nil {
		return nil, err
	}
	return &Tensor{shape: t.Shape(), dtype: dtype, handle: h, engine: e}, nil
}

// ToHost copies the tensor's values to a host f32 tensor.
func (t *Tensor) ToHost() (*Tensor, error) {
	data, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	return FromFloat32(data, t.shape...)
}

// Float32s returns the values, outermost dimension slowest. The slice of a
// host tensor is its storage; a device tensor's is a fresh copy.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.handle == nil {
		return t.host, nil
	}
	raw := make([]byte, t.handle.Nbytes())
	if err := t.handle.Read(raw); err != nil {
		return nil, err
	}
	return decode(t.dtype, raw)
}

// Item is the value of a one-element tensor.
func (t *Tensor) Item() (float32, error) {
	if t.Numel() != 1 {
		return 0, fmt.Errorf("item: tensor of shape %s has %d elements, not 1", ShapeString(t.shape), t.Numel())
	}
	v, err := t.Float32s()
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

func encode(dtype ggmlcgo.Type, v []float32) ([]byte, error) {
	switch dtype {
	case ggmlcgo.F32:
		raw := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		return raw, nil
	case ggmlcgo.F16, ggmlcgo.BF16:
		half := make([]uint16, len(v))
		ggmlcgo.F32ToHalf(dtype, v, half)
		raw := make([]byte, 2*len(v))
		for i, x := range half {
			binary.LittleEndian.PutUint16(raw[2*i:], x)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("tensor: unsupported storage dtype %v (expected f32, f16 or bf16)", dtype)
}

func decode(dtype ggmlcgo.Type, raw []byte) ([]float32, error) {
	switch dtype {
	case ggmlcgo.F32:
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v, nil
	case ggmlcgo.F16, ggmlcgo.BF16:
		half := make([]uint16, len(raw)/2)
		for i := range half {
			half[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		v := make([]float32, len(half))
		ggmlcgo.HalfToF32(dtype, half, v)
		return v, nil
	}
	return nil, errors.New("tensor: unsupported storage dtype " + dtype.String())
}
