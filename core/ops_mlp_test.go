package core

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// mlpCase is a small MLP's inputs, made afresh for each engine.
type mlpCase struct{ x, w1, b1, w2, b2, r *Tensor }

func newMLPCase(t *testing.T, rows, d, hidden, out int, batch bool) mlpCase {
	rng := rand.New(rand.NewSource(7))
	randn := func(scale float64, shape ...int) *Tensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		x := host(t, shape, v...)
		require.NoError(t, x.SetRequiresGrad(true))
		return x
	}
	c := mlpCase{w1: randn(0.5, hidden, d), b1: randn(0.5, hidden), w2: randn(0.5, out, hidden), b2: randn(0.5, out)}
	if batch {
		c.x, c.r = randn(1, 2, rows/2, d), randn(1, 2, rows/2, out)
	} else {
		c.x, c.r = randn(1, rows, d), randn(1, rows, out)
	}
	require.NoError(t, c.r.SetRequiresGrad(false))
	return c
}

// mlpRun is MLP's result and the gradients of sum(y · r) for its five
// inputs, under autocast on the devices' bf16 gemm (forced on the CPU).
func mlpRun(t *testing.T, c mlpCase, composed bool) [][]float32 {
	defer func(g, m bool) { forceGemmBF16, forceComposedMLP = g, m }(forceGemmBF16, forceComposedMLP)
	forceGemmBF16, forceComposedMLP = true, composed
	e := newEngine(t)
	var y *Tensor
	var grads map[*Tensor]*Tensor
	require.NoError(t, e.WithGradTape(func() error {
		err := e.Autocast(ggmlcgo.BF16, func() (err error) {
			y, err = e.MLP(c.x, c.w1, c.b1, c.w2, c.b2)
			return err
		})
		if err != nil {
			return err
		}
		loss := e.must(e.Sum(e.must(e.Mul(y, c.r))))
		grads, err = e.Backward(loss)
		return err
	}))
	out := [][]float32{values(t, y)}
	for _, in := range []*Tensor{c.x, c.w1, c.b1, c.w2, c.b2} {
		out = append(out, values(t, grads[in]))
		in.grad = nil
	}
	return out
}

