package core

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// roundBF16 is v rounded to bfloat16 (to nearest, ties to even), as
// PyTorch's and ggml's f32 -> bf16 conversions do for finite values.
func roundBF16(v float32) float64 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return float64(math.Float32frombits(b &^ 0xffff))
}

// bf16Matmul is a·b and its gradients for the cotangent g, in float64 from
// every operand rounded to bf16 (a product under autocast rounds both
// operands, and its gradients' products round g too): a [B, m, k], b
// [Bb, k, n] with Bb 1 or B, g [B, m, n].
func bf16Matmul(a, b, g []float32, B, Bb, m, k, n int) (y, ga, gb []float64) {
	y, ga, gb = make([]float64, B*m*n), make([]float64, B*m*k), make([]float64, Bb*k*n)
	for bi := range B {
		bb := bi % Bb
		for i := range m {
			for j := range n {
				gij := roundBF16(g[(bi*m+i)*n+j])
				for p := range k {
					av, bv := roundBF16(a[(bi*m+i)*k+p]), roundBF16(b[(bb*k+p)*n+j])
					y[(bi*m+i)*n+j] += av * bv
					ga[(bi*m+i)*k+p] += gij * bv
					gb[(bb*k+p)*n+j] += av * gij
				}
			}
		}
	}
	return y, ga, gb
}

// TestAutocastRoundsTheOperands: under autocast a product, forward and both
// gradients, is the f32 sum of its operands' products rounded to bf16
// (worked out in float64 here); outside it the same inputs give the f32
// product, which that reference tells apart. The GPU's forms (out_prod
// gradients, attention's strided products) must step aside for it.
func TestAutocastRoundsTheOperands(t *testing.T) {
	defer func(o, r bool) { forceOutProd, forceRowsMatmul = o, r }(forceOutProd, forceRowsMatmul)
	forceOutProd, forceRowsMatmul = true, true
	e := newEngine(t)
	wave := func(n, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*37+seed)*0.71)) * 1.7
		}
		return v
	}
	for _, c := range []struct {
		name           string
		aShape, bShape []int
		B, Bb, m, k, n int
	}{
		{"2-d", []int{5, 16}, []int{16, 8}, 1, 1, 5, 16, 8},
		{"batch times a matrix", []int{2, 3, 16}, []int{16, 8}, 2, 1, 3, 16, 8},
		{"batches", []int{3, 4, 16}, []int{3, 16, 4}, 3, 3, 4, 16, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			av, bv := wave(c.B*c.m*c.k, 1), wave(c.Bb*c.k*c.n, 2)
			gv := wave(c.B*c.m*c.n, 3)
			gShape := append(append([]int(nil), c.aShape[:len(c.aShape)-1]...), c.n)
			wantY, wantA, wantB := bf16Matmul(av, bv, gv, c.B, c.Bb, c.m, c.k, c.n)
			run := func(prec ggmlcgo.Type) (y, ga, gb []float32) {
				a, b := host(t, c.aShape, av...), host(t, c.bShape, bv...)
				require.NoError(t, a.SetRequiresGrad(true))
				require.NoError(t, b.SetRequiresGrad(true))
				out := autocastWeighted(t, e, prec, host(t, gShape, gv...), func() (*Tensor, error) { return e.Matmul(a, b) })
				return values(t, out), values(t, a.Grad()), values(t, b.Grad())
			}
			near := func(want []float64, got []float32) bool {
				for i := range want {
					if math.Abs(want[i]-float64(got[i])) > 1e-5*(1+math.Abs(want[i])) {
						return false
					}
				}
				return true
			}
			y, ga, gb := run(ggmlcgo.BF16)
			assert.True(t, near(wantY, y), "product: %v, want %v", y, wantY)
			assert.True(t, near(wantA, ga), "gradient of a: %v, want %v", ga, wantA)
			assert.True(t, near(wantB, gb), "gradient of b: %v, want %v", gb, wantB)
			y, ga, gb = run(ggmlcgo.F32)
			assert.False(t, near(wantY, y), "f32 product too near the bf16 reference to tell them apart")
			assert.False(t, near(wantA, ga) || near(wantB, gb), "f32 gradients too near the bf16 reference")
		})
	}
}

