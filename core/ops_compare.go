package core

import (
	"fmt"

	"github.com/gglua/gglua/ggmlcgo"
)

// Comparisons, masks and selections (issue 12). gglua has no bool dtype:
// a mask is a float32 tensor of 0s and 1s, and an op that takes one reads
// any nonzero value (NaN included) as true, as PyTorch's bool() does.
// Comparisons and masks are not differentiable (their results never
// require grad); where, masked_fill, tril/triu and maximum/minimum pass the
// gradient to the element they picked.

// CompareOp is one of the elementwise comparisons.
type CompareOp int

const (
	OpGT CompareOp = iota
	OpLT
	OpGE
	OpLE
	OpEQ
	OpNE
)

var compareNames = [...]string{"gt", "lt", "ge", "le", "eq", "ne"}

func (op CompareOp) String() string {
	if op < OpGT || op > OpNE {
		return fmt.Sprintf("compare(%d)", int(op))
	}
	return compareNames[op]
}

// operands are a and b (tensors or numbers) at their broadcast shape, not
// recorded; a number is a tensor full of its float32 value, as PyTorch casts
// a Python number to the tensor's dtype.
func (e *Engine) operands(name string, a, b Operand) (*Tensor, *Tensor, error) {
	var shape []int
	var err error
	switch {
	case a.T != nil && b.T != nil:
		if shape, err = broadcastShape(name, a.T.shape, b.T.shape); err != nil {
			return nil, nil, err
		}
	case a.T != nil:
		shape = a.T.shape
	case b.T != nil:
		shape = b.T.shape
	default:
		return nil, nil, argErrorf("%s: expected at least one tensor, got two numbers", name)
	}
	for _, o := range []Operand{a, b} {
		if o.T != nil && o.T.storage().dtype == ggmlcgo.I32 {
			return nil, nil, fmt.Errorf("%s: %w", name, errIntOperand(o.T))
		}
	}
	one := func(o Operand, like *Tensor) (*Tensor, error) {
		if o.T != nil {
			return e.expandConst(o.T, shape)
		}
		return e.fillLike(like, float32(o.N))
	}
	var ch chain
	do := ch.do
	var x, y *Tensor
	if a.T != nil {
		x = do(func() (*Tensor, error) { return one(a, nil) })
		y = do(func() (*Tensor, error) { return one(b, x) })
	} else {
		y = do(func() (*Tensor, error) { return one(b, nil) })
		x = do(func() (*Tensor, error) { return one(a, y) })
	}
	return x, y, ch.err
}

// Compare is a op b, elementwise with broadcasting, a number on either
// side: a 0/1 mask. NaN compares as in IEEE 754: unequal to everything,
// itself included (ne is 1, every other comparison 0).
func (e *Engine) Compare(op CompareOp, a, b Operand) (*Tensor, error) {
	if op < OpGT || op > OpNE {
		return nil, argErrorf("compare: unknown comparison %d", int(op))
	}
	x, y, err := e.operands(op.String(), a, b)
	if err != nil {
		return nil, err
	}
	return e.compare(op, x, y)
}

