package core

import "fmt"

// Transposed convolutions, as PyTorch's conv_transpose1d and
// conv_transpose2d: the adjoint of a convolution with the same window. Each
// input pixel's channels times the weight give a patch of the output (one
// matrix product per group), and col2im adds the patches where a
// convolution would have read them. The gradients come from those two ops.

// ConvTransposeOptions are a transposed convolution's stride, padding,
// dilation and groups (as a convolution's) and its output padding: rows
// and columns added at the bottom and right of the output, {H, W}.
type ConvTransposeOptions struct {
	ConvOptions
	OutputPadding [2]int
}

// ConvTranspose2d is PyTorch's conv_transpose2d: x [N, C, H, W] (or [C, H,
// W]), w [C, OC/groups, KH, KW], b [OC] or nil. The output is [N, OC,
// (H-1)·stride - 2·padding + dilation·(KH-1) + output_padding + 1, ...].
func (e *Engine) ConvTranspose2d(x, w, b *Tensor, o ConvTransposeOptions) (*Tensor, error) {
	return e.convFamily("conv_transpose2d", x, w, 4, "(in_channels, out_channels/groups, kH, kW)", func(x4, w4 *Tensor) (*Tensor, error) {
		return e.convTranspose("conv_transpose2d", x4, w4, b, o)
	})
}

// ConvTranspose1d is PyTorch's conv_transpose1d: x [N, C, L] (or [C, L]),
// w [C, OC/groups, K], b [OC] or nil; o's W entries are used.
func (e *Engine) ConvTranspose1d(x, w, b *Tensor, o ConvTransposeOptions) (*Tensor, error) {
	o.Stride[0], o.Padding[0], o.Dilation[0], o.OutputPadding[0] = 1, 0, 1, 0
	return e.convFamily("conv_transpose1d", x, w, 3, "(in_channels, out_channels/groups, k)", func(x4, w4 *Tensor) (*Tensor, error) {
		return e.convTranspose("conv_transpose1d", x4, w4, b, o)
	})
}

// convTranspose is the transposed convolution of x [N, C, H, W] by w [C,
// OC/groups, KH, KW]: per group, x's pixels as rows of its channels times
// the group's weights as [C/groups, OC/groups·KH·KW] give every pixel's
// output patch, which col2im adds into the output.
func (e *Engine) convTranspose(op string, x, w, b *Tensor, o ConvTransposeOptions) (*Tensor, error) {
	g := o.Groups
	n, ch, h, wid := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	shapes := func() string { return "input " + ShapeString(x.shape) + ", weight " + ShapeString(w.shape) }
	if g < 1 || g > 1<<20 {
		return nil, argErrorf("%s: groups must be >= 1, got %d", op, g)
	}
	if w.shape[0] != ch {
		return nil, shapeErrorf("%s: the weight expects %d input channels, the input has %d (%s)", op, w.shape[0], ch, shapes())
	}
	if ch%g != 0 {
		return nil, shapeErrorf("%s: groups %d must divide the input channels %d (%s)", op, g, ch, shapes())
	}
	oc := w.shape[1] * g
	if b != nil && (b.Dim() != 1 || b.shape[0] != oc) {
		return nil, shapeErrorf("%s: bias of shape %s, expected (%d) for %d output channels", op, ShapeString(b.shape), oc, oc)
	}
	wd := window{k: [2]int{w.shape[2], w.shape[3]}, s: o.Stride, p: o.Padding, d: o.Dilation}
	var out [2]int
	for i, size := range [2]int{h, wid} {
		s, p, d, op2, k := wd.s[i], wd.p[i], wd.d[i], o.OutputPadding[i], wd.k[i]
		if s < 1 || d < 1 || p < 0 || s > 1<<20 || d > 1<<20 || p > 1<<20 {
			return nil, argErrorf("%s: stride %v and dilation %v must be >= 1, padding %v >= 0", op, wd.s, wd.d, wd.p)
		}
		if op2 < 0 || (op2 >= s && op2 >= d) {
			return nil, argErrorf("%s: output_padding %v must be >= 0 and smaller than either the stride %v or the dilation %v", op, o.OutputPadding, wd.s, wd.d)
		}
		// Every term is below 2^41 (sizes and kernels are below 2^31 elements).
		out[i] = (size-1)*s - 2*p + d*(k-1) + op2 + 1
		if out[i] < 1 {
			return nil, shapeErrorf("%s: the output would be %d along %s: padding %v is too large (%s)", op, out[i], [2]string{"H", "W"}[i], wd.p, shapes())
		}
	}
	if _, err := checkShape([]int{n, oc, out[0], out[1]}); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	cg, og, kk := ch/g, oc/g, wd.k[0]*wd.k[1]
	var c chain
	do := c.do
	rows := do(func() (*Tensor, error) { return e.Permute(x, 0, 2, 3, 1) })
	rows = do(func() (*Tensor, error) { return e.Reshape(rows, n*h*wid, ch) })
	parts := make([]*Tensor, 0, g)
	for i := range g {
		xg, wg := rows, w
		if g > 1 {
			xg = do(func() (*Tensor, error) { return e.Narrow(rows, 1, i*cg, cg) })
			wg = do(func() (*Tensor, error) { return e.Narrow(w, 0, i*cg, cg) })
		}
		w2 := do(func() (*Tensor, error) { return e.Reshape(wg, cg, og*kk) })
		cols := do(func() (*Tensor, error) { return e.Matmul(xg, w2) }) // [N*H*W, OCg*KH*KW]
		cols = do(func() (*Tensor, error) { return e.Reshape(cols, n, h, wid, og*kk) })
		parts = append(parts, do(func() (*Tensor, error) { return e.col2im(op, cols, []int{n, og, out[0], out[1]}, wd) }))
	}
	y := parts[0]
	if g > 1 {
		y = do(func() (*Tensor, error) { return e.Cat(parts, 1) })
	}
	if b != nil {
		b3 := do(func() (*Tensor, error) { return e.Reshape(b, oc, 1, 1) })
		y = do(func() (*Tensor, error) { return e.Add(y, b3) })
	}
	return y, c.err
}