// autocastWeighted is backwardOfWeighted with f run under autocast to prec.
func autocastWeighted(t *testing.T, e *Engine, prec ggmlcgo.Type, g *Tensor, f func() (*Tensor, error)) *Tensor {
	t.Helper()
	return backwardOfWeighted(t, e, g, func() (y *Tensor, err error) {
		err = e.Autocast(prec, func() error {
			y, err = f()
			return err
		})
		return y, err
	})
}

// TestAutocastAsTorch: linear, matmul, bmm and conv2d under autocast give
// PyTorch's torch.autocast("cpu", dtype=torch.bfloat16) values and
// gradients (testdata/torch_autocast.json, scripts/reference/autocast.py),
// within bf16's rounding: PyTorch rounds each product's result to bf16,
// gglua keeps it f32 (autocast.go).
func TestAutocastAsTorch(t *testing.T) {
	ops := map[string]torchOp{
		"linear": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
			return e.Linear(in[0], in[1])
		},
		"matmul": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
			return e.Matmul(in[0], in[1])
		},
		"bmm": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) { return e.Bmm(in[0], in[1]) },
		"conv2d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
			return e.Conv2d(in[0], in[1], nil, ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1})
		},
	}
	for name, f := range ops {
		ops[name] = func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (out *Tensor, err error) {
			err = e.Autocast(ggmlcgo.BF16, func() error {
				out, err = f(t, e, c, in)
				return err
			})
			return out, err
		}
	}
	runTorchFileWith(t, "testdata/torch_autocast.json", ops, func(t require.TestingT, want []torchNum, got []float32, msg string) {
		require.Len(t, got, len(want), msg)
		for i, w := range want {
			// bf16 keeps 8 significant bits: PyTorch's rounding of the
			// result is within 2^-9 of it, relatively.
			assert.InDelta(t, float64(w), float64(got[i]), 1e-4+4e-3*math.Abs(float64(w)), "%s: element %d", msg, i+1)
		}
	})
}

// TestDotIsNotAutocast: torch.dot is not on autocast's list (matmul is, for
// vectors too): dot stays the f32 product, matmul of the vectors rounds.
func TestDotIsNotAutocast(t *testing.T) {
	e := newEngine(t)
	a := host(t, []int{3}, 1.001, 2.003, -3.007)
	b := host(t, []int{3}, 0.999, -1.0007, 2.0011)
	var dot, mm, plain *Tensor
	require.NoError(t, e.Autocast(ggmlcgo.BF16, func() (err error) {
		if dot, err = e.Dot(a, b); err == nil {
			mm, err = e.Matmul(a, b)
		}
		return err
	}))
	plain, err := e.Dot(a, b)
	require.NoError(t, err)
	assert.Equal(t, values(t, plain), values(t, dot))
	var want float64
	for i, x := range []float32{1.001, 2.003, -3.007} {
		want += roundBF16(x) * roundBF16([]float32{0.999, -1.0007, 2.0011}[i])
	}
	assert.InDelta(t, want, values(t, mm)[0], 1e-5)
	assert.NotEqual(t, values(t, plain), values(t, mm))
}

// TestAutocastScopes: autocast nests and restores the outer setting (also
// when fn fails), f32 turns it off inside, and f16 is refused.
func TestAutocastScopes(t *testing.T) {
	e := newEngine(t)
	assert.Equal(t, ggmlcgo.F32, e.AutocastType())
	require.NoError(t, e.Autocast(ggmlcgo.BF16, func() error {
		assert.Equal(t, ggmlcgo.BF16, e.AutocastType())
		assert.Error(t, e.Autocast(ggmlcgo.F32, func() error {
			assert.Equal(t, ggmlcgo.F32, e.AutocastType())
			return assert.AnError
		}))
		assert.Equal(t, ggmlcgo.BF16, e.AutocastType())
		return nil
	}))
	assert.Equal(t, ggmlcgo.F32, e.AutocastType())
	err := e.Autocast(ggmlcgo.F16, func() error { t.Fatal("fn ran"); return nil })
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorContains(t, err, "f16 is not supported")
	err = e.Autocast(ggmlcgo.I32, func() error { t.Fatal("fn ran"); return nil })
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorContains(t, err, "i32 is not supported (bf16, or f32 to turn autocast off)")
	assert.NotContains(t, err.Error(), "sums f16 products", "the f16 reason is for f16")
}

