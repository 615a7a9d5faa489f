package core

import "math"

// Builders for ops made of several ggml nodes. An op's forward (and the
// masks its gradient uses) may need many nodes; nodes chains their
// construction with a sticky error, and the helpers below build the
// selections ggml lacks (where, NaN tests, row maxima) from ops whose
// results do not depend on the backend: step(NaN) and relu(NaN) are 0 and
// tanh keeps NaN on the CPU and on CUDA alike.

// nodes builds the ggml nodes of one op with a sticky error: after the
// first failure every call returns the zero node and err keeps the failure.
// An op gets a node context with room for at least opNodeRoom nodes: a
// build that needs more is split into several ops.
type nodes struct {
	c   ctx
	err error
	gpu bool // not the CPU backend: see rowMax
}

// nodes starts building an op's nodes in c.
func (e *Engine) nodes(c ctx) *nodes { return &nodes{c: c, gpu: !e.backend.IsCPU()} }

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
//
// ggml-cuda's argmax starts from -FLT_MAX and keeps only greater values, so
// a row of -inf, -FLT_MAX or NaN gets index -1, which get_rows would read
// out of bounds; off the CPU the argmax is taken on finite(a)/2, which is
// always greater (the CPU's argmax starts at index 0).
func (b *nodes) rowMax(a node, cols, rows int64) node {
	by := a
	if b.gpu {
		by = b.scale(b.finite(a), 0.5)
	}
	return b.rowPick(a, by, cols, rows)
}

// rowPick is, in each row of a (ne (cols, rows)), the element where by (of
// the same shape) has its row's maximum, as ne (1, rows). by's maximum must
// be unique for the pick not to depend on the backend's argmax.
func (b *nodes) rowPick(a, by node, cols, rows int64) node {
	if b.err != nil {
		return node{}
	}
	idx := b.set(b.c.Argmax(by)) // i32, ne (rows)
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
	// The concats keep their second and third dims within CUDA's grid
	// limit (gridLayout); the results, contiguous, are reshaped to the
	// (2, n) scores and (1, 2, n) pairs that argmax and get_rows read.
	l := gridLayout(n)
	c1 := b.reshape(cond, [4]int64{1, l[0], l[1], l[2]})
	scores := b.reshape(b.concat(b.scaleBias(c1, -1, 1), c1, 0), [4]int64{2, n, 1, 1})
	if b.err != nil {
		return node{}
	}
	idx := b.set(b.c.Argmax(scores)) // i32 ne (n): 1 where cond
	if b.err == nil {
		idx = b.set(b.c.View(idx, [4]int64{1, n, 1, 1}, [3]int64{4, 4 * n, 4 * n}, 0))
	}
	side := [4]int64{1, 1, l[0], l[1] * l[2]}
	pair := b.reshape(b.concat(b.reshape(y, side), b.reshape(x, side), 1), [4]int64{1, 2, n, 1}) // ne (1, 2, n)
	if b.err != nil {
		return node{}
	}
	return b.reshape(b.set(b.c.GetRows(pair, idx)), ne)
}

// cudaGridLimit is CUDA's limit on a launch grid's second and third
// dimensions, which ggml-cuda's concat (and get_rows_back) give a
// tensor's ne1 and ne2: past it the launch fails and ggml aborts.
const cudaGridLimit = 65535

// gridLayout splits n elements into (a, b, c) with a*b*c = n and a, b
// within cudaGridLimit (c, the outermost, is looped over on the host): a
// and b the largest divisors that fit.
func gridLayout(n int64) [3]int64 {
	divisor := func(m int64) int64 {
		for d := min(m, cudaGridLimit); d > 1; d-- {
			if m%d == 0 {
				return d
			}
		}
		return 1
	}
	a := divisor(n)
	b := divisor(n / a)
	return [3]int64{a, b, n / a / b}
}

// notNaN is 1 where a is a number (±inf included), 0 where it is NaN.
func (b *nodes) notNaN(a node) node {
	return b.unary("step", b.scaleBias(b.unary("abs", a), 1, 1))
}

// nanOf is 0 where a is a number and NaN where a is NaN (tanh takes ±inf
// to ±1, so only NaN survives the multiplication by 0). On a GPU a leading
// scale by 1 makes the nodes ggml-cuda's softcap pattern (scale, tanh,
// scale), which it fuses into one kernel: a NaN-exact relu is then three
// kernels instead of four.
func (b *nodes) nanOf(a node) node {
	if b.gpu {
		a = b.scale(a, 1)
	}
	return b.scale(b.unary("tanh", a), 0)
}

// nanWhere is y, but NaN wherever src is NaN: ops that ggml computes with
// comparisons (clamp, relu) turn NaN into a number, PyTorch keeps it.
func (b *nodes) nanWhere(src, y node) node { return b.add(y, b.nanOf(src)) }

// reluMask is 1 where relu's result y is positive or NaN, 0 where it is
// ±0 (y is never negative): 1 - step(1 - y·2^150). y·2^150 is at least 2
// for the smallest positive float (2^-149), so 1 - y·2^150 is positive
// only at 0; NaN stays NaN, which step takes to 0. Two scales, as 2^150
// overflows a float. Four kernels (step(y) + isNaN(y) took five). (On a
// GPU ggml-cuda flushes subnormals, so a subnormal y is 0 there already.)
func (b *nodes) reluMask(y node) node {
	big := b.scale(y, 0x1p75)
	return b.scaleBias(b.unary("step", b.scaleBias(big, -0x1p75, 1)), -1, 1)
}

// isZero is 1 where a == 0 (either sign), 0 elsewhere and at NaN.
func (b *nodes) isZero(a node) node {
	ab := b.unary("abs", a)
	zero := b.scaleBias(b.unary("step", ab), -1, 1) // 1 at 0 and at NaN
	return b.mul(zero, b.unary("step", b.scaleBias(ab, 1, 1)))
}

// build is an op of several nodes, computed without recording.
func (e *Engine) build(name string, shape []int, inputs []*Tensor, f func(b *nodes, in []node) node) (*Tensor, error) {
	return e.newOp(name, shape, inputs, func(c ctx, in []node) (node, error) {
		b := e.nodes(c)
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
	need := []bool{a.requiresGrad, b.requiresGrad} // the tape keeps cond alone
	e.record(out, "where", []*Tensor{cond, a, b}, func(g *Tensor) ([]*Tensor, error) {
		grads := []*Tensor{nil, nil, nil}
		for i := range need {
			if !need[i] {
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

// finite is a with NaN made 0 (relu(NaN) is 0 on every backend) and ±inf
// made ±max float, so that comparisons on it are exact.
func (b *nodes) finite(a node) node {
	d := b.sub(b.unary("relu", a), b.unary("relu", b.scale(a, -1)))
	return b.clamp(d, -math.MaxFloat32, math.MaxFloat32)
}

// eq is 1 where x == y (both finite; y broadcasts), else 0.
func (b *nodes) eq(x, y node) node {
	return b.scaleBias(b.unary("step", b.unary("abs", b.sub(x, y))), -1, 1)
}
