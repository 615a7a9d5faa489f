package core

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// quantizedWeight is an [n, k] weight of normal values quantized to typ,
// and its f32 values as ggml reads them back (a host tensor).
func quantizedWeight(t *testing.T, e *Engine, typ ggmlcgo.Type, n, k int, seed int64) (q, deq *Tensor) {
	rng := rand.New(rand.NewSource(seed))
	v := make([]float32, n*k)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	raw, err := ggmlcgo.Quantize(typ, v, int64(k))
	require.NoError(t, err)
	q, err = e.Weight(raw, typ, []int{n, k})
	require.NoError(t, err)
	d := values(t, q)
	// The blocks hold v to within a quantized step of each block's largest.
	for i := range v {
		require.InDelta(t, v[i], d[i], 0.6, "%v element %d", typ, i)
	}
	return q, host(t, []int{n, k}, d...)
}

var quantizedTypes = []ggmlcgo.Type{ggmlcgo.Q4_0, ggmlcgo.Q4_1, ggmlcgo.Q5_0, ggmlcgo.Q5_1, ggmlcgo.Q8_0, ggmlcgo.Q4_K, ggmlcgo.Q5_K, ggmlcgo.Q6_K}

// A quantized weight multiplies as its dequantized values do (ggml rounds
// the other operand to 8 bits inside the product: to ~1% of a sum's
// terms), for a 2-d and a 3-d input; the gradient reaches the input
// through the blocks (g times their rows, exact in f32), and the weight
// gets none; rows picked from a quantized table and any other op read the
// dequantized values exactly.
func TestQuantizedWeights(t *testing.T) {
	const n, k = 6, 256 // k: a K-quant's block
	for _, typ := range quantizedTypes {
		e := newEngine(t)
		q, deq := quantizedWeight(t, e, typ, n, k, int64(typ))
		assert.Equal(t, typ, q.Dtype())
		rng := rand.New(rand.NewSource(3))
		for _, xShape := range [][]int{{5, k}, {2, 3, k}} {
			xv := make([]float32, numel(xShape))
			for i := range xv {
				xv[i] = float32(rng.NormFloat64())
			}
			run := func(w *Tensor) (y, gx []float32) {
				x := host(t, xShape, xv...)
				require.NoError(t, x.SetRequiresGrad(true))
				var loss *Tensor
				require.NoError(t, e.WithGradTape(func() error {
					yt := e.must(e.Linear(x, w))
					y = values(t, yt)
					var err error
					loss, err = e.Sum(e.must(e.Mul(yt, yt)))
					return err
				}))
				grads, err := e.Backward(loss)
				require.NoError(t, err)
				return y, values(t, grads[x])
			}
			yq, gq := run(q)
			yd, gd := run(deq)
			// Norm-wise: an element's error is ~1% of its sum's terms, which
			// may cancel to near zero; dx = 2y·w carries y's error.
			assertWithin(t, yd, yq, 0.02*largestAbs(yd), fmt.Sprintf("%v x %v: y", typ, xShape))
			assertWithin(t, gd, gq, 0.03*largestAbs(gd), fmt.Sprintf("%v x %v: dx", typ, xShape))
		}
		rows := values(t, e.must(e.IndexSelect(q, 0, []int{4, 0, 4})))
		d := values(t, deq)
		assert.Equal(t, append(append(append([]float32(nil), d[4*k:5*k]...), d[:k]...), d[4*k:5*k]...), rows, "%v rows", typ)
		plus := values(t, e.must(e.AddScalar(q, 1)))
		for i := range d {
			require.Equal(t, d[i]+1, plus[i], "%v: an op reads the dequantized values", typ)
		}
		err := q.SetRequiresGrad(true)
		assert.ErrorContains(t, err, "never trainable", "%v", typ)
	}
}

