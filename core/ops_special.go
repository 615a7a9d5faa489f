package core

import "math"

// Special functions built from ggml's elementwise ops.

// erfSeries holds the Maclaurin coefficients of erf in z², 2/√π ·
// (-1)^n / (n! (2n+1)), n = 0..7: for |z| <= 1/2 the next term is below
// 2e-11, far under an f32 ulp.
var erfSeries = [...]float32{
	1.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252,
	0.005223977625442188, -0.0008548327023450852, 0.00012055332981789664, -1.492565035840625e-05,
}

// Erf is the error function, as PyTorch's erf; its gradient is
// 2/√π · e^(-x²).
//
// ggml has no erf, but its gelu_erf is x·(1 + erf(x/√2))/2, so erf(z) =
// 2·gelu_erf(z√2)/(z√2) - 1. That subtraction cancels for small z (at z =
// 1e-4 it would keep 3 digits), so where |z| < 1/2 the Maclaurin series is
// used instead; the two are blended by a 0/1 mask (m), with both branches
// kept finite everywhere (the series on z clamped to ±1/2, the quotient's
// divisor shifted by m where it is not used, z clamped to ±6, past which
// erf is ±1 in f32) so that 0·branch is 0. NaN is added back at the end.
func (e *Engine) Erf(x *Tensor) (*Tensor, error) {
	return e.unaryOp("erf", x, savesA, func(c ctx, a node) (node, error) {
		b := e.nodes(c)
		m := b.unary("step", b.scaleBias(b.unary("abs", a), -1, 0.5)) // |z| < 1/2
		// The series, Horner in z² on z clamped to ±1/2.
		zs := b.clamp(a, -0.5, 0.5)
		z2 := b.mul(zs, zs)
		n := len(erfSeries)
		p := b.scaleBias(z2, erfSeries[n-1], erfSeries[n-2])
		for k := n - 3; k >= 0; k-- {
			p = b.scaleBias(b.mul(p, z2), 1, erfSeries[k])
		}
		series := b.mul(zs, p)
		// The quotient of gelu_erf, on z clamped to ±6.
		xs := b.scale(b.clamp(a, -6, 6), math.Sqrt2)
		quot := b.scaleBias(b.div(b.unary("gelu_erf", xs), b.add(xs, m)), 2, -1)
		// m ? series : quotient, as two exact products (one of them 0)
		y := b.add(b.mul(m, series), b.mul(b.scaleBias(m, -1, 1), quot))
		return b.nanWhere(a, y), b.err
	}, func(g, x, y *Tensor) (*Tensor, error) {
		d, err := e.build("erf_back", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			return b.scale(b.unary("exp", b.scale(b.unary("sqr", in[0]), -1)), erfSeries[0])
		})
		if err != nil {
			return nil, err
		}
		return e.Mul(g, d)
	})
}