// The fused MLP against the composition (LinearBias, Gelu, LinearBias),
// both under autocast on the bf16 gemm: the fused one rounds the first
// product's result and GELU's to bf16, as PyTorch's autocast does, so the
// two agree to bf16's precision, values and every gradient; 2-d and 3-d,
// dims that are not multiples of 8.
func TestMLPAsTheComposition(t *testing.T) {
	for _, batch := range []bool{false, true} {
		c := newMLPCase(t, 6, 5, 12, 3, batch)
		fused, composed := mlpRun(t, c, false), mlpRun(t, c, true)
		for i, name := range []string{"y", "dx", "dw1", "db1", "dw2", "db2"} {
			require.Len(t, fused[i], len(composed[i]), name)
			scale := 0.0
			for _, v := range composed[i] {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			for j := range fused[i] {
				assert.InDelta(t, composed[i][j], fused[i][j], 3e-2*scale+1e-6, "batch %v: %s[%d]", batch, name, j)
			}
		}
	}
}

// The fused MLP's values are those of PyTorch's autocast, worked out here
// in float64 from the rounded operands: h = bf16(x̃·w̃1ᵀ + b1), a =
// bf16(gelu(h)), y = a·w̃2ᵀ + b2 (x̃ the bf16 rounding of x); the gradients
// of sum(y·r) with g̃ = bf16(r): dh = bf16(g̃·w̃2 · gelu'(h)), dx = dh·w̃1,
// dw1 = dhᵀ·x̃, db1 = Σ dh, dw2 = g̃ᵀ·a, db2 = Σ r. A product that kept h
// or GELU's result in f32 lands farther off than these bounds.
func TestMLPRoundsAsTorchAutocast(t *testing.T) {
	const rows, d, hidden, out = 4, 8, 16, 8
	c := newMLPCase(t, rows, d, hidden, out, false)
	got := mlpRun(t, c, false)
	r16 := func(v float64) float64 { return float64(roundBF16(float32(v))) }
	vals := func(x *Tensor) []float64 {
		v := values(t, x)
		f := make([]float64, len(v))
		for i := range v {
			f[i] = float64(v[i])
		}
		return f
	}
	rounded := func(x *Tensor) []float64 {
		f := vals(x)
		for i := range f {
			f[i] = r16(f[i])
		}
		return f
	}
	x, w1, w2, r := rounded(c.x), rounded(c.w1), rounded(c.w2), rounded(c.r)
	b1, b2, rf := vals(c.b1), vals(c.b2), vals(c.r)
	gelu := func(v float64) float64 { return v * 0.5 * (1 + math.Erf(v/math.Sqrt2)) }
	dgelu := func(v float64) float64 {
		return 0.5*(1+math.Erf(v/math.Sqrt2)) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi)
	}
	h, a, dh := make([]float64, rows*hidden), make([]float64, rows*hidden), make([]float64, rows*hidden)
	y := make([]float64, rows*out)
	for i := 0; i < rows; i++ {
		for j := 0; j < hidden; j++ {
			s := b1[j]
			for l := 0; l < d; l++ {
				s += x[i*d+l] * w1[j*d+l]
			}
			h[i*hidden+j] = r16(s)
			a[i*hidden+j] = r16(gelu(h[i*hidden+j]))
		}
		for j := 0; j < out; j++ {
			s := b2[j]
			for l := 0; l < hidden; l++ {
				s += a[i*hidden+l] * w2[j*hidden+l]
			}
			y[i*out+j] = s
		}
		for j := 0; j < hidden; j++ {
			var s float64
			for l := 0; l < out; l++ {
				s += r[i*out+l] * w2[l*hidden+j]
			}
			dh[i*hidden+j] = r16(s * dgelu(h[i*hidden+j]))
		}
	}
	dx, dw1, db1 := make([]float64, rows*d), make([]float64, hidden*d), make([]float64, hidden)
	dw2, db2 := make([]float64, out*hidden), make([]float64, out)
	for i := 0; i < rows; i++ {
		for l := 0; l < d; l++ {
			for j := 0; j < hidden; j++ {
				dx[i*d+l] += dh[i*hidden+j] * w1[j*d+l]
				dw1[j*d+l] += dh[i*hidden+j] * x[i*d+l]
			}
		}
		for j := 0; j < hidden; j++ {
			db1[j] += dh[i*hidden+j]
			for l := 0; l < out; l++ {
				dw2[l*hidden+j] += r[i*out+l] * a[i*hidden+j]
			}
		}
		for l := 0; l < out; l++ {
			db2[l] += rf[i*out+l]
		}
	}
	for i, want := range [][]float64{y, dx, dw1, db1, dw2, db2} {
		for j := range want {
			// f32 sums against float64 ones, and a bf16 rounding of h or
			// dh that a sum's last bit tipped the other way: one bf16 step
			// of what it scales.
			assert.InDelta(t, want[j], got[i][j], 1e-5+math.Abs(want[j])/200, "result %d element %d", i, j)
		}
	}
}

// The forward of a fused MLP keeps x's bf16 copy and h in bf16, where the
// composition keeps GELU's result besides (as the forward's graph on a
// device sees it: pass memory of its own).
func TestMLPKeepsHalfTheComposition(t *testing.T) {
	defer func(g bool) { forceGemmBF16 = g }(forceGemmBF16)
	forceGemmBF16 = true
	fused, composed := mlpPlaced(t, ggmlcgo.BF16, false), mlpPlaced(t, ggmlcgo.BF16, true)
	// x and h in bf16, the weights' bf16 copies (host weights: a resident
	// weight's is made again by the backward) and the loss; not x itself.
	assert.Equal(t, int64(2*mlpRows*(mlpWidth+mlpHidden)+2*2*mlpHidden*mlpWidth+4), fused)
	assert.Less(t, fused, composed, "the composition keeps GELU's result besides")
}

