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

// ---- several nodes in one op ----

// nodes builds the ggml nodes of one op with a sticky error: after the
// first failure every call returns the zero node and err keeps the failure.
// An op gets a node context with room for at least 16 nodes: a build that
// needs more is split into several ops.
type nodes struct {
	c   ctx
	err error
}

func (b *nodes) set(n node, err error) node {
	if err != nil {
		b.err = err
		return node{}
	}
	return n
}

func (b *nodes) unary(op string, a node) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Unary(op, a))
}

func (b *nodes) binary(f func(ctx, node, node) (node, error), x, y node) node {
	if b.err != nil {
		return node{}
	}
	return b.set(f(b.c, x, y))
}

func (b *nodes) add(x, y node) node { return b.binary(ctx.Add, x, y) }
func (b *nodes) sub(x, y node) node { return b.binary(ctx.Sub, x, y) }
func (b *nodes) mul(x, y node) node { return b.binary(ctx.Mul, x, y) }
func (b *nodes) div(x, y node) node { return b.binary(ctx.Div, x, y) }

func (b *nodes) scale(a node, s float32) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Scale(a, s))
}

// scaleBias is a*s + t.
func (b *nodes) scaleBias(a node, s, t float32) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.ScaleBias(a, s, t))
}

// fill is a node of a's shape holding v.
func (b *nodes) fill(a node, v float32) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Fill(a, v))
}

// clamp is ggml's clamp, which maps NaN to a bound: see nanWhere.
func (b *nodes) clamp(a node, lo, hi float32) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Clamp(a, lo, hi))
}

func (b *nodes) reshape(a node, ne [4]int64) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Reshape(a, ne))
}

func (b *nodes) repeat(a node, ne [4]int64) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Repeat(a, ne))
}

func (b *nodes) concat(x, y node, dim int) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.Concat(x, y, dim))
}

func (b *nodes) sumRows(a node) node {
	if b.err != nil {
		return node{}
	}
	return b.set(b.c.SumRows(a))
}

// rowMax is the largest element of each row of a (ne (cols, rows)), as ne
// (1, rows): the element argmax picks, read back with get_rows.
func (b *nodes) rowMax(a node, cols, rows int64) node {
	if b.err != nil {
		return node{}
	}
	idx := b.set(b.c.Argmax(a)) // i32, ne (rows)
	if b.err == nil {
		idx = b.set(b.c.View(idx, [4]int64{1, rows, 1, 1}, [3]int64{4, 4 * rows, 4 * rows}, 0))
	}
	cells := b.reshape(a, [4]int64{1, cols, rows, 1}) // each element a row of its own
	if b.err != nil {
		return node{}
	}
	picked := b.set(b.c.GetRows(cells, idx)) // ne (1, 1, rows)
	return b.reshape(picked, [4]int64{1, rows, 1, 1})
}

// where is x where cond is 1 and y where it is 0 (cond holds only 0 and 1;
// all three have the same shape). ggml has no elementwise select, and a
// mask multiplied in turns an inf or NaN that was not picked into NaN: each
// element is picked with get_rows instead, row 1 or row 0 of a pair, by
// argmax of (1 - cond, cond). 10 nodes.
func (b *nodes) where(cond, x, y node) node {
	if b.err != nil {
		return node{}
	}
	ne, n := x.Ne(), x.Nelements()
	c1 := b.reshape(cond, [4]int64{1, n, 1, 1})
	scores := b.concat(b.scaleBias(c1, -1, 1), c1, 0) // ne (2, n)
	if b.err != nil {
		return node{}
	}
	idx := b.set(b.c.Argmax(scores)) // i32 ne (n): 1 where cond
	if b.err == nil {
		idx = b.set(b.c.View(idx, [4]int64{1, n, 1, 1}, [3]int64{4, 4 * n, 4 * n}, 0))
	}
	pair := b.concat(b.reshape(y, [4]int64{1, 1, n, 1}), b.reshape(x, [4]int64{1, 1, n, 1}), 1) // ne (1, 2, n)
	if b.err != nil {
		return node{}
	}
	return b.reshape(b.set(b.c.GetRows(pair, idx)), ne)
}

// notNaN is 1 where a is a number (±inf included), 0 where it is NaN.
func (b *nodes) notNaN(a node) node {
	return b.unary("step", b.scaleBias(b.unary("abs", a), 1, 1))
}

