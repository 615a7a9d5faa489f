package ggmlcgo

// #include <stdlib.h>
// #include "gglua_ggml.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Context owns tensor metadata (and graphs). gglua's contexts never hold tensor
// data: that lives in backend buffers, so every context is created no_alloc.
type Context struct {
	p    *C.struct_ggml_context
	size C.size_t // ggml_get_mem_size(p), which never changes: Room asks ggml only what is used
}

// tensorOverhead is ggml_tensor_overhead(), a constant of the library.
var tensorOverhead = C.ggml_tensor_overhead()

// NewContext makes a context with room for maxTensors tensors and, when
// graphSize > 0, one graph of that many nodes.
func NewContext(maxTensors, graphSize int) (*Context, error) {
	if maxTensors < 0 || graphSize < 0 || maxTensors > 1<<24 || graphSize > 1<<24 {
		return nil, fmt.Errorf("ggml context: bad sizes (%d tensors, graph of %d)", maxTensors, graphSize)
	}
	size := C.size_t(maxTensors) * C.ggml_tensor_overhead()
	if graphSize > 0 {
		size += C.ggml_graph_overhead_custom(C.size_t(graphSize), false)
	}
	if size == 0 {
		size = C.ggml_tensor_overhead()
	}
	p := C.ggml_init(C.struct_ggml_init_params{mem_size: size, mem_buffer: nil, no_alloc: true})
	if p == nil {
		return nil, errors.New("ggml context: out of host memory")
	}
	return &Context{p: p, size: C.ggml_get_mem_size(p)}, nil
}

// Free releases the context and the metadata of its tensors. It is safe to
// call twice.
func (c *Context) Free() {
	if c != nil && c.p != nil {
		waitForWrites() // a deferred write may be to a tensor described here
		C.ggml_free(c.p)
		c.p = nil
	}
}

func (c *Context) free() C.size_t {
	return c.size - C.ggml_used_mem(c.p)
}

// Room is the number of further tensors the context can describe.
func (c *Context) Room() int {
	if c == nil || c.p == nil {
		return 0
	}
	return int(c.free() / tensorOverhead)
}

// NewTensor describes a tensor of type t and ne (innermost first). It has no
// data until a buffer allocator places it.
func (c *Context) NewTensor(t Type, ne []int64) (Tensor, error) {
	if c == nil || c.p == nil {
		return Tensor{}, errors.New("ggml context: used after free")
	}
	if _, err := TensorBytes(t, ne); err != nil {
		return Tensor{}, err
	}
	if c.Room() < 1 {
		return Tensor{}, errors.New("ggml context: no room for another tensor")
	}
	var cne [MaxDims]C.int64_t
	for i, d := range ne {
		cne[i] = C.int64_t(d)
	}
	p := C.ggml_new_tensor(c.p, C.enum_ggml_type(t), C.int(len(ne)), &cne[0])
	return Tensor{p: p}, nil
}

// Lookup finds a tensor of the context by name.
func (c *Context) Lookup(name string) (Tensor, bool) {
	if c == nil || c.p == nil {
		return Tensor{}, false
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.ggml_get_tensor(c.p, cs)
	return Tensor{p: p}, p != nil
}

// Tensors lists the context's tensors in creation order.
func (c *Context) Tensors() []Tensor {
	var out []Tensor
	if c == nil || c.p == nil {
		return out
	}
	for p := C.ggml_get_first_tensor(c.p); p != nil; p = C.ggml_get_next_tensor(c.p, p) {
		out = append(out, Tensor{p: p})
	}
	return out
}
