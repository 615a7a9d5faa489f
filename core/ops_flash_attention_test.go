package core

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// The fused attention (flash_attn.c; a GPU's gglua-flash-attn.cu is
// checked against it by tests/gpu/library.lua) against the composed one:
// values and the gradients of q, k and v, causal or not, odd lengths, more
// keys than queries and fewer, 3-d and 4-d, heads read strided from a
// projection or packed.

type flashCase struct {
	name            string
	b, h, tq, tk, d int // b 0: 3-d operands [h, t, d]
	causal, strided bool
	scale           float64
}

// flashFrozen makes flashRunCaseOf leave q, k or v untrained (its
// gradient nil).
var flashFrozen [3]bool

var flashCases = []flashCase{
	{"causal strided", 2, 3, 7, 7, 8, true, true, 0},
	{"plain strided", 2, 2, 5, 5, 4, false, true, 0},
	{"causal more keys", 1, 2, 3, 9, 16, true, false, 0},
	{"causal fewer keys", 2, 1, 9, 4, 4, true, false, 0.7},
	{"3-d, long", 0, 2, 70, 131, 8, false, false, 0},
	{"3-d causal, long", 0, 1, 131, 131, 5, true, false, 0},
}

// flashRunCase returns attention's values and the gradients of q, k and v
// of sum(y·w) for c under autocast type cast, fused or composed.
func flashRunCase(t *testing.T, c flashCase, fused bool, cast ggmlcgo.Type) [][]float32 {
	return flashRunCaseOf(t, c, fused, cast, ggmlcgo.F32)
}

// flashRunCaseOf is flashRunCase with q, k and v stored as heads (f32, or
// bf16: a product's result under autocast), the gradients those of the f32
// inputs they were made from.
func flashRunCaseOf(t *testing.T, c flashCase, fused bool, cast, heads ggmlcgo.Type) [][]float32 {
	rng := rand.New(rand.NewSource(int64(c.tq*31 + c.tk)))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	lead := []int{c.h}
	if c.b > 0 {
		lead = []int{c.b, c.h}
	}
	shape := func(tt int) []int { return append(append([]int(nil), lead...), tt, c.d) }
	forceComposedAttention = !fused
	defer func() { forceComposedAttention = false }()
	e := newEngine(t)
	var ins []*Tensor
	for _, tt := range []int{c.tq, c.tk, c.tk} {
		s := shape(tt)
		if c.strided { // [.., t, 2d] narrowed: rows 2d apart
			wide := append(append([]int(nil), s[:len(s)-1]...), 2*c.d)
			x := host(t, wide, randn(int(numel(wide)))...)
			require.NoError(t, x.SetRequiresGrad(!flashFrozen[len(ins)]))
			ins = append(ins, x)
			continue
		}
		x := host(t, s, randn(int(numel(s)))...)
		require.NoError(t, x.SetRequiresGrad(!flashFrozen[len(ins)]))
		ins = append(ins, x)
	}
	w := host(t, shape(c.tq), randn(int(numel(shape(c.tq))))...)
	var y, loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		return e.Autocast(cast, func() error {
			var ch chain
			qkv := make([]*Tensor, 3)
			for i, x := range ins {
				qkv[i] = x
				if heads != ggmlcgo.F32 {
					qkv[i] = ch.do(func() (*Tensor, error) { return e.To(x, heads) })
				}
				if c.strided {
					whole := qkv[i]
					qkv[i] = ch.do(func() (*Tensor, error) { return e.Narrow(whole, whole.Dim()-1, c.d/2, c.d) })
				}
			}
			y = ch.do(func() (*Tensor, error) {
				return e.ScaledDotProductAttention(qkv[0], qkv[1], qkv[2], AttentionOptions{Causal: c.causal, Scale: c.scale})
			})
			loss = ch.do(func() (*Tensor, error) { return e.Mul(y, w) })
			loss = ch.do(func() (*Tensor, error) { return e.Sum(loss) })
			return ch.err
		})
	}))
	if fused {
		require.NotNil(t, y.base, "%s: the fused op ran (its result is a view of the node's run)", c.name)
		assert.Equal(t, "scaled_dot_product_attention", y.gradFn.name)
	}
	_, err := e.Backward(loss)
	require.NoError(t, err)
	out := [][]float32{values(t, y)}
	for i, x := range ins {
		if flashFrozen[i] {
			out = append(out, nil)
			continue
		}
		out = append(out, values(t, x.Grad()))
	}
	return out
}

func TestFlashAttentionMatchesComposed(t *testing.T) {
	for _, c := range flashCases {
		want := flashRunCase(t, c, false, ggmlcgo.F32)
		got := flashRunCase(t, c, true, ggmlcgo.F32)
		for i, what := range []string{"values", "grad q", "grad k", "grad v"} {
			assertNear(t, want[i], got[i], 1e-5, fmt.Sprintf("%s: %s", c.name, what))
		}
	}
}