// nanOf is 0 where a is a number and NaN where a is NaN (tanh takes ±inf
// to ±1, so only NaN survives the multiplication by 0).
func (b *nodes) nanOf(a node) node { return b.scale(b.unary("tanh", a), 0) }

// nanWhere is y, but NaN wherever src is NaN: ops that ggml computes with
// comparisons (clamp, relu) turn NaN into a number, PyTorch keeps it.
func (b *nodes) nanWhere(src, y node) node { return b.add(y, b.nanOf(src)) }

// isZero is 1 where a == 0 (either sign), 0 elsewhere and at NaN.
func (b *nodes) isZero(a node) node {
	ab := b.unary("abs", a)
	zero := b.scaleBias(b.unary("step", ab), -1, 1) // 1 at 0 and at NaN
	return b.mul(zero, b.unary("step", b.scaleBias(ab, 1, 1)))
}

// build is an op of several nodes, computed without recording.
func (e *Engine) build(name string, shape []int, inputs []*Tensor, f func(b *nodes, in []node) node) (*Tensor, error) {
	return e.newOp(name, shape, inputs, func(c ctx, in []node) (node, error) {
		b := &nodes{c: c}
		n := f(b, in)
		if b.err != nil {
			return node{}, b.err
		}
		return n, nil
	})
}

// whereConst is where(cond, v, x) for a number v, not recorded.
func (e *Engine) whereConst(cond *Tensor, v float32, x *Tensor) (*Tensor, error) {
	return e.build("where", x.shape, []*Tensor{cond, x}, func(b *nodes, in []node) node {
		return b.where(in[0], b.fill(in[1], v), in[1])
	})
}

// where is a where cond is 1 and b where it is 0 (cond holds only 0 and 1;
// all three have the same shape). Its gradient goes to the operand picked,
// exactly 0 to the other, even where the gradient is inf or NaN.
func (e *Engine) where(cond, a, b *Tensor) (*Tensor, error) {
	if !sameShape(cond.shape, a.shape) || !sameShape(a.shape, b.shape) {
		return nil, shapeErrorf("where: shapes %s, %s and %s differ", ShapeString(cond.shape), ShapeString(a.shape), ShapeString(b.shape))
	}
	out, err := e.build("where", a.shape, []*Tensor{cond, a, b}, func(n *nodes, in []node) node { return n.where(in[0], in[1], in[2]) })
	if err != nil {
		return nil, err
	}
	e.record(out, "where", []*Tensor{cond, a, b}, func(g *Tensor) ([]*Tensor, error) {
		grads := []*Tensor{nil, nil, nil}
		for i, t := range []*Tensor{a, b} {
			if !t.requiresGrad {
				continue
			}
			pickA := i == 0
			gi, err := e.build("where_back", g.shape, []*Tensor{cond, g}, func(n *nodes, in []node) node {
				zero := n.fill(in[1], 0)
				if pickA {
					return n.where(in[0], in[1], zero)
				}
				return n.where(in[0], zero, in[1])
			})
			if err != nil {
				return nil, err
			}
			grads[i+1] = gi
		}
		return grads, nil
	})
	return out, nil
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

// ---- pow ----
//
// Powers follow PyTorch, which follows C's pow: integer exponents of any
// size work for negative bases, a fractional one gives NaN there;
// x^0 = 1 and 1^y = 1 for every x and y, NaN included; 0^y is 0, 1 or inf;
// ±inf and exponents of ±inf take their limits. Gradients are PyTorch's
// formulas: d/dx x^y = y x^(y-1) (0 where y = 0), d/dy x^y = x^y ln x (0
// where x = 0 and y >= 0), so a negative base has a NaN gradient in y.

// maxF32 is the largest finite float32: exponents of ±inf are clamped to it
// (an even integer), which gives every limit of pow, |x| = 1 included.
const maxF32 = math.MaxFloat32

// Pow is x^p for a number p.
func (e *Engine) Pow(x *Tensor, p float64) (*Tensor, error) {
	y, err := e.powValue(x, p)
	if err != nil {
		return nil, err
	}
	e.record(y, "pow", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		if p == 0 { // PyTorch: a zero gradient, even where x is inf or NaN
			z, err := e.fillLike(x, 0)
			return []*Tensor{z}, err
		}
		var ch chain
		do := ch.do
		d := do(func() (*Tensor, error) { return e.powValue(x, p-1) })
		d = do(func() (*Tensor, error) { return e.Scale(d, float32(p)) })
		return []*Tensor{do(func() (*Tensor, error) { return e.Mul(g, d) })}, ch.err
	})
	return y, nil
}