// TestAutocastThroughTheGemm: the devices' form of autocast's 2-d products
// (gglua's bf16 gemm node, gradients reading the transposes in place) gives
// the same values and gradients, here through the gemm's CPU kernel.
func TestAutocastThroughTheGemm(t *testing.T) {
	runForced(t, &forceGemmBF16, TestAutocastRoundsTheOperands, TestAutocastAsTorch, TestAutocastGemmOperands)
}

// TestAutocastGemmOperands: a linear layer under autocast whose weight is
// stored in f32, f16 or bf16 (values exact in all three) and whose input is
// a transposed view gives the product and gradients of the rounded
// operands (float64 reference), by either form of the product.
func TestAutocastGemmOperands(t *testing.T) {
	const m, k, n = 3, 20, 4
	xv, wv, gv := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i)*1.3)) * 2.1
	}
	for i := range wv {
		wv[i] = float32(i%7-3) / 8 // exact in f16 and bf16
	}
	for i := range gv {
		gv[i] = float32(math.Cos(float64(i)*0.9)) * 1.7
	}
	wt := make([]float32, k*n) // wᵀ, [k, n], for the reference
	xt := make([]float32, k*m) // the stored base of the view x, [k, m]
	for i := 0; i < k; i++ {
		for j := 0; j < n; j++ {
			wt[i*n+j] = wv[j*k+i]
		}
		for j := 0; j < m; j++ {
			xt[i*m+j] = xv[j*k+i]
		}
	}
	wantY, wantX, wantWT := bf16Matmul(xv, wt, gv, 1, 1, m, k, n)
	for _, dtype := range []ggmlcgo.Type{ggmlcgo.F32, ggmlcgo.F16, ggmlcgo.BF16} {
		e := newEngine(t)
		w := host(t, []int{n, k}, wv...)
		require.NoError(t, w.SetRequiresGrad(true))
		require.NoError(t, w.MoveToDeviceAs(e, residency.Persistent, dtype))
		base := host(t, []int{k, m}, xt...)
		require.NoError(t, base.SetRequiresGrad(true))
		y := autocastWeighted(t, e, ggmlcgo.BF16, host(t, []int{m, n}, gv...), func() (*Tensor, error) {
			x, err := e.Transpose(base, 0, 1)
			if err != nil {
				return nil, err
			}
			return e.Linear(x, w)
		})
		assertClose(t, wantY, values(t, y), 1e-5, dtype.String()+" product")
		gx := values(t, base.Grad()) // [k, m]: the transpose of x's gradient
		for i := 0; i < k; i++ {
			for j := 0; j < m; j++ {
				assert.InDelta(t, wantX[j*k+i], gx[i*m+j], 1e-5*(1+math.Abs(wantX[j*k+i])), "%s: x's gradient [%d, %d]", dtype, j, i)
			}
		}
		gw := values(t, w.Grad()) // [n, k]
		for i := 0; i < k; i++ {
			for j := 0; j < n; j++ {
				assert.InDelta(t, wantWT[i*n+j], gw[j*k+i], 1e-5*(1+math.Abs(wantWT[i*n+j])), "%s: w's gradient [%d, %d]", dtype, j, i)
			}
		}
	}
}