// The gradient through a quantized product is g times the weight's rows,
// exactly as through its dequantized f32 copy (no rounding of g).
func TestQuantizedWeightGradientIsExact(t *testing.T) {
	e := newEngine(t)
	q, deq := quantizedWeight(t, e, ggmlcgo.Q8_0, 5, 64, 1)
	grad := func(w *Tensor) []float32 {
		x := host(t, []int{3, 64}, make([]float32, 3*64)...)
		require.NoError(t, x.SetRequiresGrad(true))
		r := host(t, []int{3, 5}, 1, -2, 0.5, 3, -1.25, 2, 0, 1, -1, 4, 0.75, -3, 2.5, 1, -0.5)
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			loss, err = e.Sum(e.must(e.Mul(e.must(e.Linear(x, w)), r)))
			return err
		}))
		grads, err := e.Backward(loss)
		require.NoError(t, err)
		return values(t, grads[x])
	}
	want, got := grad(deq), grad(q)
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-5*(1+math.Abs(float64(want[i]))), "dx[%d]", i)
	}
}

// Quantized weights are refused where gglua cannot read them: a type it
// does not read, bytes that are not the shape's blocks.
func TestQuantizedRefusals(t *testing.T) {
	e := newEngine(t)
	_, err := e.Weight(make([]byte, 64), ggmlcgo.I32, []int{16})
	assert.ErrorContains(t, err, "not a type gglua reads")
	_, err = e.Weight(make([]byte, 18), ggmlcgo.Q4_0, []int{2, 16})
	assert.ErrorContains(t, err, "whole blocks of 32")
	_, err = e.Weight(make([]byte, 17), ggmlcgo.Q4_0, []int{1, 32})
	assert.ErrorContains(t, err, "17 bytes")
	_, err = ggmlcgo.Quantize(ggmlcgo.Q4_K, make([]float32, 128), 128)
	assert.ErrorContains(t, err, "whole blocks of 256")
}

// largestAbs is the largest |v|.
func largestAbs(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// assertWithin checks |want - got| <= bound element by element.
func assertWithin(t *testing.T, want, got []float32, bound float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		if d := math.Abs(float64(want[i]) - float64(got[i])); !(d <= bound) {
			require.Failf(t, msg, "element %d: want %g, got %g (bound %g)", i, want[i], got[i], bound)
		}
	}
}

// Stored gives a quantized weight's blocks back as they were placed (its
// size is the blocks', not four bytes an element), and an f32 tensor's
// values as f32 bytes.
func TestStoredBytes(t *testing.T) {
	e := newEngine(t)
	for _, typ := range quantizedTypes {
		v := make([]float32, 2*256)
		for i := range v {
			v[i] = float32(i%17) - 8
		}
		raw, err := ggmlcgo.Quantize(typ, v, 256)
		require.NoError(t, err)
		w, err := e.Weight(raw, typ, []int{2, 256})
		require.NoError(t, err)
		got, gotType, err := w.Stored()
		require.NoError(t, err)
		assert.Equal(t, typ, gotType)
		assert.Equal(t, raw, got, "%v", typ)
	}
	got, typ, err := host(t, []int{2}, 1.5, -2).Stored()
	require.NoError(t, err)
	assert.Equal(t, ggmlcgo.F32, typ)
	assert.Equal(t, []byte{0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0}, got)
}

// A device reads quantized weights through gglua's dequantize node where
// ggml-cuda's ops cannot take them (K-quants' rows, the gradient's
// out_prod): the same values and gradients, forced here on the CPU.
func TestQuantizedWeightsAsADeviceReadsThem(t *testing.T) {
	defer func(f bool) { forceDequantizeKernel = f }(forceDequantizeKernel)
	forceDequantizeKernel = true
	TestQuantizedWeights(t)
	TestQuantizedWeightGradientIsExact(t)
	e := newEngine(t)
	q, deq := quantizedWeight(t, e, ggmlcgo.Q6_K, 3, 256, 9)
	var n node
	require.NoError(t, e.NoGrad(func() error {
		c, err := e.nodeContext()
		require.NoError(t, err)
		in, err := e.storedInput(q)
		require.NoError(t, err)
		n, err = e.toF32(c, in)
		return err
	}))
	assert.Equal(t, "dequantize", n.Name(), "the node a device runs")
	assert.Equal(t, values(t, deq), values(t, q))
}
