package core

import (
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// Elementwise ops: y = f(x) or y = f(a, b) with PyTorch broadcasting, each
// op's forward and gradient side by side. Gradients are built from ops too,
// so backward runs on the device in the same graph as the forward.

// unaryOp is y = f(x), elementwise, with dx = bwd(g, x, y). saves says
// which of x (savesA) and y (savesOut) bwd reads: the tape keeps those
// alone, as PyTorch saves them, and bwd gets nil for the other (g has
// their shape).
func (e *Engine) unaryOp(name string, x *Tensor, saves int, f func(c ctx, a node) (node, error), bwd func(g, x, y *Tensor) (*Tensor, error)) (*Tensor, error) {
	y, err := e.newOp(name, x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return f(c, in[0]) })
	if err != nil || !e.recording() {
		return y, err
	}
	var sx, sy *Tensor
	if saves&savesA != 0 {
		sx = x
	}
	if saves&savesOut != 0 {
		sy = y
	}
	e.record(y, name, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := bwd(g, sx, sy)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// elementwise is a unary op whose forward is the ggml op of the same name
// (listed in ggmlcgo's gglua_ggml.h).
func (e *Engine) elementwise(name string, x *Tensor, saves int, bwd func(g, x, y *Tensor) (*Tensor, error)) (*Tensor, error) {
	return e.unaryOp(name, x, saves, ggmlUnary(name), bwd)
}

// ggmlUnary builds the node of ggml's elementwise op name.
func ggmlUnary(name string) func(c ctx, a node) (node, error) {
	return func(c ctx, a node) (node, error) { return c.Unary(name, a) }
}

// The operands a binary op's gradient reads (binaryOp's saves): the tape
// keeps those alone, as PyTorch saves them; bwd gets nil for the others.
const (
	savesA = 1 << iota
	savesB
	savesOut
)

// binaryOp is out = f(a, b) with PyTorch broadcasting; bwd returns the
// gradients at the broadcast shape, which are then summed down to each
// operand's shape. saves says which of a, b and out bwd reads, given which
// operands need a gradient (needA, needB: as the forward found them, as
// the tape recorded them, whatever requires_grad says later).
func (e *Engine) binaryOp(name string, a, b *Tensor, saves int, f func(c ctx, x, y node) (node, error), bwd func(g, a, b, out *Tensor, needA, needB bool) (*Tensor, *Tensor, error)) (*Tensor, error) {
	shape, err := broadcastShape(name, a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	out, err := e.newOp(name, shape, []*Tensor{a, b}, func(c ctx, in []node) (node, error) {
		x, y := in[0], in[1]
		var err error
		if !sameShape(a.shape, shape) { // ggml broadcasts only its second operand
			if x, err = c.Repeat(x, ne4(shape)); err != nil {
				return node{}, err
			}
		}
		return f(c, x, y)
	})
	if err != nil {
		return nil, err
	}
	if !e.recording() {
		return out, nil
	}
	var sa, sb, so *Tensor
	if saves&savesA != 0 {
		sa = a
	}
	if saves&savesB != 0 {
		sb = b
	}
	if saves&savesOut != 0 {
		so = out
	}
	needA, needB := a.requiresGrad, b.requiresGrad
	aShape, bShape := a.shape, b.shape
	e.record(out, name, []*Tensor{a, b}, func(g *Tensor) ([]*Tensor, error) {
		ga, gb, err := bwd(g, sa, sb, so, needA, needB)
		if err != nil {
			return nil, err
		}
		if !needA {
			ga = nil
		} else if ga, err = e.sumTo(ga, aShape); err != nil {
			return nil, err
		}
		if !needB {
			gb = nil
		} else if gb, err = e.sumTo(gb, bShape); err != nil {
			return nil, err
		}
		return []*Tensor{ga, gb}, nil
	})
	return out, nil
}

// constOp is f(x) computed without recording: masks and derivatives used
// inside gradients, which are themselves not differentiated.
func (e *Engine) constOp(name string, x *Tensor, f func(c ctx, a node) (node, error)) (*Tensor, error) {
	return e.newOp(name, x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return f(c, in[0]) })
}

// fillLike is a tensor of x's shape holding v, made on the device (no upload).
func (e *Engine) fillLike(x *Tensor, v float32) (*Tensor, error) {
	return e.constOp("fill", x, func(c ctx, a node) (node, error) { return c.Fill(a, v) })
}

// ---- binary ----

// Add is a + b.
func (e *Engine) Add(a, b *Tensor) (*Tensor, error) {
	return e.binaryOp("add", a, b, 0, ctx.Add, func(g, a, b, out *Tensor, _, _ bool) (*Tensor, *Tensor, error) { return g, g, nil })
}

// Sub is a - b.
func (e *Engine) Sub(a, b *Tensor) (*Tensor, error) {
	return e.binaryOp("sub", a, b, 0, ctx.Sub, func(g, a, b, out *Tensor, _, needB bool) (*Tensor, *Tensor, error) {
		if !needB {
			return g, nil, nil
		}
		nb, err := e.Neg(g)
		return g, nb, err
	})
}

// Mul is a * b, elementwise.
func (e *Engine) Mul(a, b *Tensor) (*Tensor, error) {
	saves := 0
	if a.requiresGrad {
		saves |= savesB
	}
	if b.requiresGrad {
		saves |= savesA
	}
	return e.binaryOp("mul", a, b, saves, ctx.Mul, func(g, a, b, out *Tensor, needA, needB bool) (ga, gb *Tensor, err error) {
		if needA {
			if ga, err = e.Mul(g, b); err != nil {
				return nil, nil, err
			}
		}
		if needB {
			gb, err = e.Mul(g, a)
		}
		return ga, gb, err
	})
}

// Div is a / b, elementwise.
func (e *Engine) Div(a, b *Tensor) (*Tensor, error) {
	saves := savesB
	if b.requiresGrad {
		saves |= savesOut
	}
	return e.binaryOp("div", a, b, saves, ctx.Div, func(g, a, b, out *Tensor, needA, needB bool) (ga, gb *Tensor, err error) {
		if needA {
			if ga, err = e.Div(g, b); err != nil { // d/da = 1/b
				return nil, nil, err
			}
		}
		if !needB {
			return ga, nil, nil
		}
		q, err := e.Div(out, b) // d/db = -a/b^2 = -out/b
		if err != nil {
			return nil, nil, err
		}
		if gb, err = e.Mul(g, q); err != nil {
			return nil, nil, err
		}
		gb, err = e.Neg(gb)
		return ga, gb, err
	})
}

// ---- with a number ----

// Scale is x * s for a number s.
func (e *Engine) Scale(x *Tensor, s float32) (*Tensor, error) {
	return e.unaryOp("scale", x, 0, func(c ctx, a node) (node, error) { return c.Scale(a, s) },
		func(g, x, y *Tensor) (*Tensor, error) { return e.Scale(g, s) })
}

// AddScalar is x + s for a number s.
func (e *Engine) AddScalar(x *Tensor, s float32) (*Tensor, error) {
	return e.unaryOp("add", x, 0, func(c ctx, a node) (node, error) { return c.ScaleBias(a, 1, s) },
		func(g, x, y *Tensor) (*Tensor, error) { return g, nil })
}

// axpby is a*x + b*y.
func (e *Engine) axpby(a float32, x *Tensor, b float32, y *Tensor) (*Tensor, error) {
	sx, err := e.Scale(x, a)
	if err != nil {
		return nil, err
	}
	sy, err := e.Scale(y, b)
	if err != nil {
		return nil, err
	}
	return e.Add(sx, sy)
}

// ---- unary ----

// Neg is -x.
func (e *Engine) Neg(x *Tensor) (*Tensor, error) { return e.Scale(x, -1) }

// Exp is e^x.
func (e *Engine) Exp(x *Tensor) (*Tensor, error) {
	return e.elementwise("exp", x, savesOut, func(g, x, y *Tensor) (*Tensor, error) { return e.Mul(g, y) })
}

// Expm1 is e^x - 1, exact for small x; its gradient is e^x = y + 1.
func (e *Engine) Expm1(x *Tensor) (*Tensor, error) {
	return e.elementwise("expm1", x, savesOut, func(g, x, y *Tensor) (*Tensor, error) {
		ey, err := e.AddScalar(y, 1)
		if err != nil {
			return nil, err
		}
		return e.Mul(g, ey)
	})
}

// Log is the natural logarithm.
func (e *Engine) Log(x *Tensor) (*Tensor, error) {
	return e.elementwise("log", x, savesA, func(g, x, y *Tensor) (*Tensor, error) { return e.Div(g, x) })
}

// Sqrt is the square root.
func (e *Engine) Sqrt(x *Tensor) (*Tensor, error) {
	return e.elementwise("sqrt", x, savesOut, func(g, x, y *Tensor) (*Tensor, error) {
		h, err := e.Div(g, y)
		if err != nil {
			return nil, err
		}
		return e.Scale(h, 0.5)
	})
}

// Abs is |x|; its gradient is sign(x): 0 at 0 and at NaN, as in PyTorch.
func (e *Engine) Abs(x *Tensor) (*Tensor, error) {
	return e.elementwise("abs", x, savesA, func(g, x, y *Tensor) (*Tensor, error) {
		s, err := e.constOp("sgn", x, ggmlUnary("sgn"))
		if err != nil {
			return nil, err
		}
		return e.Mul(g, s)
	})
}

// Clamp limits x to [lo, hi] (either may be infinite); NaN stays NaN. The
// gradient passes where lo <= x <= hi, the ends included, and is 0 outside
// and at NaN, as in PyTorch.
func (e *Engine) Clamp(x *Tensor, lo, hi float32) (*Tensor, error) {
	if lo != lo || hi != hi {
		return nil, argErrorf("clamp: a bound is NaN (min %g, max %g)", lo, hi)
	}
	if lo > hi {
		return nil, argErrorf("clamp: min %g is greater than max %g", lo, hi)
	}
	return e.unaryOp("clamp", x, savesA, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		y := b.nanWhere(a, b.clamp(a, lo, hi))
		return y, b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		mask, err := e.build("clamp_mask", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			// 1 - step(lo - x) - step(x - hi): 1 inside [lo, hi], ends
			// included, and at NaN; times notNaN.
			below := b.unary("step", b.scaleBias(in[0], -1, lo))
			above := b.unary("step", b.scaleBias(in[0], 1, -hi))
			inside := b.scaleBias(b.add(below, above), -1, 1)
			return b.mul(inside, b.notNaN(in[0]))
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, mask)
	})
}

// ---- activations ----

// Relu is max(x, 0); NaN stays NaN. Its gradient is 0 where x <= 0 and
// passes elsewhere, NaN included, as in PyTorch.
func (e *Engine) Relu(x *Tensor) (*Tensor, error) {
	// The gradient reads the result, as PyTorch's does (threshold_backward
	// of the result): g where relu(x) > 0 or is NaN, selected.
	if e.backend.HasKernel(ggmlcgo.KernelRelu) && !forceComposedRelu {
		// One pass each way of gglua's kernels (relu.c on the CPU,
		// gglua-kernels.cu on a CUDA device), NaN kept and the gradient
		// selected as PyTorch does.
		return e.unaryOp("relu", x, savesOut, func(c ctx, a node) (node, error) {
			a, err := e.packed(c, a)
			if err != nil {
				return node{}, err
			}
			return c.ReluKernel(a)
		}, func(g, x, y *Tensor) (*Tensor, error) { return e.reluBackKernel(g, y, ggmlcgo.F32) })
	}
	// A device library without gglua's kernels: ggml's ops. The result's
	// mask takes one kernel fewer than the input's (it is never negative:
	// no abs), but the product by it is NaN where g is infinite and the
	// mask 0 (PyTorch: 0; docs/PYTORCH.md).
	return e.unaryOp("relu", x, savesOut, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		y := b.nanWhere(a, b.unary("relu", a))
		return y, b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		m, err := e.build("relu_mask", y.shape, []*Tensor{y}, func(b *nodes, in []node) node { return b.reluMask(in[0]) })
		if err != nil {
			return nil, err
		}
		return e.Mul(g, m)
	})
}

