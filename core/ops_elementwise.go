package core

import (
	"fmt"
	"math"
)

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

// Pow is x^p for a number p. Integer powers work for negative x; others
// are exp(p log x), NaN for negative x, as in PyTorch.
func (e *Engine) Pow(x *Tensor, p float64) (*Tensor, error) {
	switch {
	case p == 1:
		return e.Scale(x, 1)
	case p == 2:
		return e.unaryOp("pow", x, ggmlUnary("sqr"), func(g, x, y *Tensor) (*Tensor, error) {
			h, err := e.Mul(g, x)
			if err != nil {
				return nil, err
			}
			return e.Scale(h, 2)
		})
	case p == 0.5:
		return e.Sqrt(x)
	}
	var y *Tensor
	var err error
	if p == math.Trunc(p) && math.Abs(p) <= 16 {
		y, err = e.intPow(x, int(math.Abs(p)))
		if err == nil && p < 0 {
			var one *Tensor
			if one, err = e.fillLike(x, 1); err == nil {
				y, err = e.Div(one, y)
			}
		}
	} else {
		var l *Tensor
		if l, err = e.Log(x); err == nil {
			if l, err = e.Scale(l, float32(p)); err == nil {
				y, err = e.Exp(l)
			}
		}
	}
	return y, err
}

// intPow is x^n by repeated squaring, built from Mul (so it differentiates).
func (e *Engine) intPow(x *Tensor, n int) (*Tensor, error) {
	if n == 0 {
		return e.fillLike(x, 1)
	}
	result, base := (*Tensor)(nil), x
	var err error
	for n > 0 {
		if n&1 == 1 {
			if result == nil {
				result = base
			} else if result, err = e.Mul(result, base); err != nil {
				return nil, err
			}
		}
		n >>= 1
		if n > 0 {
			if base, err = e.Mul(base, base); err != nil {
				return nil, err
			}
		}
	}
	return result, nil
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

// ---- numbers on either side ----

// ArithOp is one of the arithmetic operators (+ - * / ^).
type ArithOp int

const (
	OpAdd ArithOp = iota
	OpSub
	OpMul
	OpDiv
	OpPow
)

var arithNames = [...]string{"add", "sub", "mul", "div", "pow"}

func (op ArithOp) String() string { return arithNames[op] }

// Operand is one side of an arithmetic op: a tensor, or (T nil) the number N.
type Operand struct {
	T *Tensor
	N float64
}

// Arith is a op b where either side may be a number, as Lua's operators
// (and PyTorch's) allow: x - 2, 2 - x, 2 / x, x ^ 3, 2 ^ x, ...
func (e *Engine) Arith(op ArithOp, a, b Operand) (*Tensor, error) {
	if op < OpAdd || op > OpPow {
		return nil, argErrorf("arith: unknown operator %d", int(op))
	}
	switch {
	case a.T != nil && b.T != nil:
		return e.arithTensors(op, a.T, b.T)
	case a.T != nil:
		return e.arithRight(op, a.T, b.N)
	case b.T != nil:
		return e.arithLeft(op, a.N, b.T)
	}
	return nil, argErrorf("%s: expected at least one tensor, got two numbers", op)
}

func (e *Engine) arithTensors(op ArithOp, a, b *Tensor) (*Tensor, error) {
	switch op {
	case OpAdd:
		return e.Add(a, b)
	case OpSub:
		return e.Sub(a, b)
	case OpMul:
		return e.Mul(a, b)
	case OpDiv:
		return e.Div(a, b)
	}
	return nil, argErrorf("pow: the exponent must be a number")
}

// arithRight is x op s.
func (e *Engine) arithRight(op ArithOp, x *Tensor, s float64) (*Tensor, error) {
	switch op {
	case OpAdd:
		return e.AddScalar(x, float32(s))
	case OpSub:
		return e.AddScalar(x, float32(-s))
	case OpMul:
		return e.Scale(x, float32(s))
	case OpDiv:
		return e.Scale(x, float32(1/s))
	}
	return e.Pow(x, s)
}

// arithLeft is s op x.
func (e *Engine) arithLeft(op ArithOp, s float64, x *Tensor) (*Tensor, error) {
	var ch chain
	do := ch.do
	switch op {
	case OpAdd, OpMul:
		return e.arithRight(op, x, s) // they commute
	case OpSub: // s - x
		n := do(func() (*Tensor, error) { return e.Neg(x) })
		return do(func() (*Tensor, error) { return e.AddScalar(n, float32(s)) }), ch.err
	case OpDiv: // s * x^-1
		r := do(func() (*Tensor, error) { return e.Pow(x, -1) })
		return do(func() (*Tensor, error) { return e.Scale(r, float32(s)) }), ch.err
	}
	// s^x = exp(x ln s)
	l := do(func() (*Tensor, error) { return e.Scale(x, float32(math.Log(s))) })
	return do(func() (*Tensor, error) { return e.Exp(l) }), ch.err
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

// Abs is |x|; its gradient at 0 is 0, as in PyTorch.
func (e *Engine) Abs(x *Tensor) (*Tensor, error) {
	return e.elementwise("abs", x, func(g, x, y *Tensor) (*Tensor, error) {
		s, err := e.constOp("sgn", x, ggmlUnary("sgn"))
		if err != nil {
			return nil, err
		}
		return e.Mul(g, s)
	})
}

// Clamp limits x to [lo, hi]; the gradient passes where lo <= x <= hi.
func (e *Engine) Clamp(x *Tensor, lo, hi float32) (*Tensor, error) {
	if lo > hi {
		return nil, argErrorf("clamp: min %g is greater than max %g", lo, hi)
	}
	return e.unaryOp("clamp", x, func(c ctx, a node) (node, error) { return c.Clamp(a, lo, hi) },
		func(g, x, y *Tensor) (*Tensor, error) {
			mask, err := e.constOp("clamp_mask", x, func(c ctx, a node) (node, error) {
				// 1 - step(lo - x) - step(x - hi): 1 inside [lo, hi], ends included
				below, err := c.ScaleBias(a, -1, lo)
				if err == nil {
					below, err = c.Unary("step", below)
				}
				above, err2 := c.ScaleBias(a, 1, -hi)
				if err2 == nil {
					above, err2 = c.Unary("step", above)
				}
				if err != nil || err2 != nil {
					return node{}, fmt.Errorf("clamp_mask: %v %v", err, err2)
				}
				inside, err := c.Add(below, above)
				if err != nil {
					return node{}, err
				}
				return c.ScaleBias(inside, -1, 1)
			})
			if err != nil {
				return nil, err
			}
			return e.Mul(g, mask)
		})
}

// ---- activations ----

// Relu is max(x, 0).
func (e *Engine) Relu(x *Tensor) (*Tensor, error) {
	return e.elementwise("relu", x, func(g, x, y *Tensor) (*Tensor, error) {
		m, err := e.constOp("relu_mask", x, ggmlUnary("step"))
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

// Gelu is the tanh approximation of GELU (PyTorch's approximate="tanh"),
// built from differentiable ops: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func (e *Engine) Gelu(x *Tensor) (*Tensor, error) {
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
