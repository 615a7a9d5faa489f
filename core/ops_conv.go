package core

import (
	"fmt"
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// Convolution and pooling, as PyTorch's conv1d/conv2d, max_pool2d,
// avg_pool2d and adaptive_avg_pool2d. All are built on one
// primitive, im2col: the patches of the input laid out as rows (ggml's
// im2col), whose gradient adds each patch element back where it came from
// (ggml's get_rows_back, by indices worked out here). A convolution is then
// a matrix product per group, a pooling a max or a mean along each patch,
// and their other gradients come from those ops. Every op used runs on the
// CPU and the CUDA backends alike.

// ConvOptions are a convolution's stride, padding and dilation, each
// {along H, along W} (a 1-d convolution uses the W entry), and its groups.
type ConvOptions struct {
	Stride, Padding, Dilation [2]int
	Groups                    int
}

// PoolOptions are a pooling's kernel size, stride, padding and dilation,
// each {along H, along W}, and PyTorch's other pooling options. Their zero
// values are PyTorch's defaults: a zero Dilation is 1, and ExcludePadding
// is PyTorch's count_include_pad=false.
type PoolOptions struct {
	Kernel, Stride, Padding, Dilation [2]int
	// CeilMode rounds the output size up, as PyTorch's ceil_mode: the last
	// window may run past the input (and its right padding), as long as it
	// starts inside the input or the left padding.
	CeilMode bool
	// ExcludePadding (avg_pool2d only) divides each window's sum by the
	// number of its elements inside the input rather than inside the
	// padded input.
	ExcludePadding bool
	// DivisorOverride (avg_pool2d only), when not 0, divides every window's
	// sum by it, as PyTorch's divisor_override.
	DivisorOverride int
}

// window is one im2col layout: the kernel, stride, padding and dilation,
// {H, W}.
type window struct {
	k, s, p, d [2]int
}

// kernel is wd as gglua's CPU kernels take it (ggmlcgo's Window).
func (wd window) kernel() ggmlcgo.Window {
	return ggmlcgo.Window{Kernel: wd.k, Stride: wd.s, Padding: wd.p, Dilation: wd.d}
}

// out is the number of kernel positions along H and W of an h×w input.
func (wd window) out(h, w int) (int, int) {
	f := func(n, i int) int { return (n+2*wd.p[i]-wd.d[i]*(wd.k[i]-1)-1)/wd.s[i] + 1 }
	return f(h, 0), f(w, 1)
}

// check refuses strides, paddings and dilations ggml would reject, and a
// kernel that does not fit in the padded input (x of shape [N, C, H, W]).
func (wd window) check(op string, x *Tensor) error {
	for i := range 2 {
		if wd.s[i] < 1 || wd.d[i] < 1 || wd.p[i] < 0 || wd.k[i] < 1 || wd.s[i] > 1<<20 || wd.d[i] > 1<<20 || wd.p[i] > 1<<20 || wd.k[i] > 1<<20 {
			return argErrorf("%s: stride %v and dilation %v must be >= 1, padding %v >= 0 (kernel %v)", op, wd.s, wd.d, wd.p, wd.k)
		}
	}
	h, w := x.shape[2], x.shape[3]
	if oh, ow := wd.out(h, w); oh < 1 || ow < 1 || h+2*wd.p[0] < wd.d[0]*(wd.k[0]-1)+1 || w+2*wd.p[1] < wd.d[1]*(wd.k[1]-1)+1 {
		return shapeErrorf("%s: kernel %dx%d (dilation %v) is larger than the input %dx%d padded by %v (input shape %s)",
			op, wd.k[0], wd.k[1], wd.d, h, w, wd.p, ShapeString(x.shape))
	}
	return nil
}

// im2col is the patches of x [N, C, H, W]: [N, OH, OW, C*KH*KW], element
// c*KH*KW + kh*KW + kw of a patch being x[n, c, oh*sh + kh*dh - ph, ow*sw +
// kw*dw - pw] (0 in the padding). wd must have been checked.
func (e *Engine) im2col(op string, x *Tensor, wd window) (*Tensor, error) {
	n, ch, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	if _, st := x.layout(); st[3] != 1 || st[2] != int64(w) { // ggml needs packed planes
		var err error
		if x, err = e.Contiguous(x); err != nil {
			return nil, err
		}
	}
	oh, ow := wd.out(h, w)
	kk := wd.k[0] * wd.k[1]
	win := wd.kernel()
	var y *Tensor
	var err error
	if e.backend.IsCPU() && x.Dtype() == ggmlcgo.F32 && win.Fits() && !forceComposedWindows {
		y, err = e.kernelOp(op, []int{n, oh, ow, ch * kk}, []*Tensor{x}, func(c ctx, in []node) (node, error) {
			return c.Im2colCPU(in[0], oh, ow, win)
		})
	} else {
		y, err = e.ggmlIm2col(op, x, wd)
	}
	if err != nil {
		return nil, err
	}
	xshape := x.shape // the tape keeps no value
	e.record(y, op, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.col2im(op, g, xshape, wd)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// ggmlIm2col is im2col by ggml's op (a device's, an f16 input's).
func (e *Engine) ggmlIm2col(op string, x *Tensor, wd window) (*Tensor, error) {
	n, ch, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	oh, ow := wd.out(h, w)
	kk := wd.k[0] * wd.k[1]
	params := ggmlcgo.Im2colParams{
		Kernel: [2]int{wd.k[1], wd.k[0]}, Stride: [2]int{wd.s[1], wd.s[0]},
		Padding: [2]int{wd.p[1], wd.p[0]}, Dilation: [2]int{wd.d[1], wd.d[0]},
	}
	return e.newOp(op, []int{n, oh, ow, ch * kk}, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		// ggml reads only the kernel's shape, but the kernel is an operand
		// and must have memory: a small computed tensor of that shape.
		b := e.nodes(c)
		kernel := b.reshape(b.set(c.Arange(0, float32(kk*ch), 1)), [4]int64{int64(wd.k[1]), int64(wd.k[0]), int64(ch), 1})
		if b.err != nil {
			return node{}, b.err
		}
		return c.Im2col(kernel, in[0], params)
	})
}

// col2im is im2col's adjoint, and its gradient: patches g [N, OH, OW,
// C*KH*KW] added into a zero [N, C, H, W] where im2col takes them from
// (a transposed convolution's last step). Its own gradient is im2col's
// patches of the gradient, the first OH×OW positions of them.
func (e *Engine) col2im(op string, g *Tensor, shape []int, wd window) (*Tensor, error) {
	var y *Tensor
	if err := e.NoGrad(func() (err error) { y, err = e.scatterPatches(op, g, shape, wd); return err }); err != nil {
		return nil, err
	}
	oh, ow := g.shape[1], g.shape[2]
	e.record(y, op, []*Tensor{g}, func(gy *Tensor) ([]*Tensor, error) {
		var c chain
		gc := c.do(func() (*Tensor, error) { return e.im2col(op, gy, wd) })
		if c.err == nil && (gc.shape[1] != oh || gc.shape[2] != ow) { // a transposed convolution's output padding
			gc = c.do(func() (*Tensor, error) { return e.Narrow(gc, 1, 0, oh) })
			gc = c.do(func() (*Tensor, error) { return e.Narrow(gc, 2, 0, ow) })
		}
		return []*Tensor{gc}, c.err
	})
	return y, nil
}

// scatterPatches computes col2im. Each patch element is a row of C values
// of g (after moving C last) that lands on one pixel of the padded input,
// laid out as rows of C too: one get_rows_back, then the padding cut off
// and C moved back.
func (e *Engine) scatterPatches(op string, g *Tensor, shape []int, wd window) (*Tensor, error) {
	n, ch, h, w := shape[0], shape[1], shape[2], shape[3]
	oh, ow := g.shape[1], g.shape[2]
	win := wd.kernel()
	if e.backend.IsCPU() && g.Dtype() == ggmlcgo.F32 && win.Fits() && !forceComposedWindows {
		return e.kernelOp(op+"_back", shape, []*Tensor{g}, func(c ctx, in []node) (node, error) {
			return c.Col2imCPU(in[0], ch, h, w, win)
		})
	}
	// Elsewhere (a device): the patches' elements moved kernel position
	// first, one contiguous [N·C, OH, OW] block each, and each block added
	// into a zero padded output through a strided view (ggml_acc: the
	// view's W stride is the convolution's, its rows stride·width apart),
	// then the padding cut off. The buffer is large enough that no element
	// outside a view's positions decomposes into one of them (ggml-cuda's
	// acc finds each destination's source by division).
	kk, planes, p := int64(wd.k[0]*wd.k[1]), int64(n*ch), int64(oh*ow)
	hb := int64((wd.k[0]-1)*wd.d[0] + oh*wd.s[0] + 1)
	wb := int64((wd.k[1]-1)*wd.d[1] + ow*wd.s[1] + 1)
	hb, wb = max(hb, int64(h+2*wd.p[0])), max(wb, int64(w+2*wd.p[1]))
	const f32 = 4
	return e.newOp(op+"_back", shape, []*Tensor{g}, func(c ctx, in []node) (node, error) {
		gp, err := e.packed(c, in[0])
		var blocks, out node
		if err == nil { // (C·KK, OW, OH, N) -> (P, C, N, KK)
			gp, err = c.ReshapeView(gp, [4]int64{kk, int64(ch), p, int64(n)})
		}
		if err == nil {
			blocks, err = c.Permute(gp, [4]int{3, 1, 0, 2})
		}
		if err == nil {
			out, err = template(c, []int{int(planes), int(hb), int(wb)})
		}
		if err == nil {
			out, err = c.Fill(out, 0)
		}
		for i := 0; i < wd.k[0] && err == nil; i++ {
			for j := 0; j < wd.k[1] && err == nil; j++ {
				k := int64(i*wd.k[1] + j)
				var blk node
				blk, err = c.View(blocks, [4]int64{1, int64(ow), int64(oh), planes}, [3]int64{f32, f32 * int64(ow), f32 * p}, f32*k*p*planes)
				if err == nil {
					nb := [3]int64{f32 * int64(wd.s[1]), f32 * int64(wd.s[0]) * wb, f32 * hb * wb}
					out, err = c.Acc(out, blk, nb, f32*(int64(i*wd.d[0])*wb+int64(j*wd.d[1])))
				}
			}
		}
		if err == nil { // the padding cut off: (W, H, C, N)
			out, err = c.View(out, ne4(shape), [3]int64{f32 * wb, f32 * wb * hb, f32 * wb * hb * int64(ch)}, f32*(int64(wd.p[0])*wb+int64(wd.p[1])))
		}
		if err != nil {
			return node{}, err
		}
		return c.Cont(out)
	})
}

// batched gives a 3-d (unbatched) x a batch of 1, as PyTorch accepts; undo
// reshapes a result back.
func (e *Engine) batched(op string, x *Tensor, dims int, what string) (*Tensor, func(*Tensor, error) (*Tensor, error), error) {
	same := func(y *Tensor, err error) (*Tensor, error) { return y, err }
	switch x.Dim() {
	case dims:
		return x, same, nil
	case dims - 1:
		b, err := e.Reshape(x, append([]int{1}, x.shape...)...)
		undo := func(y *Tensor, err error) (*Tensor, error) {
			if err != nil {
				return nil, err
			}
			return e.Reshape(y, y.shape[1:]...)
		}
		return b, undo, err
	}
	return nil, nil, shapeErrorf("%s: input of shape %s, expected %s", op, ShapeString(x.shape), what)
}

// Conv2d is PyTorch's conv2d: x [N, C, H, W] (or [C, H, W]), w [OC,
// C/groups, KH, KW], b [OC] or nil.
func (e *Engine) Conv2d(x, w, b *Tensor, o ConvOptions) (*Tensor, error) {
	return e.convFamily("conv2d", x, w, 4, "(out_channels, in_channels/groups, kH, kW)", func(x4, w4 *Tensor) (*Tensor, error) {
		return e.conv("conv2d", x4, w4, b, o)
	})
}

// Conv1d is PyTorch's conv1d: x [N, C, L] (or [C, L]), w [OC, C/groups,
// K], b [OC] or nil; o's W entries are used.
func (e *Engine) Conv1d(x, w, b *Tensor, o ConvOptions) (*Tensor, error) {
	o.Stride[0], o.Padding[0], o.Dilation[0] = 1, 0, 1
	return e.convFamily("conv1d", x, w, 3, "(out_channels, in_channels/groups, k)", func(x4, w4 *Tensor) (*Tensor, error) {
		return e.conv("conv1d", x4, w4, b, o)
	})
}

// convFamily runs one of the convolutions, run, on x and w as 4-d
// tensors: an unbatched x gets a batch of 1 (taken off the result again),
// w must have dims dims (its layout in the message, weight), and a 1-d op
// (dims 3) runs as a 2-d one of height 1.
func (e *Engine) convFamily(op string, x, w *Tensor, dims int, weight string, run func(x4, w4 *Tensor) (*Tensor, error)) (*Tensor, error) {
	what := "(N, C, H, W) or (C, H, W)"
	if dims == 3 {
		what = "(N, C, L) or (C, L)"
	}
	xb, undo, err := e.batched(op, x, dims, what)
	if err != nil {
		return nil, err
	}
	if w.Dim() != dims {
		return nil, shapeErrorf("%s: weight of shape %s, expected %s", op, ShapeString(w.shape), weight)
	}
	if dims == 4 {
		return undo(run(xb, w))
	}
	var c chain
	x4 := c.do(func() (*Tensor, error) { return e.Reshape(xb, xb.shape[0], xb.shape[1], 1, xb.shape[2]) })
	w4 := c.do(func() (*Tensor, error) { return e.Reshape(w, w.shape[0], w.shape[1], 1, w.shape[2]) })
	y := c.do(func() (*Tensor, error) { return run(x4, w4) })
	y = c.do(func() (*Tensor, error) { return e.Reshape(y, y.shape[0], y.shape[1], y.shape[3]) })
	return undo(y, c.err)
}

// conv is the convolution of x [N, C, H, W] by w [OC, C/groups, KH, KW]:
// per group, the patches of its channels times its filters (one matrix
// product), the groups joined along the channels, plus the bias.
func (e *Engine) conv(op string, x, w, b *Tensor, o ConvOptions) (*Tensor, error) {
	g := o.Groups
	n, ch := x.shape[0], x.shape[1]
	oc := w.shape[0]
	shapes := func() string { return "input " + ShapeString(x.shape) + ", weight " + ShapeString(w.shape) }
	if g < 1 || g > 1<<20 {
		return nil, argErrorf("%s: groups must be >= 1, got %d", op, g)
	}
	if ch%g != 0 || oc%g != 0 {
		return nil, shapeErrorf("%s: groups %d must divide both the input channels %d and the output channels %d (%s)", op, g, ch, oc, shapes())
	}
	if w.shape[1]*g != ch {
		return nil, shapeErrorf("%s: the weight expects %d input channels (%d per group, groups %d), the input has %d (%s)", op, w.shape[1]*g, w.shape[1], g, ch, shapes())
	}
	if b != nil && (b.Dim() != 1 || b.shape[0] != oc) {
		return nil, shapeErrorf("%s: bias of shape %s, expected (%d) for %d output channels", op, ShapeString(b.shape), oc, oc)
	}
	wd := window{k: [2]int{w.shape[2], w.shape[3]}, s: o.Stride, p: o.Padding, d: o.Dilation}
	if err := wd.check(op, x); err != nil {
		return nil, err
	}
	oh, ow := wd.out(x.shape[2], x.shape[3])
	cg, og, kk := ch/g, oc/g, wd.k[0]*wd.k[1]
	var c chain
	do := c.do
	win := wd.kernel()
	blasFits := win.Fits() && oh*ow*ch*kk <= 1<<30 && oc*oh*ow <= 1<<30 && ch*x.shape[2]*x.shape[3] <= 1<<30
	if g == 1 && e.useBLAS && e.autocast == ggmlcgo.F32 && x.Dtype() == ggmlcgo.F32 && w.Dtype() == ggmlcgo.F32 && blasFits && !forceComposedWindows {
		w2 := do(func() (*Tensor, error) { return e.Reshape(w, oc, ch*kk) })
		return do(func() (*Tensor, error) { return e.convBLAS(op, x, w2, b, wd) }), c.err
	}
	parts := make([]*Tensor, 0, g)
	for i := range g {
		xg, wg := x, w
		if g > 1 {
			xg = do(func() (*Tensor, error) { return e.Narrow(x, 1, i*cg, cg) })
			wg = do(func() (*Tensor, error) { return e.Narrow(w, 0, i*og, og) })
		}
		cols := do(func() (*Tensor, error) { return e.im2col(op, xg, wd) })
		cols = do(func() (*Tensor, error) { return e.Reshape(cols, n*oh*ow, cg*kk) })
		w2 := do(func() (*Tensor, error) { return e.Reshape(wg, og, cg*kk) })
		parts = append(parts, do(func() (*Tensor, error) { return e.Linear(cols, w2) })) // [N*OH*OW, OCg]
	}
	y := parts[0]
	if g > 1 {
		y = do(func() (*Tensor, error) { return e.Cat(parts, 1) })
	}
	if b != nil {
		y = do(func() (*Tensor, error) { return e.Add(y, b) })
	}
	y = do(func() (*Tensor, error) { return e.Reshape(y, n, oh, ow, oc) })
	y = do(func() (*Tensor, error) { return e.Permute(y, 0, 3, 1, 2) })
	y = do(func() (*Tensor, error) { return e.Contiguous(y) })
	return y, c.err
}

// convBLAS is a convolution on the CPU with OpenBLAS, image by image
// (ggmlcgo.ConvCPU): x [N, C, H, W] by w [OC, C·KH·KW] into [N, OC, OH,
// OW], plus the bias b [OC] (or nil). Each image's patches live in a
// thread's scratch block only, so the tape keeps x (for w's gradient) and
// w (for x's), each only where the other's gradient is wanted, and never
// the patches of the batch.
func (e *Engine) convBLAS(op string, x, w, b *Tensor, wd window) (*Tensor, error) {
	win := wd.kernel()
	n, oc, k := x.shape[0], w.shape[0], w.shape[1]
	oh, ow := wd.out(x.shape[2], x.shape[3])
	threads := max(1, e.backend.Threads())
	run := func(name string, mode ggmlcgo.ConvMode, shape []int, in ...*Tensor) (*Tensor, error) {
		// A scratch block for each thread that has work: the weight's
		// gradient splits the input channels, the others the images.
		blocks := min(threads, n)
		if mode == ggmlcgo.ConvWeightGrad {
			blocks = min(threads, x.shape[1])
		}
		return e.kernelOp(name, shape, in, func(c ctx, in []node) (node, error) {
			scratch, err := template(c, []int{blocks, oh * ow * k})
			if err != nil {
				return node{}, err
			}
			var bias node
			if len(in) > 2 {
				bias = in[2]
			}
			return c.ConvCPU(mode, in[0], in[1], scratch, bias, ne4(shape), win)
		})
	}
	inputs := []*Tensor{x, w}
	if b != nil { // [OC]: conv checked it
		inputs = append(inputs, b)
	}
	y, err := run(op, ggmlcgo.ConvForward, []int{n, oc, oh, ow}, inputs...)
	if err != nil {
		return nil, err
	}
	needB := b != nil && b.requiresGrad
	needW, needX, wShape, xShape := w.requiresGrad, x.requiresGrad, w.shape, x.shape
	xSaved, wSaved := x, w // each only where the other's gradient reads it
	if !needW {
		xSaved = nil
	}
	if !needX {
		wSaved = nil
	}
	e.record(y, op, inputs, func(g *Tensor) ([]*Tensor, error) {
		var gw, gx, gb *Tensor
		var c chain
		if needB { // each image's positions summed, then the images
			gb = c.do(func() (*Tensor, error) { return e.SumDim(g, 3, false) })
			gb = c.do(func() (*Tensor, error) { return e.SumDim(gb, 2, false) })
			gb = c.do(func() (*Tensor, error) { return e.SumDim(gb, 0, false) })
		}
		if needW {
			gw = c.do(func() (*Tensor, error) { return run(op+"_back", ggmlcgo.ConvWeightGrad, wShape, g, xSaved) })
		}
		if needX {
			gx = c.do(func() (*Tensor, error) { return run(op+"_back", ggmlcgo.ConvInputGrad, xShape, g, wSaved) })
		}
		grads := []*Tensor{gx, gw}
		if len(inputs) > 2 {
			grads = append(grads, gb)
		}
		return grads, c.err
	})
	return y, nil
}

// MaxPool2d is PyTorch's max_pool2d of x [N, C, H, W] (or [C, H, W]),
// dilation and ceil_mode included: the padding is -inf, a NaN is the
// maximum, the gradient goes to the selected element, the first of ties.
func (e *Engine) MaxPool2d(x *Tensor, o PoolOptions) (*Tensor, error) {
	if o.ExcludePadding || o.DivisorOverride != 0 {
		return nil, argErrorf("max_pool2d: count_include_pad and divisor_override are average pooling's options")
	}
	return e.pool("max_pool2d", x, o)
}

// AvgPool2d is PyTorch's avg_pool2d, ceil_mode, count_include_pad and
// divisor_override included: each window's sum (the padding counting as
// zeros) divided by the window's size clipped to the padded input, by its
// elements inside the input (ExcludePadding), or by DivisorOverride.
func (e *Engine) AvgPool2d(x *Tensor, o PoolOptions) (*Tensor, error) {
	if o.Dilation != [2]int{} && o.Dilation != [2]int{1, 1} {
		return nil, argErrorf("avg_pool2d: average pooling has no dilation (got %v), as PyTorch's", o.Dilation)
	}
	if o.DivisorOverride < 0 || o.DivisorOverride > 1<<30 {
		return nil, argErrorf("avg_pool2d: divisor_override must be a positive integer, got %d", o.DivisorOverride)
	}
	return e.pool("avg_pool2d", x, o)
}

// MaxPool1d and AvgPool1d are PyTorch's max_pool1d and avg_pool1d of x
// [N, C, L] (or [C, L]): the 2-d pooling of [N, C, 1, L], o's W entries
// being used.
func (e *Engine) MaxPool1d(x *Tensor, o PoolOptions) (*Tensor, error) {
	return e.pool1d("max_pool1d", x, o, e.MaxPool2d)
}

func (e *Engine) AvgPool1d(x *Tensor, o PoolOptions) (*Tensor, error) {
	return e.pool1d("avg_pool1d", x, o, e.AvgPool2d)
}

func (e *Engine) pool1d(op string, x *Tensor, o PoolOptions, pool2d func(*Tensor, PoolOptions) (*Tensor, error)) (*Tensor, error) {
	x3, undo, err := e.batched(op, x, 3, "(N, C, L) or (C, L)")
	if err != nil {
		return nil, err
	}
	o.Kernel[0], o.Stride[0], o.Padding[0], o.Dilation[0] = 1, 1, 0, 1
	if o.Dilation[1] == 0 {
		o.Dilation[1] = 1
	}
	var c chain
	x4 := c.do(func() (*Tensor, error) { return e.Reshape(x3, x3.shape[0], x3.shape[1], 1, x3.shape[2]) })
	y := c.do(func() (*Tensor, error) {
		y, err := pool2d(x4, o)
		if err != nil { // name the 1-d op
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return y, nil
	})
	y = c.do(func() (*Tensor, error) { return e.Reshape(y, y.shape[0], y.shape[1], y.shape[3]) })
	return undo(y, c.err)
}

// AdaptiveAvgPool2d averages x [N, C, H, W] (or [C, H, W]) down to out =
// {OH, OW}; H and W must be multiples of OH and OW (windows of one size).
func (e *Engine) AdaptiveAvgPool2d(x *Tensor, out [2]int) (*Tensor, error) {
	if x.Dim() != 3 && x.Dim() != 4 {
		return nil, shapeErrorf("adaptive_avg_pool2d: input of shape %s, expected (N, C, H, W) or (C, H, W)", ShapeString(x.shape))
	}
	h, w := x.shape[x.Dim()-2], x.shape[x.Dim()-1]
	if out[0] < 1 || out[1] < 1 {
		return nil, argErrorf("adaptive_avg_pool2d: output size %v must be positive", out)
	}
	if h%out[0] != 0 || w%out[1] != 0 {
		return nil, shapeErrorf("adaptive_avg_pool2d: input size %dx%d (shape %s) is not a multiple of the output size %dx%d; only that case is supported",
			h, w, ShapeString(x.shape), out[0], out[1])
	}
	k := [2]int{h / out[0], w / out[1]}
	return e.pool("adaptive_avg_pool2d", x, PoolOptions{Kernel: k, Stride: k})
}

// poolSize is PyTorch's pooling_output_shape along one dim: in ceil mode
// the size rounds up, but a last window that would start past the input
// and its left padding is dropped.
func poolSize(in, k, s, p, d int, ceil bool) int {
	span := in + 2*p - d*(k-1) - 1
	if ceil {
		span += s - 1
	}
	n := floorDiv(span, s) + 1
	if ceil && (n-1)*s >= in+p {
		n--
	}
	return n
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// pool pools x: the patches of im2col, reduced by a max or a sum. In ceil
// mode the last windows may run past the padded input: the input is then
// extended by zeros at the bottom and the right so that im2col (which
// rounds down) makes them, and the elements outside the input are -inf
// for a max and left out of the divisor of a mean.
func (e *Engine) pool(op string, x *Tensor, o PoolOptions) (*Tensor, error) {
	x4, undo, err := e.batched(op, x, 4, "(N, C, H, W) or (C, H, W)")
	if err != nil {
		return nil, err
	}
	if o.Dilation == [2]int{} {
		o.Dilation = [2]int{1, 1}
	}
	wd := window{k: o.Kernel, s: o.Stride, p: o.Padding, d: o.Dilation}
	for i := range 2 {
		if wd.s[i] < 1 || wd.d[i] < 1 || wd.p[i] < 0 || wd.k[i] < 1 || wd.s[i] > 1<<20 || wd.d[i] > 1<<20 || wd.k[i] > 1<<20 {
			return nil, argErrorf("%s: kernel %v, stride %v and dilation %v must be >= 1, padding %v >= 0", op, wd.k, wd.s, wd.d, wd.p)
		}
		if 2*wd.p[i] > wd.k[i] {
			return nil, argErrorf("%s: padding %v must be at most half the kernel size %v", op, o.Padding, o.Kernel)
		}
	}
	n, ch, h, w := x4.shape[0], x4.shape[1], x4.shape[2], x4.shape[3]
	oh := poolSize(h, wd.k[0], wd.s[0], wd.p[0], wd.d[0], o.CeilMode)
	ow := poolSize(w, wd.k[1], wd.s[1], wd.p[1], wd.d[1], o.CeilMode)
	if oh < 1 || ow < 1 {
		return nil, shapeErrorf("%s: kernel %dx%d (dilation %v) is larger than the input %dx%d padded by %v (input shape %s): the output would be %dx%d",
			op, wd.k[0], wd.k[1], wd.d, h, w, wd.p, ShapeString(x4.shape), oh, ow)
	}
	pw := wd.kernel()
	if op == "max_pool2d" && e.backend.IsCPU() && x4.Dtype() == ggmlcgo.F32 && pw.Fits() && !forceComposedWindows {
		return undo(e.maxPoolCPU(x4, oh, ow, pw))
	}
	// extra[i] is how far the last window runs past the padded input.
	var extra [2]int
	for i, size := range [2]int{oh, ow} {
		in := x4.shape[2+i]
		extra[i] = max(0, (size-1)*wd.s[i]+wd.d[i]*(wd.k[i]-1)+1-(in+2*wd.p[i]))
	}
	kk := wd.k[0] * wd.k[1]
	var c chain
	do := c.do
	xe := x4
	for i, more := range extra {
		if more == 0 {
			continue
		}
		shape := xe.Shape()
		shape[2+i] = more
		xe = do(func() (*Tensor, error) {
			z, err := Zeros(shape...)
			if err != nil {
				return nil, err
			}
			return e.Cat([]*Tensor{xe, z}, 2+i)
		})
	}
	cols := do(func() (*Tensor, error) { return e.im2col(op, xe, wd) })
	cols = do(func() (*Tensor, error) { return e.Reshape(cols, n, oh*ow, ch, kk) })
	var y *Tensor
	if op == "max_pool2d" {
		if wd.p != [2]int{} || extra != [2]int{} {
			pen := do(func() (*Tensor, error) { return FromFloat32(padPenalty(h, w, oh, ow, wd), 1, oh*ow, 1, kk) })
			cols = do(func() (*Tensor, error) { return e.Add(cols, pen) })
		}
		y = do(func() (*Tensor, error) {
			v, _, err := e.MaxDim(cols, -1, false)
			return v, err
		})
	} else {
		y = do(func() (*Tensor, error) { return e.SumDim(cols, -1, false) })
		inv, uniform := avgScale(h, w, oh, ow, wd, o)
		if uniform {
			y = do(func() (*Tensor, error) { return e.Scale(y, inv[0]) })
		} else {
			scale := do(func() (*Tensor, error) { return FromFloat32(inv, 1, oh*ow, 1) })
			y = do(func() (*Tensor, error) { return e.Mul(y, scale) })
		}
	}
	y = do(func() (*Tensor, error) { return e.Reshape(y, n, oh, ow, ch) })
	y = do(func() (*Tensor, error) { return e.Permute(y, 0, 3, 1, 2) })
	y = do(func() (*Tensor, error) { return e.Contiguous(y) })
	return undo(y, c.err)
}

// forceComposedWindows makes max_pool2d, im2col and col2im compose ggml's ops on
// the CPU too (as on a device), so that tests can compare the two.
var forceComposedWindows bool

// maxPoolCPU is max_pool2d of x [N, C, H, W] by gglua's CPU kernel
// (ggmlcgo.MaxPoolCPU), and its gradient by the kernel's other half, which
// reads the input again (the tape keeps x, not indices).
func (e *Engine) maxPoolCPU(x *Tensor, oh, ow int, pw ggmlcgo.Window) (*Tensor, error) {
	const op = "max_pool2d"
	y, err := e.kernelOp(op, []int{x.shape[0], x.shape[1], oh, ow}, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		return c.MaxPoolCPU(in[0], oh, ow, pw)
	})
	if err != nil {
		return nil, err
	}
	e.record(y, op, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.kernelOp(op+"_back", x.shape, []*Tensor{g, x}, func(c ctx, in []node) (node, error) {
			return c.MaxPoolBackCPU(in[0], in[1], pw)
		})
		return []*Tensor{gx}, err
	})
	return y, nil
}

// padPenalty is, for each of the oh×ow window positions and kernel
// element, -inf where the element falls outside the h×w input (in the
// padding, or past it in ceil mode) and 0 inside: added to the patches, it
// makes those elements -inf for a max.
func padPenalty(h, w, oh, ow int, wd window) []float32 {
	out := make([]float32, 0, oh*ow*wd.k[0]*wd.k[1])
	inf := float32(math.Inf(-1))
	for y := range oh {
		for x := range ow {
			for i := range wd.k[0] {
				for j := range wd.k[1] {
					iy, ix := y*wd.s[0]+i*wd.d[0]-wd.p[0], x*wd.s[1]+j*wd.d[1]-wd.p[1]
					v := float32(0)
					if iy < 0 || iy >= h || ix < 0 || ix >= w {
						v = inf
					}
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// avgScale is 1/divisor for each of the oh×ow windows of an average
// pooling, by PyTorch's rule: divisor_override if set; otherwise the
// window's size once clipped to the padded input (count_include_pad), or
// to the input itself (ExcludePadding). uniform reports that every window
// has the same divisor.
func avgScale(h, w, oh, ow int, wd window, o PoolOptions) (inv []float32, uniform bool) {
	// span is a window's extent along one dim: clipped to the padded input,
	// and to the input.
	span := func(pos, i, in int) (padded, inside int) {
		start := pos*wd.s[i] - wd.p[i]
		end := min(start+wd.k[i], in+wd.p[i])
		padded = end - start
		return padded, min(end, in) - max(start, 0)
	}
	inv = make([]float32, 0, oh*ow)
	uniform = true
	for y := range oh {
		ph, ih := span(y, 0, h)
		for x := range ow {
			pw, iw := span(x, 1, w)
			d := ph * pw
			switch {
			case o.DivisorOverride != 0:
				d = o.DivisorOverride
			case o.ExcludePadding:
				d = ih * iw
			}
			v := float32(1 / float64(d))
			uniform = uniform && (len(inv) == 0 || v == inv[0])
			inv = append(inv, v)
		}
	}
	return inv, uniform
}