// On a device in f32 MLP keeps GELU's input alone and makes GELU's result
// again in the backward (forced on the CPU here). For every set of trained
// inputs among x, w1, b1, w2 and b2, 2-d and 3-d, its values and gradients
// are the composition's bit for bit, and its forward keeps no more than the
// composition's: GELU's result less where both keep GELU's input.
func TestMLPInF32RemakesGELU(t *testing.T) {
	defer func(r bool) { forceRemadeMLP = r }(forceRemadeMLP)
	forceRemadeMLP = true
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	const rows, d, hidden, out = 6, 5, 12, 3
	caseFor := func(mask int, batch bool) mlpCase {
		c := newMLPCase(t, rows, d, hidden, out, batch)
		for i, p := range []*Tensor{c.x, c.w1, c.b1, c.w2, c.b2} {
			require.NoError(t, p.SetRequiresGrad(mask&(1<<i) != 0))
		}
		return c
	}
	run := func(c mlpCase, composed bool) (out [][]float32, remade bool) {
		defer func(m bool) { forceComposedMLP = m }(forceComposedMLP)
		forceComposedMLP = composed
		e := newEngine(t)
		var y *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			remade = e.remadeMLP(c.x, c.w1, c.b1, c.w2, c.b2)
			if y, err = e.MLP(c.x, c.w1, c.b1, c.w2, c.b2); err != nil {
				return err
			}
			_, err = e.Backward(e.must(e.Sum(e.must(e.Mul(y, c.r)))))
			return err
		}))
		out = [][]float32{values(t, y)}
		for _, in := range []*Tensor{c.x, c.w1, c.b1, c.w2, c.b2} {
			if in.grad != nil {
				out = append(out, values(t, in.grad))
			}
			in.grad = nil
		}
		return out, remade
	}
	placed := func(mask int, composed bool) int64 {
		defer func(m bool) { forceComposedMLP = m }(forceComposedMLP)
		forceComposedMLP = composed
		e := newEngine(t)
		c := caseFor(mask, false)
		return forwardPlaced(t, e, ggmlcgo.F32, func() (*Tensor, error) {
			x := e.must(e.Scale(c.x, 2)) // an activation where x is trained
			return e.Sum(e.must(e.MLP(x, c.w1, c.b1, c.w2, c.b2)))
		})
	}
	for mask := 1; mask < 32; mask++ {
		for _, batch := range []bool{false, true} {
			got, remade := run(caseFor(mask, batch), false)
			want, composed := run(caseFor(mask, batch), true)
			require.True(t, remade, "mask %05b", mask)
			require.False(t, composed, "mask %05b", mask)
			require.Len(t, got, len(want), "mask %05b", mask)
			for i := range want {
				assert.Equal(t, bitsOfFloats(want[i]), bitsOfFloats(got[i]), "trained %05b (x w1 b1 w2 b2 from the right), batch %v: result %d", mask, batch, i)
			}
		}
		remade, composed := placed(mask, false), placed(mask, true)
		less := int64(0)
		if mask&0b111 != 0 && mask&0b1000 != 0 { // both keep h; the composition GELU's result too
			less = 4 * rows * hidden
		}
		assert.Equal(t, composed-less, remade, "trained %05b: bytes the forward keeps", mask)
	}
}

// In f32 the forward keeps x (the first product's input) and h (GELU's
// input), not GELU's result, which the composition keeps besides (as the
// forward's graph on a device sees it: pass memory of its own).
func TestMLPInF32KeepsGELUsInputAlone(t *testing.T) {
	defer func(r bool) { forceRemadeMLP = r }(forceRemadeMLP)
	forceRemadeMLP = true
	remade, composed := mlpPlaced(t, ggmlcgo.F32, false), mlpPlaced(t, ggmlcgo.F32, true)
	assert.Equal(t, int64(4*mlpRows*(mlpWidth+mlpHidden)+4), remade, "x, h and the loss")
	assert.Equal(t, remade+4*mlpRows*mlpHidden, composed, "and GELU's result")
}