// reluBackKernel is relu's gradient from its result y in one pass of
// gglua's kernel: g where y > 0 or is NaN, 0 elsewhere (selected). y is
// read as stored (f32, or bf16 from BiasReluForProduct); the gradient is
// f32, or bf16 where out says so (rounded for a product's gradient).
func (e *Engine) reluBackKernel(g, y *Tensor, out ggmlcgo.Type) (*Tensor, error) {
	d, err := e.kernelOpReading("relu_back", y.shape, []*Tensor{g, y}, e.storedInput, func(c ctx, in []node) (node, error) {
		return c.ReluBackKernel(in[0], in[1], out)
	})
	if err != nil {
		return nil, err
	}
	d.dtype = out
	return d, nil
}

// BiasRelu is relu(a + bias) for a [.., n] and bias [n]: a linear layer's
// bias and activation, which nn.Sequential hands over together. Where the
// backend has gglua's kernel it is one pass and the sum a + bias is never
// written (as a separate add then relu, every pending result is computed:
// it might be read); elsewhere, and for other shapes or types, it is Add
// then Relu. The values and gradients are those of Add then Relu.
func (e *Engine) BiasRelu(a, bias *Tensor) (*Tensor, error) {
	return e.biasRelu(a, bias, ggmlcgo.F32)
}