// TestFlashAttentionBF16: the devices' bf16 form (its CPU reference,
// forced) keeps to the composed attention under autocast within bf16's
// rounding, and rounds: it is not the f32 form.
func TestFlashAttentionBF16(t *testing.T) {
	forceFlashBF16 = true
	defer func() { forceFlashBF16 = false }()
	for _, c := range flashCases {
		want := flashRunCase(t, c, false, ggmlcgo.BF16)
		got := flashRunCase(t, c, true, ggmlcgo.BF16)
		f32 := flashRunCase(t, c, true, ggmlcgo.F32)
		for i, what := range []string{"values", "grad q", "grad k", "grad v"} {
			assertNear(t, want[i], got[i], 3e-2, fmt.Sprintf("%s: %s", c.name, what))
		}
		assert.NotEqual(t, f32[0], got[0], "%s: bf16 rounds", c.name)
	}
}

// TestFlashAttentionReadsBF16Heads: the bf16 kernel reads bf16 heads (a
// product's result under autocast) as they are stored, strided views
// included, with the values and gradients it gives for the f32 heads they
// were rounded from, bit for bit (it rounds what it reads either way).
func TestFlashAttentionReadsBF16Heads(t *testing.T) {
	forceFlashBF16 = true
	defer func() { forceFlashBF16 = false }()
	for _, c := range flashCases {
		want := flashRunCase(t, c, true, ggmlcgo.BF16)
		got := flashRunCaseOf(t, c, true, ggmlcgo.BF16, ggmlcgo.BF16)
		for i, what := range []string{"values", "grad q", "grad k", "grad v"} {
			assert.Equal(t, bitsOfFloats(want[i]), bitsOfFloats(got[i]), "%s: %s", c.name, what)
		}
	}
	// Read in place: no node widens them to f32 first.
	e := newEngine(t)
	var heads []*Tensor
	for range 3 {
		heads = append(heads, e.must(e.To(host(t, []int{2, 5, 8}, make([]float32, 80)...), ggmlcgo.BF16)))
	}
	var widened int
	e.beforeCompute = func(g *ggmlcgo.Graph) {
		for _, n := range g.Nodes() {
			if n.Type() == ggmlcgo.F32 && n.Ne() == [ggmlcgo.MaxDims]int64{8, 5, 2, 1} {
				widened++
			}
		}
	}
	require.NoError(t, e.Autocast(ggmlcgo.BF16, func() error {
		y, err := e.ScaledDotProductAttention(heads[0], heads[1], heads[2], AttentionOptions{})
		require.NotNil(t, y.base, "the fused op ran")
		_ = values(t, y)
		return err
	}))
	assert.Zero(t, widened, "heads widened to f32")
}

func bitsOfFloats(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

// assertNear checks |want - got| <= tol·(1 + |want|) element by element.
func assertNear(t *testing.T, want, got []float32, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if !(math.Abs(w-g) <= tol*(1+math.Abs(w))) {
			require.Failf(t, msg, "element %d: want %g, got %g", i, w, g)
		}
	}
}

// TestFlashAttentionGradcheck: the fused op's gradients against central
// differences, independently of the composed op.
func TestFlashAttentionGradcheck(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, causal := range []bool{false, true} {
		e := newEngine(t)
		var ins []*Tensor
		for _, tt := range []int{3, 4, 4} {
			v := make([]float32, 2*tt*3)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			ins = append(ins, host(t, []int{2, tt, 3}, v...))
		}
		f := func(xs []*Tensor) (*Tensor, error) {
			y, err := e.ScaledDotProductAttention(xs[0], xs[1], xs[2], AttentionOptions{Causal: causal})
			if err != nil {
				return nil, err
			}
			if y.base == nil {
				return nil, fmt.Errorf("the composed attention ran")
			}
			sq, err := e.Mul(y, y)
			if err != nil {
				return nil, err
			}
			return e.Sum(sq)
		}
		require.NoError(t, Gradcheck(e, f, ins, 1e-2, 2e-3, 2e-2), "causal %v", causal)
	}
}

// A write into the fused op's output through a detached view, between
// the forward and the backward, is refused: the backward reads the
// output (the tape saved its run), as PyTorch's flash kernel does.
func TestFlashAttentionRefusesAChangedOutput(t *testing.T) {
	e := newEngine(t)
	var ins []*Tensor
	for _, tt := range []int{3, 5, 5} {
		x := host(t, []int{1, 2, tt, 4}, make([]float32, 2*tt*4)...)
		require.NoError(t, x.SetRequiresGrad(true))
		ins = append(ins, x)
	}
	requireRefusesChangedOutput(t, e, func() *Tensor {
		y := e.must(e.ScaledDotProductAttention(ins[0], ins[1], ins[2], AttentionOptions{}))
		require.NotNil(t, y.base, "the fused op ran")
		return y
	})
}