// TestBiasReluForProductKeepsTheValues: under autocast, where products run
// as the bf16 gemm, a bias+relu that only a product reads is stored in
// bf16, and the next product, the output and the products' gradients are
// those of the f32 bias+relu (the products round their operands the same
// way); outside autocast it stays f32.
func TestBiasReluForProductKeepsTheValues(t *testing.T) {
	defer func(f bool) { forceGemmBF16 = f }(forceGemmBF16)
	forceGemmBF16 = true
	const m, k, h, n = 4, 12, 8, 3
	wave := func(len, seed int) []float32 {
		v := make([]float32, len)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*31+seed)*0.53)) * 1.9
		}
		return v
	}
	xv, w1v, b1v, w2v, gv := wave(m*k, 1), wave(h*k, 2), wave(h, 3), wave(n*h, 4), wave(m*n, 5)
	run := func(e *Engine, fused func(a, bias *Tensor) (*Tensor, error), autocast ggmlcgo.Type) (hidden *Tensor, out []float32, grads [][]float32) {
		x, w1, b1, w2 := host(t, []int{m, k}, xv...), host(t, []int{h, k}, w1v...), host(t, []int{h}, b1v...), host(t, []int{n, h}, w2v...)
		params := []*Tensor{x, w1, b1, w2}
		for _, p := range params {
			require.NoError(t, p.SetRequiresGrad(true))
		}
		y := autocastWeighted(t, e, autocast, host(t, []int{m, n}, gv...), func() (*Tensor, error) {
			var c chain
			y1 := c.do(func() (*Tensor, error) { return e.Linear(x, w1) })
			hidden = c.do(func() (*Tensor, error) { return fused(y1, b1) })
			return c.do(func() (*Tensor, error) { return e.Linear(hidden, w2) }), c.err
		})
		for _, p := range params {
			grads = append(grads, values(t, p.Grad()))
		}
		return hidden, values(t, y), grads
	}
	e := newEngine(t)
	before := e.Stats().NodesComputed
	hidden, out, grads := run(e, e.BiasReluForProduct, ggmlcgo.BF16)
	mid := e.Stats().NodesComputed
	assert.Equal(t, ggmlcgo.BF16, hidden.Dtype(), "kept in bf16 for the product")
	refHidden, refOut, refGrads := run(e, e.BiasRelu, ggmlcgo.BF16)
	assert.Equal(t, ggmlcgo.F32, refHidden.Dtype())
	// No rounding pass of the hidden result or of relu's gradient: two
	// nodes fewer than bias+relu then the products' own roundings.
	assert.Equal(t, e.Stats().NodesComputed-mid-2, mid-before, "nodes computed")
	assert.Equal(t, refOut, out, "the product of the rounded result")
	// x's and the weights' gradients are the f32 path's exactly: relu's
	// gradient goes to the first product rounded, which it rounds anyway.
	// b1's is summed from that rounded gradient (as PyTorch's autocast
	// sums it from its bf16 gradient): within bf16's rounding of the f32
	// path's, and not equal to it.
	assert.Equal(t, [][]float32{refGrads[0], refGrads[1], refGrads[3]}, [][]float32{grads[0], grads[1], grads[3]}, "gradients of x, w1, w2")
	assert.NotEqual(t, refGrads[2], grads[2], "b1's gradient is summed from the rounded one")
	for i, want := range refGrads[2] {
		assert.InDelta(t, want, grads[2][i], 1e-2*(1+math.Abs(float64(want))), "b1's gradient [%d]", i)
	}
	zeros := 0
	for _, v := range values(t, refHidden) {
		if v == 0 {
			zeros++
		}
	}
	assert.True(t, zeros > 0 && zeros < m*h, "relu cuts some but not all: %d zeros", zeros)
	off, _, _ := run(e, e.BiasReluForProduct, ggmlcgo.F32)
	assert.Equal(t, ggmlcgo.F32, off.Dtype(), "outside autocast the result stays f32")

	// A leaf's gradient is never rounded (no product reads it first): it
	// is f32, the plain path's exactly.
	leafGrad := func(fused func(a, bias *Tensor) (*Tensor, error)) *Tensor {
		a, b1, w2 := host(t, []int{m, h}, wave(m*h, 6)...), host(t, []int{h}, b1v...), host(t, []int{n, h}, w2v...)
		require.NoError(t, a.SetRequiresGrad(true))
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			return e.Autocast(ggmlcgo.BF16, func() error {
				var c chain
				hid := c.do(func() (*Tensor, error) { return fused(a, b1) })
				y := c.do(func() (*Tensor, error) { return e.Linear(hid, w2) })
				loss = c.do(func() (*Tensor, error) { return e.Sum(y) })
				return c.err
			})
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
		return a.Grad()
	}
	g16, g32 := leafGrad(e.BiasReluForProduct), leafGrad(e.BiasRelu)
	assert.Equal(t, ggmlcgo.F32, g16.Dtype(), "a leaf's gradient is f32")
	assert.Equal(t, values(t, g32), values(t, g16), "a leaf's gradient")
}