// BiasReluForProduct is BiasRelu for a result that only a product reads
// (nn.Sequential's Linear, ReLU, Linear). Under autocast, where products
// run as the bf16 gemm, a 2-d result is stored rounded to bf16: the
// product rounds it so anyway, and the pass writes, the product and the
// gradient read, half the bytes, with no rounding pass of their own.
// Rounding keeps relu's signs, zeros and NaN, so relu's gradient selects
// as from the f32 result, except where the result is a positive f32 below
// 2^-134, which rounds to 0 (as PyTorch's bf16 result does; a GPU's
// kernels flush such subnormals to 0 either way). Elsewhere it is
// BiasRelu.
func (e *Engine) BiasReluForProduct(a, bias *Tensor) (*Tensor, error) {
	if e.autocast != ggmlcgo.BF16 || !e.gemmBF16() || !e.backend.HasKernel(ggmlcgo.KernelBiasReluBF16) || a.Dim() != 2 {
		return e.BiasRelu(a, bias)
	}
	return e.biasRelu(a, bias, ggmlcgo.BF16)
}

// biasRelu is BiasRelu with its result stored as out (f32, or bf16).
func (e *Engine) biasRelu(a, bias *Tensor, out ggmlcgo.Type) (*Tensor, error) {
	n := 0
	if a.Dim() > 0 {
		n = a.shape[a.Dim()-1]
	}
	if !e.backend.HasKernel(ggmlcgo.KernelBiasRelu) || forceComposedRelu || a.Dim() < 1 || bias.Dim() != 1 || bias.shape[0] != n ||
		a.dtype != ggmlcgo.F32 || bias.dtype != ggmlcgo.F32 || a.Numel() == 0 {
		s, err := e.Add(a, bias)
		if err != nil {
			return nil, err
		}
		return e.Relu(s)
	}
	y, err := e.kernelOp("bias_relu", a.shape, []*Tensor{a, bias}, func(c ctx, in []node) (node, error) { return c.BiasReluKernel(in[0], in[1], out) })
	if err != nil {
		return nil, err
	}
	y.dtype = out
	e.record(y, "bias_relu", []*Tensor{a, bias}, func(g *Tensor) ([]*Tensor, error) {
		// a's gradient goes to the product that made a, when its backward
		// rounds the gradient to bf16 anyway (autocast's gemm): it is
		// written rounded, and the bias's is summed from that (PyTorch's
		// autocast sums the bias's gradient from the bf16 one too). Exact
		// where this op is a's only reader, as in nn.Sequential; where a
		// has others, their gradients add to the rounded one and the sum
		// is rounded again (as PyTorch's bf16 tape rounds its sums).
		grad := ggmlcgo.F32
		if out == ggmlcgo.BF16 && a.gradFn != nil && a.gradFn.roundsGrad {
			grad = ggmlcgo.BF16
		}
		d, err := e.reluBackKernel(g, y, grad)
		if err != nil {
			return nil, err
		}
		var gb *Tensor
		switch {
		case !bias.requiresGrad:
		case grad == ggmlcgo.BF16:
			gb, err = e.kernelOpReading("sum_to", bias.shape, []*Tensor{d}, e.storedInput, func(c ctx, in []node) (node, error) { return c.ColumnSumKernel(in[0]) })
		default:
			gb, err = e.sumTo(d, bias.shape)
		}
		return []*Tensor{d, gb}, err
	})
	return y, nil
}

