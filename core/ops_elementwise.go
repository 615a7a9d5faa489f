package core

import "math"

// Elementwise ops: y = f(x) or y = f(a, b) with PyTorch broadcasting, each
// op's forward and gradient side by side. Gradients are built from ops too,
// so backward runs on the device in the same graph as the forward.

// unaryOp is y = f(x), elementwise, with dx = bwd(g, x, y).
func (e *Engine) unaryOp(name string, x *Tensor, f func(c ctx, a node) (node, error), bwd func(g, x, y *Tensor) (*Tensor, error)) (*Tensor, error) {
	y, err := e.newOp(name, x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return f(c, in[0]) })
	if err != nil {
		return nil, err
	}
	e.record(y, name, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := bwd(g, x, y)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// elementwise is a unary op whose forward is the ggml op of the same name
// (listed in ggmlcgo's gglua_ggml.h).
func (e *Engine) elementwise(name string, x *Tensor, bwd func(g, x, y *Tensor) (*Tensor, error)) (*Tensor, error) {
	return e.unaryOp(name, x, ggmlUnary(name), bwd)
}

// ggmlUnary builds the node of ggml's elementwise op name.
func ggmlUnary(name string) func(c ctx, a node) (node, error) {
	return func(c ctx, a node) (node, error) { return c.Unary(name, a) }
}

// binaryOp is out = f(a, b) with PyTorch broadcasting; bwd returns the
// gradients at the broadcast shape, which are then summed down to each
// operand's shape.
func (e *Engine) binaryOp(name string, a, b *Tensor, f func(c ctx, x, y node) (node, error), bwd func(g, a, b, out *Tensor) (*Tensor, *Tensor, error)) (*Tensor, error) {
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
	e.record(out, name, []*Tensor{a, b}, func(g *Tensor) ([]*Tensor, error) {
		ga, gb, err := bwd(g, a, b, out)
		if err != nil {
			return nil, err
		}
		if !a.requiresGrad {
			ga = nil
		} else if ga, err = e.sumTo(ga, a.shape); err != nil {
			return nil, err
		}
		if !b.requiresGrad {
			gb = nil
		} else if gb, err = e.sumTo(gb, b.shape); err != nil {
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
	return e.binaryOp("add", a, b, ctx.Add, func(g, a, b, out *Tensor) (*Tensor, *Tensor, error) { return g, g, nil })
}

// Sub is a - b.
func (e *Engine) Sub(a, b *Tensor) (*Tensor, error) {
	return e.binaryOp("sub", a, b, ctx.Sub, func(g, a, b, out *Tensor) (*Tensor, *Tensor, error) {
		if !b.requiresGrad {
			return g, nil, nil
		}
		nb, err := e.Neg(g)
		return g, nb, err
	})
}

// Mul is a * b, elementwise.
func (e *Engine) Mul(a, b *Tensor) (*Tensor, error) {
	return e.binaryOp("mul", a, b, ctx.Mul, func(g, a, b, out *Tensor) (ga, gb *Tensor, err error) {
		if a.requiresGrad {
			if ga, err = e.Mul(g, b); err != nil {
				return nil, nil, err
			}
		}
		if b.requiresGrad {
			gb, err = e.Mul(g, a)
		}
		return ga, gb, err
	})
}

// Div is a / b, elementwise.
func (e *Engine) Div(a, b *Tensor) (*Tensor, error) {
	return e.binaryOp("div", a, b, ctx.Div, func(g, a, b, out *Tensor) (ga, gb *Tensor, err error) {
		if a.requiresGrad {
			if ga, err = e.Div(g, b); err != nil { // d/da = 1/b
				return nil, nil, err
			}
		}
		if !b.requiresGrad {
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
	return e.unaryOp("scale", x, func(c ctx, a node) (node, error) { return c.Scale(a, s) },
		func(g, x, y *Tensor) (*Tensor, error) { return e.Scale(g, s) })
}

// AddScalar is x + s for a number s.
func (e *Engine) AddScalar(x *Tensor, s float32) (*Tensor, error) {
	return e.unaryOp("add", x, func(c ctx, a node) (node, error) { return c.ScaleBias(a, 1, s) },
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
	return e.elementwise("exp", x, func(g, x, y *Tensor) (*Tensor, error) { return e.Mul(g, y) })
}

// Expm1 is e^x - 1, exact for small x; its gradient is e^x = y + 1.
func (e *Engine) Expm1(x *Tensor) (*Tensor, error) {
	return e.elementwise("expm1", x, func(g, x, y *Tensor) (*Tensor, error) {
		ey, err := e.AddScalar(y, 1)
		if err != nil {
			return nil, err
		}
		return e.Mul(g, ey)
	})
}

// Log is the natural logarithm.
func (e *Engine) Log(x *Tensor) (*Tensor, error) {
	return e.elementwise("log", x, func(g, x, y *Tensor) (*Tensor, error) { return e.Div(g, x) })
}

// Sqrt is the square root.
func (e *Engine) Sqrt(x *Tensor) (*Tensor, error) {
	return e.elementwise("sqrt", x, func(g, x, y *Tensor) (*Tensor, error) {
		h, err := e.Div(g, y)
		if err != nil {
			return nil, err
		}
		return e.Scale(h, 0.5)
	})
}

// Abs is |x|; its gradient is sign(x): 0 at 0 and at NaN, as in PyTorch.
func (e *Engine) Abs(x *Tensor) (*Tensor, error) {
	return e.elementwise("abs", x, func(g, x, y *Tensor) (*Tensor, error) {
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
	return e.unaryOp("clamp", x, func(c ctx, a node) (node, error) {
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
	return e.unaryOp("relu", x, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		y := b.nanWhere(a, b.unary("relu", a))
		return y, b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		m, err := e.build("relu_mask", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			// step(x) + isNaN(x)
			return b.add(b.unary("step", in[0]), b.scaleBias(b.notNaN(in[0]), -1, 1))
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, m)
	})
}

// Sigmoid is 1 / (1 + e^-x).
func (e *Engine) Sigmoid(x *Tensor) (*Tensor, error) {
	return e.elementwise("sigmoid", x, func(g, x, y *Tensor) (*Tensor, error) {
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
	return e.elementwise("tanh", x, func(g, x, y *Tensor) (*Tensor, error) {
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
	return e.elementwise("silu", x, func(g, x, y *Tensor) (*Tensor, error) {
		return e.newOp("silu_back", x.shape, []*Tensor{g, x}, func(c ctx, in []node) (node, error) {
			return c.SiluBack(in[0], in[1])
		})
	})
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

// geluErf is x Φ(x) (ggml's gelu_erf); its gradient is Φ(x) + x φ(x), with
// Φ(x) = y / x (1/2 where x is too small to divide by).
func (e *Engine) geluErf(x *Tensor) (*Tensor, error) {
	return e.elementwise("gelu_erf", x, func(g, x, y *Tensor) (*Tensor, error) {
		var ch chain
		do := ch.do
		cdf := do(func() (*Tensor, error) {
			return e.build("gelu_cdf", x.shape, []*Tensor{x, y}, func(b *nodes, in []node) node {
				tiny := b.unary("step", b.scaleBias(b.unary("abs", in[0]), -1, 1e-20)) // |x| < 1e-20
				return b.where(tiny, b.fill(in[0], 0.5), b.div(in[1], in[0]))
			})
		})
		d := do(func() (*Tensor, error) {
			return e.build("gelu_back", x.shape, []*Tensor{x, cdf}, func(b *nodes, in []node) node {
				pdf := b.scale(b.unary("exp", b.scale(b.unary("sqr", in[0]), -0.5)), float32(1/math.Sqrt(2*math.Pi)))
				return b.add(in[1], b.mul(in[0], pdf))
			})
		})
		return do(func() (*Tensor, error) { return e.Mul(g, d) }), ch.err
	})
}

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
