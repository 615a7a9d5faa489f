package ggmlcgo

// #include <stdlib.h>
// #include "gglua_ggml.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Tensor is a ggml tensor. The zero value is no tensor. Its metadata belongs to
// the Context that made it and its data to the buffer it was placed in: it is
// only valid while both are.
type Tensor struct {
	p *C.struct_ggml_tensor
}

// IsNil reports whether t refers to no tensor.
func (t Tensor) IsNil() bool { return t.p == nil }

// Type is the element type.
func (t Tensor) Type() Type { return Type(t.p._type) }

// Ne is the size of each dimension, innermost first; unused dimensions are 1.
func (t Tensor) Ne() [MaxDims]int64 {
	var ne [MaxDims]int64
	for i := range ne {
		ne[i] = int64(t.p.ne[i])
	}
	return ne
}

// Nelements is the number of elements.
func (t Tensor) Nelements() int64 { return int64(C.ggml_nelements(t.p)) }

// Nbytes is the size of the data in bytes.
func (t Tensor) Nbytes() int64 { return int64(C.ggml_nbytes(t.p)) }

// Name is the tensor's name.
func (t Tensor) Name() string { return C.GoString(C.ggml_get_name(t.p)) }

// SetName names the tensor; names longer than MaxNameLen are an error because
// ggml would truncate them silently and checkpoint keys would collide.
func (t Tensor) SetName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("tensor name %q is longer than %d bytes", name, MaxNameLen)
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	C.ggml_set_name(t.p, cs)
	return nil
}

// Allocated reports whether the tensor has been placed in a backend buffer.
// A data pointer alone is not enough: a view gets its source's address when
// made, but a GPU backend also needs its buffer (InitView sets it).
func (t Tensor) Allocated() bool { return t.p != nil && t.p.buffer != nil }

func (t Tensor) checkIO(op string, n int) error {
	switch {
	case t.p == nil:
		return fmt.Errorf("%s: nil tensor", op)
	case t.p.buffer == nil:
		return fmt.Errorf("%s: tensor %q has no device memory", op, t.Name())
	case int64(n) != t.Nbytes():
		return fmt.Errorf("%s: tensor holds %d bytes, buffer has %d", op, t.Nbytes(), n)
	}
	return nil
}

// Set copies data (exactly Nbytes long) into the tensor's device memory.
func (t Tensor) Set(data []byte) error {
	if err := t.checkIO("tensor set", len(data)); err != nil {
		return err
	}
	if len(data) > 0 {
		t.hostWrite(data)
	}
	return nil
}

// hostWrite writes data (nil: zeros) into the tensor: queued behind the
// devices' queued work (async.go), else now, after the writes deferred
// before it.
func (t Tensor) hostWrite(data []byte) {
	if !writeLater(t, data) {
		WaitDevices() // earlier deferred writes first
		t.write(data)
	}
}

// write copies data into the tensor's memory now (nil: zeros).
func (t Tensor) write(data []byte) {
	if data == nil {
		C.ggml_backend_tensor_memset(t.p, 0, 0, C.size_t(t.Nbytes()))
		return
	}
	C.ggml_backend_tensor_set(t.p, unsafe.Pointer(&data[0]), 0, C.size_t(len(data)))
}

// SetVia copies data into the tensor through staging, a host buffer at least
// as large (pinned memory makes the transfer a fast DMA).
func (t Tensor) SetVia(data []byte, staging Buffer) error {
	if err := t.checkIO("tensor set", len(data)); err != nil {
		return err
	}
	if staging.IsNil() || staging.Size() < int64(len(data)) {
		return t.Set(data)
	}
	if len(data) > 0 && !writeLater(t, data) {
		WaitDevices() // earlier deferred writes first
		copy(staging.Bytes(), data)
		C.ggml_backend_tensor_set(t.p, C.ggml_backend_buffer_get_base(staging.p), 0, C.size_t(len(data)))
	}
	return nil
}

// Get copies the tensor's device memory into dst (exactly Nbytes long).
func (t Tensor) Get(dst []byte) error { return t.get(dst, WaitDevices) }

// GetNow is Get without waiting for the devices' queued graphs: the caller
// knows that none of them, nor a write queued after them, writes the
// tensor (the graph that did is done: Backend.WaitFor).
// Deferred host writes are made first, as for Get.
func (t Tensor) GetNow(dst []byte) error { return t.get(dst, waitForWrites) }

func (t Tensor) get(dst []byte, wait func()) error {
	if err := t.checkIO("tensor get", len(dst)); err != nil {
		return err
	}
	if len(dst) > 0 {
		wait()
		C.ggml_backend_tensor_get(t.p, unsafe.Pointer(&dst[0]), 0, C.size_t(len(dst)))
	}
	return nil
}

// Zero fills the tensor's device memory with zero bytes.
func (t Tensor) Zero() error {
	if err := t.checkIO("tensor zero", int(t.Nbytes())); err != nil {
		return err
	}
	if t.Nbytes() > 0 {
		t.hostWrite(nil)
	}
	return nil
}

var errNilOperand = errors.New("nil operand")

// Data is the address of the tensor's memory in its buffer: host memory on
// the CPU backend, device memory on a GPU. Collective libraries (MPI, NCCL:
// package dist) read and write it in place between graph computes, so it
// first waits for the devices' queued work (WaitDevices).
func (t Tensor) Data() unsafe.Pointer {
	WaitDevices()
	return t.p.data
}

// IsView reports whether t shares the memory of another tensor.
func (t Tensor) IsView() bool { return t.p != nil && t.p.view_src != nil }

// InitView points a view at its source's memory once the source is placed.
func (t Tensor) InitView() error {
	switch {
	case t.p == nil || t.p.view_src == nil:
		return errors.New("view init: not a view")
	case t.Allocated():
		return errors.New("view init: already placed")
	case t.p.view_src.buffer == nil || t.p.view_src.data == nil:
		return errors.New("view init: the source has no memory")
	}
	return statusError("view init", C.ggml_backend_view_init(t.p))
}

// Unplace forgets the memory a node was given (a buffer's place, or a
// view's source) when its graph could not be computed after all, so that
// the next graph gives it memory again instead of reading a place that is
// no longer its own.
func (t Tensor) Unplace() {
	t.p.buffer = nil
	t.p.data = nil
}

// SetOutput marks t as a result its graph must leave in memory: ggml's
// backends then never fuse it into a later node's kernel.
func (t Tensor) SetOutput() { C.ggml_set_output(t.p) }

// MakeLeaf turns a computed node into a leaf: it keeps its data but forgets
// the op and the operands that made it, so a later graph that uses it reads
// the value instead of computing its ancestry again.
func (t Tensor) MakeLeaf() {
	t.p.op = C.GGML_OP_NONE
	for i := range t.p.src {
		t.p.src[i] = nil
	}
}

// Base is the tensor whose memory t shares through views of views: t
// itself when it is no view.
func (t Tensor) Base() Tensor {
	for t.IsView() {
		t = t.ViewSrc()
	}
	return t
}

// ViewSrc is the tensor whose memory a view shares (nil tensor if none).
func (t Tensor) ViewSrc() Tensor { return Tensor{p: t.p.view_src} }
