package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import "fmt"

// Im2colParams are a 2-d convolution's kernel size, strides, paddings and
// dilations, each {along ne0 (width), along ne1 (height)}.
type Im2colParams struct {
	Kernel, Stride, Padding, Dilation [2]int
}

// convOut is ggml_calc_conv_output_size: the number of kernel positions
// along one dim of size n.
func convOut(n int64, k, s, p, d int) int64 {
	return (n+2*int64(p)-int64(d)*int64(k-1)-1)/int64(s) + 1
}

// Im2col lays out the patches of x (f32, ne (W, H, C, N), each (W, H) plane
// packed) that a 2-d convolution multiplies: the result (f32) has ne
// (C*KH*KW, OW, OH, N), element c*KH*KW + kh*KW + kw of a column being
// x[w*s0 + kw*d0 - p0, h*s1 + kh*d1 - p1, c] (0 outside x). kernel is a
// tensor of ne (KW, KH, C, ...) whose shape, not data, ggml reads: a
// template from NewTensor will do.
func (c *Context) Im2col(kernel, x Tensor, p Im2colParams) (Tensor, error) {
	if err := c.checkF32("im2col", kernel, x); err != nil {
		return Tensor{}, err
	}
	nk, nx := kernel.Ne(), x.Ne()
	for i := range 2 {
		if p.Stride[i] < 1 || p.Dilation[i] < 1 || p.Padding[i] < 0 || p.Kernel[i] < 1 || p.Kernel[i] > 1<<20 ||
			p.Stride[i] > 1<<20 || p.Dilation[i] > 1<<20 || p.Padding[i] > 1<<20 {
			return Tensor{}, fmt.Errorf("im2col: bad parameters %+v", p)
		}
		if nk[i] != int64(p.Kernel[i]) {
			return Tensor{}, fmt.Errorf("im2col: kernel ne %v does not match kernel size %v", nk, p.Kernel)
		}
		if convOut(nx[i], p.Kernel[i], p.Stride[i], p.Padding[i], p.Dilation[i]) < 1 {
			return Tensor{}, fmt.Errorf("im2col: kernel %v (dilation %v) larger than the input ne %v padded by %v", p.Kernel, p.Dilation, nx, p.Padding)
		}
	}
	if nk[2] != nx[2] {
		return Tensor{}, fmt.Errorf("im2col: kernel ne %v and input ne %v differ in channels", nk, nx)
	}
	if x.p.nb[0] != 4 || int64(x.p.nb[1]) != 4*nx[0] {
		return Tensor{}, fmt.Errorf("im2col: the input's planes must be packed (ne %v)", nx)
	}
	return result(C.ggml_im2col(c.p, kernel.p, x.p,
		C.int(p.Stride[0]), C.int(p.Stride[1]), C.int(p.Padding[0]), C.int(p.Padding[1]),
		C.int(p.Dilation[0]), C.int(p.Dilation[1]), C.bool(true), C.GGML_TYPE_F32))
}