// powValue is x^p, not recorded. As in PyTorch, p keeps its float64 value
// (an odd integer stays odd however large); 0.5 and -0.5 are sqrt and
// 1/sqrt (so (-inf)^0.5 is NaN, as in PyTorch) and small integers repeated
// products.
func (e *Engine) powValue(x *Tensor, p float64) (*Tensor, error) {
	one := func(f func(b *nodes, a node) node) (*Tensor, error) {
		return e.build("pow", x.shape, []*Tensor{x}, func(b *nodes, in []node) node { return f(b, in[0]) })
	}
	switch {
	case p == 0:
		return one(func(b *nodes, a node) node { return b.fill(a, 1) })
	case p == 1:
		return one(func(b *nodes, a node) node { return b.scale(a, 1) })
	case p == 0.5:
		return one(func(b *nodes, a node) node { return b.unary("sqrt", a) })
	case p == -0.5:
		return one(func(b *nodes, a node) node { return b.div(b.fill(a, 1), b.unary("sqrt", a)) })
	case p == math.Trunc(p) && math.Abs(p) <= 64:
		return one(func(b *nodes, a node) node {
			r := b.intPow(a, int(math.Abs(p)))
			if p < 0 {
				return b.div(b.fill(a, 1), r)
			}
			return r
		})
	case p == math.Trunc(p) && !math.IsInf(p, 0): // a large integer: |x|^p, negated for x < 0 and p odd
		odd := math.Mod(p, 2) != 0
		return one(func(b *nodes, a node) node {
			mag := b.unary("exp", b.scale(b.unary("log", b.unary("abs", a)), float32(p)))
			if !odd {
				return mag
			}
			return b.mul(mag, b.scaleBias(b.unary("step", b.scale(a, -1)), -2, 1))
		})
	case math.IsInf(p, 0) || math.IsNaN(p):
		y, err := e.fillLike(x, float32(p))
		if err != nil {
			return nil, err
		}
		return e.cpow(x, y)
	}
	// A fractional exponent: exp(p ln x), NaN for negative x; but C's
	// pow(-inf, p) is pow(+inf, p).
	u, err := e.build("pow_base", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
		negInf := b.unary("step", b.scaleBias(in[0], -1, -maxF32)) // x < -max: -inf
		return b.where(negInf, b.fill(in[0], float32(math.Inf(1))), in[0])
	})
	if err != nil {
		return nil, err
	}
	return e.build("pow", x.shape, []*Tensor{u}, func(b *nodes, in []node) node {
		return b.unary("exp", b.scale(b.unary("log", in[0]), float32(p)))
	})
}

// intPow is a^n for n >= 1 by repeated squaring (at most 12 nodes for
// n <= 64); n = 1 is a copy.
func (b *nodes) intPow(a node, n int) node {
	if n == 1 {
		return b.scale(a, 1)
	}
	var result node
	have, base := false, a
	for n > 0 {
		if n&1 == 1 {
			if have {
				result = b.mul(result, base)
			} else {
				result, have = base, true
			}
		}
		n >>= 1
		if n > 0 {
			base = b.mul(base, base)
		}
	}
	return result
}

