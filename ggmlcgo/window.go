package ggmlcgo

// #include <stdint.h>
// #include "gglua_ops.h"
// static struct ggml_tensor * gglua_max_pool_node(struct ggml_context * ctx, struct ggml_tensor * x, int64_t oh, int64_t ow, uint64_t code) {
//     struct ggml_tensor * args[1] = {x};
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, ow, oh, x->ne[2], x->ne[3], args, 1, gglua_max_pool_f32, -1, (void *) (uintptr_t) code);
//     ggml_set_name(t, "max_pool");
//     return t;
// }
// static struct ggml_tensor * gglua_col2im_node(struct ggml_context * ctx, struct ggml_tensor * g, int64_t c, int64_t h, int64_t w, uint64_t code) {
//     struct ggml_tensor * args[1] = {g};
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, w, h, c, g->ne[3], args, 1, gglua_col2im_f32, -1, (void *) (uintptr_t) code);
//     ggml_set_name(t, "col2im");
//     return t;
// }
// static struct ggml_tensor * gglua_im2col_node(struct ggml_context * ctx, struct ggml_tensor * x, int64_t ckk, int64_t ow, int64_t oh, uint64_t code) {
//     struct ggml_tensor * args[1] = {x};
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, ckk, ow, oh, x->ne[3], args, 1, gglua_im2col_f32, -1, (void *) (uintptr_t) code);
//     ggml_set_name(t, "im2col");
//     return t;
// }
// static struct ggml_tensor * gglua_max_pool_back_node(struct ggml_context * ctx, struct ggml_tensor * g, struct ggml_tensor * x, uint64_t code) {
//     struct ggml_tensor * args[2] = {g, x};
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 2, gglua_max_pool_back_f32, -1, (void *) (uintptr_t) code);
//     ggml_set_name(t, "max_pool_back");
//     return t;
// }
import "C"

import "fmt"

// Window is a 2-d window of a pooling or a convolution's patches:
// kernel, stride, padding and dilation, each {along H, along W}; gglua's
// CPU kernels of windows (pool.c, patches.c) take it packed in 8-bit
// fields.
type Window struct {
	Kernel, Stride, Padding, Dilation [2]int
}

// code packs w into the kernels' eight 8-bit fields, or fails when one
// does not fit (the caller then composes ggml's ops).
func (w Window) code() (uint64, error) {
	var code uint64
	for i, v := range []int{w.Kernel[0], w.Kernel[1], w.Stride[0], w.Stride[1], w.Padding[0], w.Padding[1], w.Dilation[0], w.Dilation[1]} {
		if v < 0 || v > 255 {
			return 0, fmt.Errorf("window %+v does not fit the kernels' 8-bit fields", w)
		}
		code |= uint64(v) << (8 * i)
	}
	return code, nil
}

// Fits reports whether the kernels take w: every field from 0 to 255.
func (w Window) Fits() bool {
	_, err := w.code()
	return err == nil
}

// MaxPoolCPU is PyTorch's max_pool2d of x [N, C, H, W] (contiguous f32)
// into [N, C, oh, ow], and MaxPoolBackCPU its gradient from g [N, C, oh,
// ow] and x: the maximum of each window's elements inside the input (the
// first of ties, a NaN if any), its gradient added to that element; one
// pass each of gglua's kernel (pool.c). Custom ops, which only the CPU
// backend runs.
func (c *Context) MaxPoolCPU(x Tensor, oh, ow int, w Window) (Tensor, error) {
	code, err := w.code()
	if err == nil {
		err = c.checkPackedF32("max_pool", x)
	}
	if err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_max_pool_node(c.p, x.p, C.int64_t(oh), C.int64_t(ow), C.uint64_t(code)))
}

// MaxPoolBackCPU: see MaxPoolCPU.
func (c *Context) MaxPoolBackCPU(g, x Tensor, w Window) (Tensor, error) {
	code, err := w.code()
	if err == nil {
		err = c.checkPackedF32("max_pool_back", g)
	}
	if err == nil {
		err = c.checkPackedF32("max_pool_back", x)
	}
	if err != nil {
		return Tensor{}, err
	}
	if g.Ne()[2] != x.Ne()[2] || g.Ne()[3] != x.Ne()[3] {
		return Tensor{}, fmt.Errorf("max_pool_back: gradient ne %v and input ne %v differ in N or C", g.Ne(), x.Ne())
	}
	return result(C.gglua_max_pool_back_node(c.p, g.p, x.p, C.uint64_t(code)))
}

// Im2colCPU is ggml's Im2col of x [N, C, H, W] (contiguous f32) by the
// window w into ne (C*KH*KW, ow, oh, N), ow and oh its output positions;
// one pass of gglua's kernel (patches.c). A custom op, which only the CPU
// backend runs.
func (c *Context) Im2colCPU(x Tensor, oh, ow int, w Window) (Tensor, error) {
	code, err := w.code()
	if err == nil {
		err = c.checkPackedF32("im2col", x)
	}
	if err != nil {
		return Tensor{}, err
	}
	ckk := x.Ne()[2] * int64(w.Kernel[0]) * int64(w.Kernel[1])
	return result(C.gglua_im2col_node(c.p, x.p, C.int64_t(ckk), C.int64_t(ow), C.int64_t(oh), C.uint64_t(code)))
}

// Col2imCPU is im2col's adjoint: g (f32, ne (C*KH*KW, OW, OH, N), packed:
// Im2col's layout) added into a zero [N, C, h, w] where Im2col with the
// window w takes each element from; one pass of gglua's kernel
// (patches.c). A custom op, which only the CPU backend runs.
func (c *Context) Col2imCPU(g Tensor, ch, h, wd int, w Window) (Tensor, error) {
	code, err := w.code()
	if err == nil {
		err = c.checkPackedF32("col2im", g)
	}
	if err != nil {
		return Tensor{}, err
	}
	if ne := g.Ne(); ne[0] != int64(ch)*int64(w.Kernel[0])*int64(w.Kernel[1]) {
		return Tensor{}, fmt.Errorf("col2im: patches of %d elements for %d channels and a %dx%d kernel", ne[0], ch, w.Kernel[0], w.Kernel[1])
	}
	return result(C.gglua_col2im_node(c.p, g.p, C.int64_t(ch), C.int64_t(h), C.int64_t(wd), C.uint64_t(code)))
}

// ConvMode is which of a convolution's products Context.ConvCPU computes
// (openblas builds).
type ConvMode int

const (
	ConvForward    ConvMode = iota // the output, in NCHW
	ConvWeightGrad                 // the weight's gradient
	ConvInputGrad                  // the input's gradient
)

// out is the output size (rows, columns) of the window over an h×w input;
// below 1 where the window does not fit.
func (w Window) out(h, wd int64) (int64, int64) {
	size := func(in int64, i int) int64 {
		span := int64(w.Dilation[i])*int64(w.Kernel[i]-1) + 1
		if w.Stride[i] < 1 || in+2*int64(w.Padding[i]) < span {
			return 0
		}
		return (in+2*int64(w.Padding[i])-span)/int64(w.Stride[i]) + 1
	}
	return size(h, 0), size(wd, 1)
}
