package core

// Clipping data-parallel gradients by whole bucket (clip.go) beside the
// other ways a gradient changes in place, found by a review.
import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// A pending in-place update of a gradient (p.grad:mul_(0.5), as a script
// dividing accumulated gradients does) before clip_grad_norm must survive
// the whole-bucket clip.
func TestBucketClipKeepsAQueuedGradientUpdate(t *testing.T) {
	for _, eager := range []bool{false, true} {
		for _, realize := range []bool{false, true} {
			want := refGrads(t)
			e := newEngine(t)
			e.SetEager(eager)
			params := mlpParams(t, e)
			require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
			mlpBackward(t, e, params, false)
			if realize {
				require.NoError(t, e.Realize())
			}
			require.NoError(t, e.NoGrad(func() error {
				for _, p := range params {
					h, err := e.Scale(p.Grad(), 0.5)
					if err == nil {
						err = e.Assign(p.Grad(), h)
					}
					if err != nil {
						return err
					}
				}
				return nil
			}))
			flats, _ := e.dp.wholeGradBuckets(params)
			require.Len(t, flats, 1)
			n, err := e.ClipGradNorm(params, float32(math.Inf(1)))
			require.NoError(t, err)
			v, err := n.Item()
			require.NoError(t, err)
			assert.InDelta(t, 0.75*l2Norm(want), v, 1e-4, "norm eager %v realize %v", eager, realize)
			assertScaled(t, 0.75, want, gradsOf(t, params))
		}
	}
}

// TestClipValueThenBucketClip: clip_grad_value's clamp, queued on each
// gradient, comes before the bucket's norm and scaling.
func TestClipValueThenBucketClip(t *testing.T) {
	want := refGrads(t)
	e, params := summingMLP(t)
	mlpBackward(t, e, params, false)
	require.NoError(t, e.ClipGradValue(params, 0.01))
	_, err := e.ClipGradNorm(params, float32(math.Inf(1)))
	require.NoError(t, err)
	got := gradsOf(t, params)
	for i := range want {
		for j, v := range want[i] {
			w := float32(math.Max(-0.01, math.Min(0.01, float64(1.5*v))))
			assert.InDelta(t, w, got[i][j], 1e-6, "param %d [%d]", i, j)
		}
	}
}

// Without zero_grad, a gradient whose slice has a pending update (here
// p.grad:mul_(0.5) after a computed step) and that the next backward does
// not reach: write skips it (no hold), and a per-parameter clip then
// moves the update past the bucket's sum.
func TestAnUnreachedGradientsQueuedUpdateIsSummed(t *testing.T) {
	e := newEngine(t)
	params, w := mlpAndW(t, e)
	backwardOfSquares(t, e, w)
	assertValues(t, []float32{15, 18}, w.Grad())
	require.NoError(t, e.NoGrad(func() error {
		h, err := e.Scale(w.Grad(), 0.5)
		if err == nil {
			err = e.Assign(w.Grad(), h)
		}
		return err
	}))
	mlpBackward(t, e, params, true) // w not reached: 7.5, 9 averaged -> 11.25, 13.5
	// per-parameter clip of w only (its bucket is not whole)
	_, err := e.ClipGradNorm([]*Tensor{w}, float32(math.Inf(1)))
	require.NoError(t, err)
	assertValues(t, []float32{11.25, 13.5}, w.Grad())
}

// NoSync backward then an averaging backward from one tape, w reached
// only by the first; then a per-parameter clip of w.
func TestNoSyncThenABackwardThatSkipsAParameter(t *testing.T) {
	for _, clip := range []string{"none", "w", "all"} {
		t.Run(clip, func(t *testing.T) { noSyncSkip(t, clip) })
	}
}

func noSyncSkip(t *testing.T, clip string) {
	e := newEngine(t)
	params, w := mlpAndW(t, e)
	backwardOfSquares(t, e, w)
	assertValues(t, []float32{15, 18}, w.Grad())
	ZeroGrad(append(params, w)) // an ordinary step: zero_grad keeps the slices as buffers
	var lw, lm *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		lw = squares(t, e, w)
		h := mlpBatch(t)
		for l := 0; l < len(params); l += 2 {
			var err error
			if h, err = e.Linear(h, params[l]); err == nil {
				h, err = e.Add(h, params[l+1])
			}
			if err == nil && l+2 < len(params) {
				h, err = e.Relu(h)
			}
			require.NoError(t, err)
		}
		var err error
		lm, err = e.CrossEntropyLabels(h, mlpLabels)
		return err
	}))
	require.NoError(t, e.NoSync(func() error { _, err := e.Backward(lw); return err }))
	_, err := e.Backward(lm)
	require.NoError(t, err)
	switch clip {
	case "w":
		_, err = e.ClipGradNorm([]*Tensor{w}, float32(math.Inf(1)))
	case "all":
		_, err = e.ClipGradNorm(append(params, w), float32(math.Inf(1)))
	}
	require.NoError(t, err)
	assertValues(t, []float32{15, 18}, w.Grad()) // 1.5 · 2w, this step's only
}

func clipRef(t *testing.T, maxNorm float64, dtype ...ggmlcgo.Type) ([][]float32, float32) {
	summed := averagedRef(t, dtype...)
	coef := float32(maxNorm / (l2Norm(summed) + 1e-6))
	for i := range summed {
		summed[i] = scaledBy(coef, summed[i])
	}
	return summed, coef
}

// TestBucketClipThenDataParallelOff: turning data parallelism off after a
// bucket clip gives each gradient its clipped value in a buffer of its own.
func TestBucketClipThenDataParallelOff(t *testing.T) {
	for _, eager := range []bool{false, true} {
		for _, typ := range []ggmlcgo.Type{ggmlcgo.F32, ggmlcgo.BF16} {
			want, _ := clipRef(t, 0.1, typ)
			e := newEngine(t)
			e.SetEager(eager)
			params := mlpParams(t, e, typ)
			require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
			mlpBackward(t, e, params, false)
			_, err := e.ClipGradNorm(params, 0.1)
			require.NoError(t, err)
			require.NoError(t, e.SetDataParallel(nil, 0, nil, nil))
			got := gradsOf(t, params)
			for i := range want {
				assert.InDeltaSlice(t, want[i], got[i], 1e-5, "eager %v type %v param %d", eager, typ, i)
			}
		}
	}
}

// TestBucketClipTwiceAndPerParameter: clipping twice by bucket, with a
// parameter's own clip between, and a gradient taken before: all agree.
func TestBucketClipTwiceAndPerParameter(t *testing.T) {
	want, _ := clipRef(t, 0.1)
	e, params := summingMLP(t)
	mlpBackward(t, e, params, false)
	g0 := params[0].Grad()
	_, err := e.ClipGradNorm(params, 0.1)
	require.NoError(t, err)
	_, err = e.ClipGradNorm(params[:1], 1e9) // per-param on a slice after a bucket clip
	require.NoError(t, err)
	_, err = e.ClipGradNorm(params, 0.1)
	require.NoError(t, err)
	got := gradsOf(t, params)
	for i := range want {
		assert.InDeltaSlice(t, want[i], got[i], 1e-5, "param %d", i)
	}
	v, err := g0.Float32s()
	require.NoError(t, err)
	assert.InDeltaSlice(t, want[0], v, 1e-5)
}
