package core

import "math"

// Arithmetic where a number may stand on either side (Lua's operators,
// PyTorch's), and powers.
//
// Powers follow PyTorch, which follows C's pow: integer exponents of any
// size work for negative bases, a fractional one gives NaN there;
// x^0 = 1 and 1^y = 1 for every x and y, NaN included; 0^y is 0, 1 or inf;
// ±inf and exponents of ±inf take their limits. Gradients are PyTorch's
// formulas: d/dx x^y = y x^(y-1) (0 where y = 0), d/dy x^y = x^y ln x (0
// where x = 0 and y >= 0), so a negative base has a NaN gradient in y.

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

// ---- pow ----

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