// Sigmoid is 1 / (1 + e^-x).
func (e *Engine) Sigmoid(x *Tensor) (*Tensor, error) {
	return e.elementwise("sigmoid", x, savesOut, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.constOp("sigmoid_back", y, func(c ctx, a node) (node, error) { // y (1 - y)
			one, err := c.ScaleBias(a, -1, 1)
			if err != nil {
				return node{}, err
			}
			return c.Mul(a, one)
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Tanh is the hyperbolic tangent.
func (e *Engine) Tanh(x *Tensor) (*Tensor, error) {
	return e.elementwise("tanh", x, savesOut, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.constOp("tanh_back", y, func(c ctx, a node) (node, error) { // 1 - y^2
			sq, err := c.Unary("sqr", a)
			if err != nil {
				return node{}, err
			}
			return c.ScaleBias(sq, -1, 1)
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Silu is x * sigmoid(x).
func (e *Engine) Silu(x *Tensor) (*Tensor, error) {
	return e.elementwise("silu", x, savesA, func(g, x, y *Tensor) (*Tensor, error) { return e.siluBack(g, x) })
}

// siluBack is g·silu'(x), silu's gradient (ggml's silu_back).
func (e *Engine) siluBack(g, x *Tensor) (*Tensor, error) {
	return e.newOp("silu_back", x.shape, []*Tensor{g, x}, func(c ctx, in []node) (node, error) { return c.SiluBack(in[0], in[1]) })
}

// Gelu is GELU as PyTorch's F.gelu: approximate "none" (or "") is the exact
// x Φ(x) with the normal CDF Φ (PyTorch's default), "tanh" the tanh
// approximation.
func (e *Engine) Gelu(x *Tensor, approximate string) (*Tensor, error) {
	switch approximate {
	case "", "none":
		return e.geluErf(x)
	case "tanh":
		return e.geluTanh(x)
	}
	return nil, argErrorf("gelu: approximate must be \"none\" or \"tanh\", got %q", approximate)
}

// geluErf is x Φ(x) (ggml's gelu_erf); its gradient is Φ(x) + x φ(x): one
// pass of gglua's kernel where the backend has it (Φ from erf, as PyTorch:
// the tape keeps x alone); elsewhere composed, with Φ(x) = y / x (ggml has
// no erf), and 1/2 where |x| is too small to divide by (below 1e-18):
// there tiny = 1 makes it y / (x + 1) + 1/2, within 1e-18 of 1/2. Blending
// by tiny instead of selecting with where (argmax + get_rows over 2n
// elements) keeps the backward cheap.
func (e *Engine) geluErf(x *Tensor) (*Tensor, error) {
	y, err := e.newOp("gelu_erf", x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return c.Unary("gelu_erf", in[0]) })
	if err != nil {
		return nil, err
	}
	if e.backend.HasKernel(ggmlcgo.KernelGeluBack) && !forceComposedGeluBack {
		e.record(y, "gelu_erf", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
			gx, err := e.geluBack(g, x)
			return []*Tensor{gx}, err
		})
		return y, nil
	}
	e.record(y, "gelu_erf", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		var ch chain
		do := ch.do
		d := do(func() (*Tensor, error) {
			return e.build("gelu_back", x.shape, []*Tensor{x, y}, func(b *nodes, in []node) node {
				// x² serves both terms: tiny = 1 where x² < 1e-36 (|x| <
				// 1e-18, x² flushed to 0 included), and φ(x) = exp(-x²/2 +
				// ln(1/√2π)). Twelve passes with the product by g.
				sq := b.unary("sqr", in[0])
				tiny := b.unary("step", b.scaleBias(sq, -1, 1e-36))
				cdf := b.add(b.div(in[1], b.add(in[0], tiny)), b.scale(tiny, 0.5))
				pdf := b.unary("exp", b.scaleBias(sq, -0.5, float32(-0.5*math.Log(2*math.Pi))))
				return b.add(cdf, b.mul(in[0], pdf))
			})
		})
		gx := do(func() (*Tensor, error) { return e.Mul(g, d) })
		return []*Tensor{gx}, ch.err
	})
	return y, nil
}

// geluBack is g·GELU'(x), exact GELU's gradient, as one pass of gglua's
// kernel (where the backend has KernelGeluBack).
func (e *Engine) geluBack(g, x *Tensor) (*Tensor, error) {
	return e.kernelOp("gelu_back", x.shape, []*Tensor{g, x}, func(c ctx, in []node) (node, error) {
		return c.GeluErfBackKernel(in[0], in[1], ggmlcgo.F32)
	})
}

// forceComposedGeluBack and forceComposedRelu make tests take the ops
// composed for a device library without gglua's kernels, on the CPU.
var forceComposedGeluBack, forceComposedRelu = false, false

// geluTanh is PyTorch's approximate="tanh", built from differentiable ops:
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func (e *Engine) geluTanh(x *Tensor) (*Tensor, error) {
	var ch chain
	do := ch.do
	x3 := do(func() (*Tensor, error) { return e.Pow(x, 3) })
	in := do(func() (*Tensor, error) {
		return e.axpby(float32(math.Sqrt(2/math.Pi)), x, float32(0.044715*math.Sqrt(2/math.Pi)), x3)
	})
	th := do(func() (*Tensor, error) { return e.Tanh(in) })
	one := do(func() (*Tensor, error) { return e.AddScalar(th, 1) })
	h := do(func() (*Tensor, error) { return e.Mul(x, one) })
	return do(func() (*Tensor, error) { return e.Scale(h, 0.5) }), ch.err
}

// ---- math (issue 12) ----

// zeroGrad is the gradient of a piecewise-constant op (floor, ceil, round,
// sign): exactly 0, even where g is inf or NaN, as in PyTorch.
func (e *Engine) zeroGrad(g, _, _ *Tensor) (*Tensor, error) { return e.fillLike(g, 0) }

// Sin is the sine; its gradient is cos(x).
func (e *Engine) Sin(x *Tensor) (*Tensor, error) {
	return e.elementwise("sin", x, savesA, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.constOp("sin_back", x, ggmlUnary("cos"))
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Cos is the cosine; its gradient is -sin(x).
func (e *Engine) Cos(x *Tensor) (*Tensor, error) {
	return e.elementwise("cos", x, savesA, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.build("cos_back", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			return b.scale(b.unary("sin", in[0]), -1)
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Tan is sin(x) / cos(x) (ggml has no tan); its gradient is 1 + y^2, as
// PyTorch computes it.
func (e *Engine) Tan(x *Tensor) (*Tensor, error) {
	return e.unaryOp("tan", x, savesOut, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		y := b.div(b.unary("sin", a), b.unary("cos", a))
		return y, b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.build("tan_back", y.shape, []*Tensor{y}, func(b *nodes, in []node) node {
			return b.scaleBias(b.unary("sqr", in[0]), 1, 1)
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Floor rounds down; its gradient is 0.
func (e *Engine) Floor(x *Tensor) (*Tensor, error) { return e.elementwise("floor", x, 0, e.zeroGrad) }

// Ceil rounds up; its gradient is 0.
func (e *Engine) Ceil(x *Tensor) (*Tensor, error) { return e.elementwise("ceil", x, 0, e.zeroGrad) }

// Round rounds to the nearest integer, halves to the even one (2.5 -> 2,
// -3.5 -> -4), as torch.round; ±inf and NaN stay. Its gradient is 0.
//
// ggml's round is C's roundf (halves away from zero): a tie (|x - r| is
// exactly 1/2, computed exactly in float32) whose r is odd is moved one
// step towards zero. At ±inf and NaN the tie and odd tests are 0 (step of
// NaN), so r passes unchanged. 14 nodes.
func (e *Engine) Round(x *Tensor) (*Tensor, error) {
	return e.unaryOp("round", x, 0, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		r := b.unary("round", a)
		ad := b.unary("abs", b.sub(a, r))                                    // <= 1/2
		tie := b.scaleBias(b.unary("step", b.scaleBias(ad, -1, 0.5)), -1, 1) // ad >= 1/2
		h := b.scale(r, 0.5)
		odd := b.unary("step", b.sub(h, b.unary("floor", h))) // r/2 has a fraction
		y := b.sub(r, b.mul(b.mul(tie, odd), b.unary("sgn", a)))
		return y, b.err
	}, e.zeroGrad)
}

// Sign is -1, 0 or 1 (0 at NaN, as torch.sign in PyTorch 1.13); its
// gradient is 0.
func (e *Engine) Sign(x *Tensor) (*Tensor, error) { return e.elementwise("sgn", x, 0, e.zeroGrad) }

// Square is x^2; its gradient is 2x.
func (e *Engine) Square(x *Tensor) (*Tensor, error) {
	return e.elementwise("sqr", x, savesA, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.Scale(x, 2)
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Reciprocal is 1/x (±inf at ±0); its gradient is -y^2.
func (e *Engine) Reciprocal(x *Tensor) (*Tensor, error) {
	return e.unaryOp("reciprocal", x, savesOut, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		y := b.div(b.fill(a, 1), a)
		return y, b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.build("reciprocal_back", y.shape, []*Tensor{y}, func(b *nodes, in []node) node {
			return b.scale(b.unary("sqr", in[0]), -1)
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Rsqrt is 1/sqrt(x) (inf at 0, -inf at -0, NaN below 0); its gradient is
// -y^3/2, as PyTorch computes it.
func (e *Engine) Rsqrt(x *Tensor) (*Tensor, error) {
	return e.unaryOp("rsqrt", x, savesOut, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		y := b.div(b.fill(a, 1), b.unary("sqrt", a))
		return y, b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.build("rsqrt_back", y.shape, []*Tensor{y}, func(b *nodes, in []node) node {
			return b.scale(b.mul(b.unary("sqr", in[0]), in[0]), -0.5)
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}

// Log1p is ln(1 + x), exact for small x: ggml has no log1p, and ln(1 + x)
// rounds 1 + x first (log1p(1e-8) would be 0). It is computed as
// ln(u) x / (u - 1) with u = 1 + x (u - 1 is exact), x itself where u = 1
// and at +inf. Its gradient is 1 / (1 + x).
func (e *Engine) Log1p(x *Tensor) (*Tensor, error) {
	y, err := e.log1pValue(x)
	if err != nil {
		return nil, err
	}
	e.record(y, "log1p", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.newOp("log1p_back", g.shape, []*Tensor{g, x}, func(c ctx, in []node) (node, error) {
			b := e.nodes(c)
			d := b.div(in[0], b.scaleBias(in[1], 1, 1))
			return d, b.err
		})
		return []*Tensor{gx}, err
	})
	return y, nil
}

func (e *Engine) log1pValue(x *Tensor) (*Tensor, error) {
	var ch chain
	do := ch.do
	kahan := do(func() (*Tensor, error) {
		return e.build("log1p", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			u := b.scaleBias(in[0], 1, 1)
			return b.div(b.mul(b.unary("log", u), in[0]), b.scaleBias(u, 1, -1))
		})
	})
	// x where u = 1 (|x| below half an ulp of 1) or x = +inf.
	keep := do(func() (*Tensor, error) {
		return e.build("log1p", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			one := b.isZero(b.scaleBias(b.scaleBias(in[0], 1, 1), 1, -1))
			return b.add(one, b.unary("step", b.scaleBias(in[0], 1, -maxF32)))
		})
	})
	return do(func() (*Tensor, error) {
		return e.build("log1p", x.shape, []*Tensor{keep, x, kahan}, func(b *nodes, in []node) node {
			return b.where(in[0], in[1], in[2])
		})
	}), ch.err
}

// Trunc rounds towards zero; its gradient is 0.
func (e *Engine) Trunc(x *Tensor) (*Tensor, error) { return e.elementwise("trunc", x, 0, e.zeroGrad) }