// compare is x op y for tensors of the same shape, not recorded, from the
// sign of d + s, where d = finite(x) - finite(y), ±inf counted as ±max
// float (so inf - inf is 0 rather than NaN; a difference that overflows is
// still ±inf of the right sign), and s = inf(x) - inf(y) with inf() the
// sign of an infinity (0 for a number), which tells inf from max float. d
// and s never have opposite signs. The result is then zeroed where either
// side is NaN (ne: set to 1).
func (e *Engine) compare(op CompareOp, x, y *Tensor) (*Tensor, error) {
	var ch chain
	do := ch.do
	sh := x.shape
	numbers := do(func() (*Tensor, error) {
		return e.build("cmp_nan", sh, []*Tensor{x, y}, func(b *nodes, in []node) node {
			return b.mul(b.notNaN(in[0]), b.notNaN(in[1]))
		})
	})
	diff := do(func() (*Tensor, error) {
		return e.build("cmp_diff", sh, []*Tensor{x, y}, func(b *nodes, in []node) node {
			return b.sub(b.finite(in[0]), b.finite(in[1]))
		})
	})
	infs := do(func() (*Tensor, error) {
		return e.build("cmp_inf", sh, []*Tensor{x, y}, func(b *nodes, in []node) node {
			inf := func(a node) node {
				return b.sub(b.unary("step", b.scaleBias(a, 1, -maxF32)), b.unary("step", b.scaleBias(a, -1, -maxF32)))
			}
			return b.sub(inf(in[0]), inf(in[1]))
		})
	})
	return do(func() (*Tensor, error) {
		return e.build(op.String(), sh, []*Tensor{diff, infs, numbers}, func(b *nodes, in []node) node {
			d, num := b.add(in[0], in[1]), in[2]
			var m node
			switch op {
			case OpGT:
				m = b.unary("step", d)
			case OpLT:
				m = b.unary("step", b.scale(d, -1))
			case OpGE:
				m = b.scaleBias(b.unary("step", b.scale(d, -1)), -1, 1)
			case OpLE:
				m = b.scaleBias(b.unary("step", d), -1, 1)
			default: // eq, ne
				m = b.scaleBias(b.unary("step", b.unary("abs", d)), -1, 1)
			}
			m = b.mul(m, num)
			if op == OpNE {
				m = b.scaleBias(m, -1, 1)
			}
			return m
		})
	}), ch.err
}

// truth is x != 0 as a 0/1 mask (NaN is true), not recorded.
func (e *Engine) truth(x *Tensor) (*Tensor, error) {
	return e.build("nonzero", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
		return b.scaleBias(b.isZero(in[0]), -1, 1)
	})
}

// IsNaN is 1 where x is NaN.
func (e *Engine) IsNaN(x *Tensor) (*Tensor, error) {
	return e.build("isnan", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
		return b.scaleBias(b.notNaN(in[0]), -1, 1)
	})
}

// IsInf is 1 where x is +inf or -inf.
func (e *Engine) IsInf(x *Tensor) (*Tensor, error) {
	return e.build("isinf", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
		return b.unary("step", b.scaleBias(b.unary("abs", in[0]), 1, -maxF32))
	})
}

// IsFinite is 1 where x is neither infinite nor NaN.
func (e *Engine) IsFinite(x *Tensor) (*Tensor, error) {
	return e.build("isfinite", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
		inf := b.unary("step", b.scaleBias(b.unary("abs", in[0]), 1, -maxF32))
		return b.mul(b.notNaN(in[0]), b.scaleBias(inf, -1, 1))
	})
}

// LogicalNot is 1 where x is 0.
func (e *Engine) LogicalNot(x *Tensor) (*Tensor, error) {
	return e.build("logical_not", x.shape, []*Tensor{x}, func(b *nodes, in []node) node { return b.isZero(in[0]) })
}

// LogicalOp is one of the two-operand logical ops.
type LogicalOp int

const (
	OpAnd LogicalOp = iota
	OpOr
	OpXor
)

var logicalNames = [...]string{"logical_and", "logical_or", "logical_xor"}

func (op LogicalOp) String() string {
	if op < OpAnd || op > OpXor {
		return fmt.Sprintf("logical(%d)", int(op))
	}
	return logicalNames[op]
}

// Logical is a op b on truth values (nonzero is true), with broadcasting, a
// number on either side: a 0/1 mask.
func (e *Engine) Logical(op LogicalOp, a, b Operand) (*Tensor, error) {
	if op < OpAnd || op > OpXor {
		return nil, argErrorf("logical: unknown op %d", int(op))
	}
	x, y, err := e.operands(op.String(), a, b)
	if err != nil {
		return nil, err
	}
	return e.build(op.String(), x.shape, []*Tensor{x, y}, func(b *nodes, in []node) node {
		p := b.scaleBias(b.isZero(in[0]), -1, 1)
		q := b.scaleBias(b.isZero(in[1]), -1, 1)
		switch op {
		case OpAnd:
			return b.mul(p, q)
		case OpOr:
			return b.unary("step", b.add(p, q))
		}
		return b.unary("abs", b.sub(p, q))
	})
}