const mlpRows, mlpWidth, mlpHidden = 256, 64, 256

// mlpPlaced is the pass memory the forward of an MLP of an activation
// keeps (as the forward's graph on a device sees it), products of type
// prec, the composition or not.
func mlpPlaced(t *testing.T, prec ggmlcgo.Type, composed bool) int64 {
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	defer func(m bool) { forceComposedMLP = m }(forceComposedMLP)
	forceComposedMLP = composed
	e := newEngine(t)
	c := newMLPCase(t, mlpRows, mlpWidth, mlpHidden, mlpWidth, false)
	return forwardPlaced(t, e, prec, func() (*Tensor, error) {
		x := e.must(e.Scale(c.x, 2)) // an activation
		return e.Sum(e.must(e.MLP(x, c.w1, c.b1, c.w2, c.b2)))
	})
}

// SwiGLU's values and gradients are the composition's, silu(g)·u, bit for
// bit, with either input frozen; mismatched shapes are refused.
func TestSwiGLUAsTheComposition(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 2)
		}
		return v
	}
	gv, uv, rv := randn(24), randn(24), randn(24)
	run := func(fused, trainG, trainU bool) [][]float32 {
		e := newEngine(t)
		g, u, r := host(t, []int{4, 6}, gv...), host(t, []int{4, 6}, uv...), host(t, []int{4, 6}, rv...)
		require.NoError(t, g.SetRequiresGrad(trainG))
		require.NoError(t, u.SetRequiresGrad(trainU))
		var y *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			if fused {
				y = e.must(e.SwiGLU(g, u))
			} else {
				y = e.must(e.Mul(e.must(e.Silu(g)), u))
			}
			_, err := e.Backward(e.must(e.Sum(e.must(e.Mul(y, r)))))
			return err
		}))
		out := [][]float32{values(t, y)}
		for _, p := range []*Tensor{g, u} {
			if p.requiresGrad {
				out = append(out, values(t, p.Grad()))
			}
		}
		return out
	}
	for _, train := range [][2]bool{{true, true}, {true, false}, {false, true}} {
		got, want := run(true, train[0], train[1]), run(false, train[0], train[1])
		require.Len(t, got, len(want))
		for i := range want {
			assert.Equal(t, bitsOfFloats(want[i]), bitsOfFloats(got[i]), "trained %v: result %d", train, i)
		}
	}
	e := newEngine(t)
	_, err := e.SwiGLU(host(t, []int{2, 3}, make([]float32, 6)...), host(t, []int{3, 2}, make([]float32, 6)...))
	require.ErrorIs(t, err, ErrShape)
	assert.Contains(t, err.Error(), "swiglu: the gate has shape 2x3 and the up projection 3x2")
}

// SwiGLU's forward keeps what its gradients read, not silu(g), which the
// composition keeps besides (as the forward's graph on a device sees it):
// g and u where g is trained, g alone where only u is.
func TestSwiGLUKeepsWhatItsGradientsRead(t *testing.T) {
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	const n = 1 << 12
	placed := func(fused, trainG, trainU bool) int64 {
		e := newEngine(t)
		a, b := host(t, []int{n}, make([]float32, n)...), host(t, []int{n}, make([]float32, n)...)
		require.NoError(t, a.SetRequiresGrad(trainG))
		require.NoError(t, b.SetRequiresGrad(trainU))
		return forwardPlaced(t, e, ggmlcgo.F32, func() (*Tensor, error) {
			g, u := e.must(e.Scale(a, 2)), e.must(e.Scale(b, 3)) // activations
			if fused {
				return e.Sum(e.must(e.SwiGLU(g, u)))
			}
			return e.Sum(e.must(e.Mul(e.must(e.Silu(g)), u)))
		})
	}
	assert.Equal(t, int64(2*4*n+4), placed(true, true, true), "both trained: g, u and the loss")
	assert.Equal(t, placed(true, true, true)+4*n, placed(false, true, true), "the composition: and silu(g)")
	assert.Equal(t, int64(4*n+4), placed(true, false, true), "u trained: g and the loss")
	assert.Equal(t, int64(2*4*n+4), placed(true, true, false), "g trained: g, u and the loss")
}