// cpow is x^y for tensors of the same shape, by C's pow rules (see above),
// not recorded.
func (e *Engine) cpow(x, y *Tensor) (*Tensor, error) {
	var ch chain
	do := ch.do
	sh := x.shape
	op := func(name string, ins []*Tensor, f func(b *nodes, in []node) node) *Tensor {
		return do(func() (*Tensor, error) { return e.build(name, sh, ins, f) })
	}
	// |x|^y, with y = ±inf as ±max (|x| = 1 then gives 1).
	mag := op("pow_abs", []*Tensor{x, y}, func(b *nodes, in []node) node {
		l := b.unary("log", b.unary("abs", in[0]))
		return b.unary("exp", b.mul(b.clamp(in[1], -maxF32, maxF32), l))
	})
	// 1 where y is not an integer.
	frac := op("pow_frac", []*Tensor{y}, func(b *nodes, in []node) node {
		ys := b.clamp(in[0], -maxF32, maxF32)
		return b.unary("step", b.unary("abs", b.sub(ys, b.unary("floor", ys))))
	})
	// 1 where y is an odd integer (and where it is not an integer).
	odd := op("pow_odd", []*Tensor{y}, func(b *nodes, in []node) node {
		h := b.scale(b.clamp(in[0], -maxF32, maxF32), 0.5)
		return b.unary("step", b.unary("abs", b.sub(h, b.unary("floor", h))))
	})
	// The sign: - for a negative base and an odd exponent.
	signed := op("pow_sign", []*Tensor{x, mag, frac, odd}, func(b *nodes, in []node) node {
		neg := b.unary("step", b.scale(in[0], -1))
		negOdd := b.mul(neg, b.mul(in[3], b.scaleBias(in[2], -1, 1)))
		return b.mul(in[1], b.scaleBias(negOdd, -2, 1))
	})
	// NaN for a finite negative base and a fractional exponent.
	bad := op("pow_nan", []*Tensor{x, frac}, func(b *nodes, in []node) node {
		neg := b.unary("step", b.scale(in[0], -1))
		inf := b.unary("step", b.scaleBias(b.unary("abs", in[0]), 1, -maxF32))
		return b.mul(b.mul(neg, b.scaleBias(inf, -1, 1)), in[1])
	})
	v := op("pow", []*Tensor{bad, signed}, func(b *nodes, in []node) node {
		return b.where(in[0], b.fill(in[1], float32(math.NaN())), in[1])
	})
	// NaN in, NaN out ...
	nanIn := op("pow_nan", []*Tensor{x, y}, func(b *nodes, in []node) node {
		return b.scaleBias(b.mul(b.notNaN(in[0]), b.notNaN(in[1])), -1, 1)
	})
	v = op("pow", []*Tensor{nanIn, v}, func(b *nodes, in []node) node {
		return b.where(in[0], b.fill(in[1], float32(math.NaN())), in[1])
	})
	// ... but x^0 = 1 and 1^y = 1.
	zeroY := op("pow_one", []*Tensor{y}, func(b *nodes, in []node) node { return b.isZero(in[0]) })
	unit := op("pow_one", []*Tensor{x, zeroY}, func(b *nodes, in []node) node {
		return b.unary("step", b.add(b.isZero(b.scaleBias(in[0], 1, -1)), in[1]))
	})
	v = op("pow", []*Tensor{unit, v}, func(b *nodes, in []node) node {
		return b.where(in[0], b.fill(in[1], 1), in[1])
	})
	return v, ch.err
}

// expandConst is x broadcast to shape, not recorded.
func (e *Engine) expandConst(x *Tensor, shape []int) (*Tensor, error) {
	return e.build("expand", shape, []*Tensor{x}, func(b *nodes, in []node) node {
		if sameShape(x.shape, shape) {
			return b.scale(in[0], 1)
		}
		return b.repeat(in[0], ne4(shape))
	})
}