// Any is 1 (shape [1]) if some element of x is nonzero (NaN included).
func (e *Engine) Any(x *Tensor) (*Tensor, error) { return e.anyAll("any", x, nil, false) }

// All is 1 (shape [1]) if every element of x is nonzero (NaN included).
func (e *Engine) All(x *Tensor) (*Tensor, error) { return e.anyAll("all", x, nil, false) }

// AnyDim is any along dim (0-based, negative from the end).
func (e *Engine) AnyDim(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	return e.anyAll("any", x, &dim, keepdim)
}

// AllDim is all along dim (0-based, negative from the end).
func (e *Engine) AllDim(x *Tensor, dim int, keepdim bool) (*Tensor, error) {
	return e.anyAll("all", x, &dim, keepdim)
}

// anyAll counts the nonzero (any) or zero (all) elements, of the whole
// tensor (dim nil) or along *dim, and tests the count.
func (e *Engine) anyAll(name string, x *Tensor, dim *int, keepdim bool) (*Tensor, error) {
	if dim != nil {
		if _, err := checkDim(name, x.shape, *dim); err != nil {
			return nil, err
		}
	}
	all := name == "all"
	var ch chain
	do := ch.do
	m := do(func() (*Tensor, error) {
		if all {
			return e.LogicalNot(x)
		}
		return e.truth(x)
	})
	n := do(func() (*Tensor, error) {
		if dim == nil {
			return e.Sum(m)
		}
		return e.SumDim(m, *dim, keepdim)
	})
	return do(func() (*Tensor, error) {
		return e.build(name, n.shape, []*Tensor{n}, func(b *nodes, in []node) node {
			some := b.unary("step", in[0])
			if all {
				return b.scaleBias(some, -1, 1)
			}
			return some
		})
	}), ch.err
}

// ---- selections ----

// Where is a where cond is nonzero (NaN included) and b elsewhere, all
// three broadcast together; a and b may be numbers. The gradient goes to a
// where cond holds and to b elsewhere (exactly 0 to the other, even where
// the gradient is inf or NaN), summed back to each operand's shape.
func (e *Engine) Where(cond *Tensor, a, b Operand) (*Tensor, error) {
	shape := cond.shape
	var err error
	for _, o := range []Operand{a, b} {
		if o.T != nil {
			if shape, err = broadcastShape("where", shape, o.T.shape); err != nil {
				return nil, err
			}
		}
	}
	var ch chain
	do := ch.do
	c := do(func() (*Tensor, error) { return e.expandConst(cond, shape) })
	mask := do(func() (*Tensor, error) { return e.truth(c) })
	side := func(o Operand) *Tensor {
		if o.T != nil {
			return do(func() (*Tensor, error) { return e.expandTo(o.T, shape) })
		}
		return do(func() (*Tensor, error) { return e.fillLike(c, float32(o.N)) })
	}
	x, y := side(a), side(b)
	return do(func() (*Tensor, error) { return e.where(mask, x, y) }), ch.err
}

// MaskedFill is x with v where mask (broadcast to x's shape) is nonzero;
// the gradient passes to x elsewhere.
func (e *Engine) MaskedFill(x, mask *Tensor, v float64) (*Tensor, error) {
	if err := checkMask("masked_fill", x, mask); err != nil {
		return nil, err
	}
	var ch chain
	do := ch.do
	c := do(func() (*Tensor, error) { return e.expandConst(mask, x.shape) })
	m := do(func() (*Tensor, error) { return e.truth(c) })
	fill := do(func() (*Tensor, error) { return e.fillLike(x, float32(v)) })
	return do(func() (*Tensor, error) { return e.where(m, fill, x) }), ch.err
}

// checkMask refuses a mask that does not broadcast to x's shape.
func checkMask(op string, x, mask *Tensor) error {
	shape, err := broadcastShape(op, x.shape, mask.shape)
	if err == nil && !sameShape(shape, x.shape) {
		err = shapeErrorf("%s: mask of shape %s does not broadcast to the tensor's shape %s", op, ShapeString(mask.shape), ShapeString(x.shape))
	}
	return err
}