// Outside a tape SwiGLU's bf16 copies under autocast are scratch, read by
// its result alone: they count toward no pass bound.
func TestSwiGLUCopiesOutsideATapeAreScratch(t *testing.T) {
	const n = 1 << 12
	for _, cast := range []ggmlcgo.Type{ggmlcgo.F32, ggmlcgo.BF16} {
		e := newEngine(t)
		g, u := host(t, []int{n}, make([]float32, n)...), host(t, []int{n}, make([]float32, n)...)
		before := e.pendingBytes
		var y *Tensor
		require.NoError(t, e.Autocast(cast, func() (err error) { y, err = e.SwiGLU(g, u); return err }))
		e.Transient(y)
		assert.Zero(t, e.pendingBytes-before, "%v: bytes pending after SwiGLU, its result scratch", cast)
	}
}

// Under autocast SwiGLU reads its inputs rounded to bf16 (as PyTorch's
// autocast products give them): its values and gradients are the f32
// composition's of the rounded inputs, bit for bit, and the forward keeps
// the two bf16 copies, half the bytes of f32 inputs.
func TestSwiGLUUnderAutocastReadsBF16(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const n = 64
	gv, uv, rv := make([]float32, n), make([]float32, n), make([]float32, n)
	gr, ur := make([]float32, n), make([]float32, n)
	for i := range gv {
		gv[i], uv[i], rv[i] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		gr[i], ur[i] = float32(roundBF16(gv[i])), float32(roundBF16(uv[i]))
	}
	run := func(fused bool) [][]float32 {
		e := newEngine(t)
		g, u, r := host(t, []int{8, 8}, gv...), host(t, []int{8, 8}, uv...), host(t, []int{8, 8}, rv...)
		if !fused {
			g, u = host(t, []int{8, 8}, gr...), host(t, []int{8, 8}, ur...)
		}
		require.NoError(t, g.SetRequiresGrad(true))
		require.NoError(t, u.SetRequiresGrad(true))
		var y *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			if fused {
				require.NoError(t, e.Autocast(ggmlcgo.BF16, func() (err error) { y, err = e.SwiGLU(g, u); return err }))
			} else {
				y = e.must(e.Mul(e.must(e.Silu(g)), u))
			}
			_, err := e.Backward(e.must(e.Sum(e.must(e.Mul(y, r)))))
			return err
		}))
		return [][]float32{values(t, y), values(t, g.Grad()), values(t, u.Grad())}
	}
	got, want := run(true), run(false)
	for i := range want {
		assert.Equal(t, bitsOfFloats(want[i]), bitsOfFloats(got[i]), "result %d", i)
	}
	assert.NotEqual(t, bitsOfFloats(gv), bitsOfFloats(gr), "the inputs round")

	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	const m = 1 << 12
	e := newEngine(t)
	a := host(t, []int{m}, make([]float32, m)...)
	require.NoError(t, a.SetRequiresGrad(true))
	placed := forwardPlaced(t, e, ggmlcgo.BF16, func() (*Tensor, error) {
		return e.Sum(e.must(e.SwiGLU(e.must(e.Scale(a, 2)), e.must(e.Scale(a, 3)))))
	})
	assert.Equal(t, int64(2*2*m+4), placed, "g and u in bf16, and the loss")
}