// TestAutocastFormsTrainAlike: an MLP trained under autocast by each form
// of its products (ggml's mul_mat, the devices' gemm, and the gemm with
// nn.Sequential's bf16 hidden layers and gradients) follows the f32 loss
// curve through a steep fall as closely as ggml's mul_mat does (within 1%
// of the first loss), and each form does round.
func TestAutocastFormsTrainAlike(t *testing.T) {
	defer func(f bool) { forceGemmBF16 = f }(forceGemmBF16)
	const batch, width, in, steps = 128, 96, 32, 40
	sizes := []int{in, width, width, width, 10}
	run := func(mode string) []float64 {
		e := newEngine(t)
		r := rand.New(rand.NewSource(1))
		rnd := func(n int, s float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r.NormFloat64() * s)
			}
			return v
		}
		var ws, bs []*Tensor
		for i := 0; i+1 < len(sizes); i++ {
			w := host(t, []int{sizes[i+1], sizes[i]}, rnd(sizes[i+1]*sizes[i], 1/math.Sqrt(float64(sizes[i])))...)
			b := host(t, []int{sizes[i+1]}, rnd(sizes[i+1], 0.1)...)
			require.NoError(t, w.SetRequiresGrad(true))
			require.NoError(t, b.SetRequiresGrad(true))
			ws, bs = append(ws, w), append(bs, b)
		}
		xv := rnd(batch*in, 1)
		labels := make([]int, batch)
		for i := range labels {
			labels[i] = r.Intn(10)
		}
		x := host(t, []int{batch, in}, xv...)
		opt, err := NewAdam(e, append(append([]*Tensor{}, ws...), bs...), AdamOptions{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		require.NoError(t, err)
		var losses []float64
		for s := 0; s < steps; s++ {
			opt.ZeroGrad()
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				fwd := func() error {
					h := x
					for i := range ws {
						y, err := e.Linear(h, ws[i])
						if err != nil {
							return err
						}
						if i+1 == len(ws) {
							h, err = e.Add(y, bs[i])
						} else if mode == "fused" {
							h, err = e.BiasReluForProduct(y, bs[i])
						} else {
							h, err = e.BiasRelu(y, bs[i])
						}
						if err != nil {
							return err
						}
					}
					loss, err = e.CrossEntropyLabels(h, labels)
					return err
				}
				if mode == "f32" {
					return fwd()
				}
				return e.Autocast(ggmlcgo.BF16, fwd)
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			require.NoError(t, opt.Step())
			l, err := loss.Item()
			require.NoError(t, err)
			losses = append(losses, float64(l))
		}
		return losses
	}
	f32 := run("f32")
	ac := run("autocast") // ggml mul_mat path
	forceGemmBF16 = true
	g := run("autocast")  // gemm path, f32 hidden
	fused := run("fused") // gemm path, bf16 hidden and gradients
	gap := func(a []float64) float64 {
		m := 0.0
		for i := range a {
			m = math.Max(m, math.Abs(a[i]-f32[i])/f32[0])
		}
		return m
	}
	require.Less(t, f32[steps-1], 0.2*f32[0], "the loss falls steeply")
	for name, c := range map[string][]float64{"mul_mat": ac, "gemm": g, "bf16 hidden layers": fused} {
		assert.Less(t, gap(c), 1e-2, "%s: autocast's curve leaves f32's", name)
		assert.Greater(t, gap(c), 0.0, "%s: autocast rounds", name)
		// The devices' forms round as ggml's mul_mat does (measured: 0.24-0.26%
		// of the first loss, all three).
		assert.Less(t, gap(c), 2*gap(ac), "%s: further from f32 than ggml's mul_mat", name)
	}
}