// Tril keeps the elements on and below the k-th diagonal of the last two
// dims (k > 0 above the main one, k < 0 below) and zeroes the rest (an inf
// or NaN zeroed is 0); the gradient is masked the same way.
func (e *Engine) Tril(x *Tensor, k int) (*Tensor, error) { return e.triangle("tril", x, k) }

// Triu keeps the elements on and above the k-th diagonal of the last two
// dims and zeroes the rest; the gradient is masked the same way.
func (e *Engine) Triu(x *Tensor, k int) (*Tensor, error) { return e.triangle("triu", x, k) }

func (e *Engine) triangle(name string, x *Tensor, k int) (*Tensor, error) {
	nd := len(x.shape)
	if nd < 2 {
		return nil, shapeErrorf("%s: expected a tensor of at least 2 dims, got shape %s", name, ShapeString(x.shape))
	}
	rows, cols := x.shape[nd-2], x.shape[nd-1]
	keep := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			if (name == "tril" && j-i <= k) || (name == "triu" && j-i >= k) {
				keep[i*cols+j] = 1
			}
		}
	}
	var ch chain
	do := ch.do
	m := do(func() (*Tensor, error) { return FromFloat32(keep, rows, cols) })
	m = do(func() (*Tensor, error) { return e.expandConst(m, x.shape) })
	zero := do(func() (*Tensor, error) { return e.fillLike(x, 0) })
	return do(func() (*Tensor, error) { return e.where(m, x, zero) }), ch.err
}

// Maximum is the larger of a and b elementwise, with broadcasting; NaN if
// either is NaN. The gradient goes to the larger one, half to each on a
// tie, and whole to both where either is NaN, as PyTorch 1.13's.
func (e *Engine) Maximum(a, b *Tensor) (*Tensor, error) {
	return e.extremum("maximum", a, b, OpGE, OpLT)
}

// Minimum is the smaller of a and b elementwise, as Maximum.
func (e *Engine) Minimum(a, b *Tensor) (*Tensor, error) {
	return e.extremum("minimum", a, b, OpLE, OpGT)
}

// extremum picks a where a pick b (else b); a gets no gradient where a
// loses b, b none where b loses a.
func (e *Engine) extremum(name string, a, b *Tensor, pick, loses CompareOp) (*Tensor, error) {
	shape, err := broadcastShape(name, a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	var ch chain
	do := ch.do
	x := do(func() (*Tensor, error) { return e.expandTo(a, shape) })
	y := do(func() (*Tensor, error) { return e.expandTo(b, shape) })
	p := do(func() (*Tensor, error) { return e.compare(pick, x, y) })
	v := do(func() (*Tensor, error) {
		return e.build(name, shape, []*Tensor{p, x, y}, func(b *nodes, in []node) node { return b.where(in[0], in[1], in[2]) })
	})
	out := do(func() (*Tensor, error) {
		return e.build(name, shape, []*Tensor{v, x, y}, func(b *nodes, in []node) node {
			return b.nanWhere(in[2], b.nanWhere(in[1], in[0]))
		})
	})
	if ch.err != nil {
		return nil, ch.err
	}
	e.record(out, name, []*Tensor{x, y}, func(g *Tensor) ([]*Tensor, error) {
		var ch chain
		do := ch.do
		tie := do(func() (*Tensor, error) { return e.compare(OpEQ, x, y) })
		half := do(func() (*Tensor, error) { // g, halved on a tie
			return e.build(name+"_back", shape, []*Tensor{g, tie}, func(b *nodes, in []node) node {
				return b.mul(in[0], b.scaleBias(in[1], -0.5, 1))
			})
		})
		grads := []*Tensor{nil, nil}
		for i, t := range []*Tensor{x, y} {
			if !t.requiresGrad {
				continue
			}
			l, r := x, y
			if i == 1 {
				l, r = y, x
			}
			lost := do(func() (*Tensor, error) { return e.compare(loses, l, r) })
			grads[i] = do(func() (*Tensor, error) { return e.whereConst(lost, 0, half) })
		}
		return grads, ch.err
	})
	return out, nil
}