// requireRefusesChangedOutput checks that the backward of sum(y), for y
// made by forward inside a tape, refuses once y is written through
// y:detach() (the fused ops' backward reads their saved run).
func requireRefusesChangedOutput(t *testing.T, e *Engine, forward func() *Tensor) {
	err := e.WithGradTape(func() error {
		y := forward()
		loss := e.must(e.Sum(y))
		zeros := host(t, y.Shape(), make([]float32, y.Numel())...)
		require.NoError(t, e.Assign(y.Detach(), e.must(e.Add(zeros, zeros))))
		_, err := e.Backward(loss)
		return err
	})
	require.ErrorContains(t, err, "changed in place after the forward used it")
}

// NaN: a row whose whole first block of keys scores NaN gives NaN (no
// maximum picks a NaN, and the running one stays -inf); a NaN key or
// value behind the causal diagonal, which the forward never reads, leaves
// the gradients of the rows before it finite, as their values are (on the
// CPU; a GPU's tensor cores multiply a masked tile's NaN by 0, as
// PyTorch's kernels do).
func TestFlashAttentionNaN(t *testing.T) {
	e := newEngine(t)
	nan := float32(math.NaN())
	q := host(t, []int{1, 2, 4}, 1, 2, 3, 4, 5, 6, 7, 8)
	kv := make([]float32, 128*4)
	for i := range kv {
		kv[i] = float32(i%7) / 7
		if i < 64*4 {
			kv[i] = nan
		}
	}
	k := host(t, []int{1, 128, 4}, kv...)
	y := e.must(e.ScaledDotProductAttention(q, k, k, AttentionOptions{}))
	require.NotNil(t, y.base)
	for _, x := range values(t, y) {
		require.True(t, math.IsNaN(float64(x)), "NaN scores give NaN, got %v", values(t, y))
	}

	vv := make([]float32, 8*4)
	for i := range vv {
		vv[i] = float32(i%5) / 5
	}
	qs := host(t, []int{1, 8, 4}, slices.Clone(vv)...)
	require.NoError(t, qs.SetRequiresGrad(true))
	ks := host(t, []int{1, 8, 4}, slices.Clone(vv)...)
	ks.host[6*4+1] = nan // key 6: after queries 0..5
	vv[5*4+2] = nan      // value 5: after queries 0..4
	v := host(t, []int{1, 8, 4}, vv...)
	require.NoError(t, e.WithGradTape(func() error {
		y := e.must(e.ScaledDotProductAttention(qs, ks, v, AttentionOptions{Causal: true}))
		first := e.must(e.Narrow(y, 1, 0, 2))
		_, err := e.Backward(e.must(e.Sum(first)))
		return err
	}))
	g := values(t, qs.Grad())
	for i, x := range g[:2*4] {
		require.False(t, math.IsNaN(float64(x)), "grad element %d of the rows before the NaN: %v", i, g)
	}
}

// Under autocast while the tape records, f32 heads are rounded to bf16
// before the kernel, which the tape then keeps (half the bytes): values
// and gradients are those of the kernel reading the f32 heads, bit for
// bit (it rounds them so as it loads them), whichever heads are trained,
// and the forward keeps 2 bytes a head's element where it kept 4.
func TestFlashAttentionUnderAutocastKeepsBF16Heads(t *testing.T) {
	forceFlashBF16 = true
	defer func() { forceFlashBF16, keepF32Heads = false, false }()
	defer func() { flashFrozen = [3]bool{} }()
	for _, frozen := range [][3]bool{{}, {true, false, false}, {false, true, true}, {true, true, false}} {
		flashFrozen = frozen
		for _, c := range flashCases {
			keepF32Heads = true
			want := flashRunCase(t, c, true, ggmlcgo.BF16)
			keepF32Heads = false
			got := flashRunCase(t, c, true, ggmlcgo.BF16)
			for i, what := range []string{"values", "grad q", "grad k", "grad v"} {
				assert.Equal(t, bitsOfFloats(want[i]), bitsOfFloats(got[i]), "%s, frozen %v: %s", c.name, frozen, what)
			}
		}
	}
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	const b, h, tt, d = 2, 4, 16, 8
	const n = b * h * tt * d
	placed := func(f32Heads bool) int64 {
		keepF32Heads = f32Heads
		e := newEngine(t)
		x := host(t, []int{b, tt, h, d}, make([]float32, n)...)
		require.NoError(t, x.SetRequiresGrad(true))
		return forwardPlaced(t, e, ggmlcgo.BF16, func() (*Tensor, error) {
			head := func(k float32) *Tensor { // an activation, read as [b, h, t, d] in place
				return e.must(e.Transpose(e.must(e.Scale(x, k)), 1, 2))
			}
			y, err := e.ScaledDotProductAttention(head(1), head(2), head(3), AttentionOptions{Causal: true})
			if err != nil {
				return nil, err
			}
			return e.Sum(y)
		})
	}
	f32, bf16 := placed(true), placed(false)
	assert.Equal(t, int64(3*n*2), f32-bf16, "three heads in bf16")
}