// PowTensor is x^y elementwise, with broadcasting; both may need gradients.
func (e *Engine) PowTensor(x, y *Tensor) (*Tensor, error) {
	shape, err := broadcastShape("pow", x.shape, y.shape)
	if err != nil {
		return nil, err
	}
	var ch chain
	do := ch.do
	xf := do(func() (*Tensor, error) { return e.expandConst(x, shape) })
	yf := do(func() (*Tensor, error) { return e.expandConst(y, shape) })
	out := do(func() (*Tensor, error) { return e.cpow(xf, yf) })
	if ch.err != nil {
		return nil, ch.err
	}
	e.record(out, "pow", []*Tensor{x, y}, func(g *Tensor) ([]*Tensor, error) {
		var ch chain
		do := ch.do
		var gx, gy *Tensor
		if x.requiresGrad {
			// where(y == 0, 0, g * (y * x^(y-1)))
			ym1 := do(func() (*Tensor, error) {
				return e.constOp("sub", yf, func(c ctx, a node) (node, error) { return c.ScaleBias(a, 1, -1) })
			})
			p := do(func() (*Tensor, error) { return e.cpow(xf, ym1) })
			t := do(func() (*Tensor, error) {
				return e.build("pow_back", shape, []*Tensor{g, yf, p}, func(b *nodes, in []node) node {
					return b.mul(in[0], b.mul(in[1], in[2]))
				})
			})
			z := do(func() (*Tensor, error) {
				return e.build("pow_back", shape, []*Tensor{yf}, func(b *nodes, in []node) node { return b.isZero(in[0]) })
			})
			gx = do(func() (*Tensor, error) { return e.whereConst(z, 0, t) })
			gx = do(func() (*Tensor, error) { return e.sumTo(gx, x.shape) })
		}
		if y.requiresGrad {
			// g * where(x == 0 and y >= 0, 0, x^y ln x)
			cond := do(func() (*Tensor, error) {
				return e.build("pow_back", shape, []*Tensor{xf, yf}, func(b *nodes, in []node) node {
					ge := b.scaleBias(b.unary("step", b.scale(in[1], -1)), -1, 1) // y >= 0, and NaN
					return b.mul(b.isZero(in[0]), b.mul(ge, b.notNaN(in[1])))
				})
			})
			t := do(func() (*Tensor, error) {
				return e.build("pow_back", shape, []*Tensor{out, xf}, func(b *nodes, in []node) node {
					return b.mul(in[0], b.unary("log", in[1]))
				})
			})
			t = do(func() (*Tensor, error) { return e.whereConst(cond, 0, t) })
			gy = do(func() (*Tensor, error) { return e.Mul(g, t) })
			gy = do(func() (*Tensor, error) { return e.sumTo(gy, y.shape) })
		}
		return []*Tensor{gx, gy}, ch.err
	})
	return out, nil
}

// powBase is s^y for a number s, as PyTorch's pow(Scalar, Tensor).
func (e *Engine) powBase(s float64, y *Tensor) (*Tensor, error) {
	s = float64(float32(s))
	var out *Tensor
	var err error
	switch {
	case s == 1:
		out, err = e.fillLike(y, 1)
	case s > 0 && !math.IsInf(s, 1):
		out, err = e.build("pow", y.shape, []*Tensor{y}, func(b *nodes, in []node) node {
			return b.unary("exp", b.scale(in[0], float32(math.Log(s))))
		})
	default:
		var sf *Tensor
		if sf, err = e.fillLike(y, float32(s)); err == nil {
			out, err = e.cpow(sf, y)
		}
	}
	if err != nil {
		return nil, err
	}
	e.record(out, "pow", []*Tensor{y}, func(g *Tensor) ([]*Tensor, error) {
		var ch chain
		do := ch.do
		var t *Tensor
		if s == 0 { // where(y >= 0, 0, s^y ln 0)
			cond := do(func() (*Tensor, error) {
				return e.build("pow_back", y.shape, []*Tensor{y}, func(b *nodes, in []node) node {
					ge := b.scaleBias(b.unary("step", b.scale(in[0], -1)), -1, 1)
					return b.mul(ge, b.notNaN(in[0]))
				})
			})
			t = do(func() (*Tensor, error) {
				return e.constOp("pow_back", out, func(c ctx, a node) (node, error) { return c.Scale(a, float32(math.Inf(-1))) })
			})
			t = do(func() (*Tensor, error) { return e.whereConst(cond, 0, t) })
		} else { // s^y ln s: NaN for a negative base, as in PyTorch
			ls := float32(math.Log(s))
			t = do(func() (*Tensor, error) {
				return e.constOp("pow_back", out, func(c ctx, a node) (node, error) { return c.Scale(a, ls) })
			})
		}
		return []*Tensor{do(func() (*Tensor, error) { return e.Mul(g, t) })}, ch.err
	})
	return out, nil
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
// (and PyTorch's) allow: x - 2, 2 - x, 2 / x, x ^ 3, 2 ^ x, x ^ y, ...
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
	return e.PowTensor(a, b)
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
	case OpDiv: // s / x, divided as PyTorch divides
		sf := do(func() (*Tensor, error) { return e.fillLike(x, float32(s)) })
		return do(func() (*Tensor, error) { return e.Div(sf, x) }), ch.err
	}
	return e.powBase(s, x)
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
		b := &nodes{c: c}
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
		b := &nodes{c: c}
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
