package ggmlcgo

/*
#include <stdint.h>
#include "gglua_ggml.h"

// gglua_place_at is PlaceAt's checks and placement in one call (a step
// places every node of its graph: one cgo call each instead of nine). code
// is 0 when t was placed, 1 when need bytes do not fit at off, 2 when off
// is not aligned, 3 when ggml refused (its status in status); the sizes are
// set in every case, for the message. Returned by value: Go variables
// whose addresses went to C would each be a heap allocation.
struct gglua_placed {
    int code;
    enum ggml_status status;
    int64_t need, size, align, first;
};

static struct gglua_placed gglua_place_at(ggml_backend_buffer_t b, struct ggml_tensor * t, int64_t off) {
    struct gglua_placed r = {0};
    const int64_t a = (int64_t) ggml_backend_buffer_get_alignment(b);
    const uintptr_t base = (uintptr_t) ggml_backend_buffer_get_base(b);
    r.align = a;
    r.size = (int64_t) ggml_backend_buffer_get_size(b);
    r.need = ((int64_t) ggml_backend_buffer_get_alloc_size(b, t) + a - 1) / a * a;
    r.first = (int64_t) ((a - base % a) % a);
    if (off < 0 || off > r.size || r.need > r.size - off) {
        r.code = 1;
    } else if ((off - r.first) % a != 0) {
        r.code = 2;
    } else {
        r.status = ggml_backend_tensor_alloc(b, t, (void *) (base + (uintptr_t) off));
        r.code = r.status == GGML_STATUS_SUCCESS ? 0 : 3;
    }
    return r;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// BufferType is a kind of backend memory (host RAM, CUDA device memory, ...).
type BufferType struct {
	p C.ggml_backend_buffer_type_t
}

// Name is the buffer type's name.
func (bt BufferType) Name() string { return C.GoString(C.ggml_backend_buft_name(bt.p)) }

// Alignment is the alignment of tensors in buffers of this type.
func (bt BufferType) Alignment() int64 { return int64(C.ggml_backend_buft_get_alignment(bt.p)) }

// AllocSize is the number of bytes t takes in a buffer of this type, before
// alignment padding.
func (bt BufferType) AllocSize(t Tensor) int64 {
	return int64(C.ggml_backend_buft_get_alloc_size(bt.p, t.p))
}

// Alloc allocates a buffer of size bytes.
func (bt BufferType) Alloc(size int64) (Buffer, error) {
	if size < 1 || size > MaxTensorBytes {
		return Buffer{}, fmt.Errorf("buffer alloc: bad size %d", size)
	}
	var started time.Time
	if slowCompute > 0 {
		started = time.Now()
	}
	p := C.ggml_backend_buft_alloc_buffer(bt.p, C.size_t(size))
	reportSlowCall("allocating", size, started)
	if p == nil {
		return Buffer{}, fmt.Errorf("buffer alloc: %s could not allocate %d bytes", bt.Name(), size)
	}
	return Buffer{p: p}, nil
}

// Buffer is a block of backend memory that tensors are placed in.
type Buffer struct {
	p C.ggml_backend_buffer_t
}

// IsNil reports whether b is no buffer.
func (b Buffer) IsNil() bool { return b.p == nil }

// Size is the buffer's size in bytes.
func (b Buffer) Size() int64 { return int64(C.ggml_backend_buffer_get_size(b.p)) }

// Bytes is the buffer's memory as a Go slice; only for host buffers
// (pinned staging memory), never for device memory.
func (b Buffer) Bytes() []byte {
	return unsafe.Slice((*byte)(C.ggml_backend_buffer_get_base(b.p)), b.Size())
}

// Free releases the buffer; its tensors become unusable. Queued device work
// may still use it: Free waits for it first.
func (b Buffer) Free() {
	if b.p != nil {
		WaitDevices()
		var started time.Time
		var size int64
		if slowCompute > 0 {
			started, size = time.Now(), b.Size()
		}
		C.ggml_backend_buffer_free(b.p)
		reportSlowCall("freeing", size, started)
	}
}

// Alignment is the alignment of tensor data in the buffer.
func (b Buffer) Alignment() int64 { return int64(C.ggml_backend_buffer_get_alignment(b.p)) }

// FirstOffset is the first byte offset at which a tensor can be placed: the
// buffer's base address rounded up to its alignment.
func (b Buffer) FirstOffset() int64 {
	align := uintptr(b.Alignment())
	base := uintptr(C.ggml_backend_buffer_get_base(b.p))
	return int64((align - base%align) % align)
}

// TensorSize is the number of bytes t takes in b, padded to b's alignment:
// what PlaceAt needs free at the offset.
func (b Buffer) TensorSize(t Tensor) int64 {
	align := b.Alignment()
	size := int64(C.ggml_backend_buffer_get_alloc_size(b.p, t.p))
	return (size + align - 1) / align * align
}

// PlaceAt gives t the memory of b at byte offset off: any offset that
// FirstOffset plus multiples of the alignment reach, with TensorSize(t)
// bytes inside the buffer. Which other tensors use that memory is the
// caller's business.
func (b Buffer) PlaceAt(t Tensor, off int64) error {
	switch {
	case b.p == nil:
		return errors.New("place: no buffer")
	case t.p == nil:
		return errors.New("place: nil tensor")
	case t.IsView():
		return errors.New("place: the tensor is a view; it shares its source's memory")
	case t.Allocated() || t.p.data != nil:
		return fmt.Errorf("place: tensor %q is already placed", t.Name())
	}
	r := C.gglua_place_at(b.p, t.p, C.int64_t(off))
	switch r.code {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("place: %d bytes at offset %d do not fit in a buffer of %d bytes", r.need, off, r.size)
	case 2:
		return fmt.Errorf("place: offset %d is not aligned to %d bytes (first offset %d)", off, r.align, r.first)
	default:
		return statusError("place", r.status)
	}
}

// Tallocr places tensors one after another in a buffer (ggml's linear
// allocator). Fits must be asked first: ggml aborts when the buffer is full.
type Tallocr struct {
	c C.struct_ggml_tallocr
}

// NewTallocr starts placing tensors at the beginning of b.
func NewTallocr(b Buffer) *Tallocr {
	return &Tallocr{c: C.ggml_tallocr_new(b.p)}
}

func (a *Tallocr) need(t Tensor) int64 {
	size := int64(C.ggml_backend_buffer_get_alloc_size(a.c.buffer, t.p))
	align := int64(a.c.alignment)
	return (size + align - 1) / align * align
}

// Fits reports whether t still fits in the buffer.
func (a *Tallocr) Fits(t Tensor) bool {
	return int64(a.c.offset)+a.need(t) <= int64(C.ggml_backend_buffer_get_size(a.c.buffer))
}

// Alloc places t in the buffer.
func (a *Tallocr) Alloc(t Tensor) error {
	switch {
	case t.p == nil:
		return errors.New("tallocr: nil tensor")
	case t.Allocated():
		return fmt.Errorf("tallocr: tensor %q is already placed", t.Name())
	case !a.Fits(t):
		return fmt.Errorf("tallocr: %d bytes do not fit (%d of %d used)", a.need(t), int64(a.c.offset), int64(C.ggml_backend_buffer_get_size(a.c.buffer)))
	}
	return statusError("tallocr", C.ggml_tallocr_alloc(&a.c, t.p))
}

// Gallocr allocates the intermediate tensors of a graph in one buffer that it
// owns, reusing memory between nodes whose lifetimes do not overlap.
type Gallocr struct {
	p C.ggml_gallocr_t
}

// NewGallocr makes a graph allocator for buffers of type bt.
func NewGallocr(bt BufferType) *Gallocr { return &Gallocr{p: C.ggml_gallocr_new(bt.p)} }

// AllocGraph places every unplaced tensor of g.
func (a *Gallocr) AllocGraph(g *Graph) error {
	if !bool(C.ggml_gallocr_alloc_graph(a.p, g.p)) {
		return errors.New("gallocr: could not allocate the graph")
	}
	return nil
}

// Measure is the size of the buffer AllocGraph would need for g. It plans
// g but allocates nothing, and it frees the allocator's buffer if that is
// too small: measure with an allocator kept for measuring, never with the
// one whose buffer a queued graph may still be using.
func (a *Gallocr) Measure(g *Graph) int64 {
	var size C.size_t
	C.ggml_gallocr_reserve_n_size(a.p, g.p, nil, nil, &size)
	return int64(size)
}

// BufferSize is the size of the allocator's buffer.
func (a *Gallocr) BufferSize() int64 { return int64(C.ggml_gallocr_get_buffer_size(a.p, 0)) }

// Free releases the allocator and its buffer.
func (a *Gallocr) Free() {
	if a != nil && a.p != nil {
		C.ggml_gallocr_free(a.p)
		a.p = nil
	}
}

// Offset is how many bytes of the buffer are used.
func (a *Tallocr) Offset() int64 { return int64(a.c.offset) }