// TestLinearBiasAddsInTheProduct: under autocast on the bf16 gemm,
// LinearBias is one node (the product with its bias) where Linear then
// Add are two, with the same values rounded to bf16 (its result is bf16,
// as PyTorch's autocast writes a Linear layer's) and the same gradients of
// x, w and b, for a 2-d and a 3-d input; outside autocast it is Linear
// then Add.
// (The kernel's own sums are ggmlcgo's TestGemmBF16BiasAddsTheRowToEverySum.)
func TestLinearBiasAddsInTheProduct(t *testing.T) {
	defer func(f bool) { forceGemmBF16 = f }(forceGemmBF16)
	forceGemmBF16 = true
	const k, n = 13, 5
	wave := func(len, seed int) []float32 {
		v := make([]float32, len)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*37+seed)*0.41)) * 1.6
		}
		return v
	}
	for _, xShape := range [][]int{{6, k}, {2, 3, k}} {
		rows := 1
		for _, d := range xShape[:len(xShape)-1] {
			rows *= d
		}
		outShape := append(append([]int(nil), xShape[:len(xShape)-1]...), n)
		run := func(e *Engine, prec ggmlcgo.Type, linear func(x, w, b *Tensor) (*Tensor, error)) (out []float32, grads [][]float32, nodes int64) {
			x, w, b := host(t, xShape, wave(rows*k, 1)...), host(t, []int{n, k}, wave(n*k, 2)...), host(t, []int{n}, wave(n, 3)...)
			params := []*Tensor{x, w, b}
			for _, p := range params {
				require.NoError(t, p.SetRequiresGrad(true))
			}
			before := e.Stats().NodesComputed
			y := autocastWeighted(t, e, prec, host(t, outShape, wave(rows*n, 4)...), func() (*Tensor, error) { return linear(x, w, b) })
			out = values(t, y)
			for _, p := range params {
				grads = append(grads, values(t, p.Grad()))
			}
			return out, grads, e.Stats().NodesComputed - before
		}
		e := newEngine(t)
		composed := func(x, w, b *Tensor) (*Tensor, error) { return e.LinearThen(x, w, b, (*Engine).Add) }
		out, grads, nodes := run(e, ggmlcgo.BF16, e.LinearBias)
		refOut, refGrads, refNodes := run(e, ggmlcgo.BF16, composed)
		rounded := make([]float32, len(refOut))
		for i, v := range refOut {
			rounded[i] = float32(roundBF16(v))
		}
		assert.Equal(t, rounded, out, "x %v: values", xShape)
		assert.Equal(t, refGrads, grads, "x %v: gradients of x, w, b", xShape)
		if len(xShape) == 2 { // (a 3-d x's bias gradient reads a view of g as 2-d rows: a node, no kernel)
			// The add is in the product; the f32 product by the weights
			// that autocastWeighted applies widens the bf16 result (a node).
			assert.Equal(t, refNodes-1+1, nodes, "x %v: the add is in the product", xShape)
		}
		off, _, offNodes := run(e, ggmlcgo.F32, e.LinearBias)
		offRef, _, offRefNodes := run(e, ggmlcgo.F32, composed)
		assert.Equal(t, offRef, off, "x %v: f32 values", xShape)
		assert.Equal(t, offRefNodes, offNodes, "x %v: outside autocast, Linear then Add", xShape)
		assert.NotEqual(t, off, out, "x %v: autocast rounds the operands", xShape)
	}
}

// TestLinearBiasKeepsWhatLinearKeeps: the fused form's tape keeps what
// Linear then Add keep (the operands' bf16 copies), not its f32 input:
// the forward places as many bytes either way.
func TestLinearBiasKeepsWhatLinearKeeps(t *testing.T) {
	defer func(f bool) { forceGemmBF16 = f }(forceGemmBF16)
	forceGemmBF16 = true
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	const m, k, n = 256, 128, 64
	placed := func(fused bool) int64 {
		e := newEngine(t)
		x0 := host(t, []int{m, k}, make([]float32, m*k)...)
		w, b := host(t, []int{n, k}, make([]float32, n*k)...), host(t, []int{n}, make([]float32, n)...)
		require.NoError(t, w.SetRequiresGrad(true))
		require.NoError(t, b.SetRequiresGrad(true))
		return forwardPlaced(t, e, ggmlcgo.BF16, func() (*Tensor, error) {
			x := e.must(e.Scale(x0, 2)) // an activation, f32
			if fused {
				return e.Sum(e.must(e.LinearBias(x, w, b)))
			}
			return e.Sum(e.must(e.LinearThen(x, w, b, (*Engine).Add)))
		})
	}
	composed := placed(false)
	// x's bf16 copy, y and the loss; x itself would be 4·m·k more.
	assert.Less(t, composed, int64(6*m*k), "x (f32) is not kept: %d bytes", composed)
	assert.Equal(t, composed, placed(true))
}
