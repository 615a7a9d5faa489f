package core

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// scaleCollective is an in-graph collective of two processes (the world
// every test here gives SetDataParallel) whose "sum" multiplies by k, as k
// processes holding the same gradients would sum them: its average is the
// gradients times k/2.
func scaleCollective(t *testing.T, k float32) *GraphCollective {
	t.Helper()
	p, free, err := ggmlcgo.NewScaleCollective(k, 2)
	require.NoError(t, err)
	t.Cleanup(free)
	return &GraphCollective{C: p}
}

// mlpParams are the weights and biases of a 4-6-5-3 MLP, resident (in
// f32, or in the type given).
func mlpParams(t *testing.T, e *Engine, dtype ...ggmlcgo.Type) []*Tensor {
	t.Helper()
	typ := ggmlcgo.F32
	if len(dtype) > 0 {
		typ = dtype[0]
	}
	rng := rand.New(rand.NewSource(3))
	var params []*Tensor
	sizes := []int{4, 6, 5, 3}
	for l := 0; l+1 < len(sizes); l++ {
		for _, shape := range [][]int{{sizes[l+1], sizes[l]}, {sizes[l+1]}} {
			v := make([]float32, shapeNumel(shape))
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.5)
			}
			p := host(t, shape, v...)
			require.NoError(t, p.SetRequiresGrad(true))
			require.NoError(t, p.MoveToDeviceAs(e, residency.Persistent, typ))
			params = append(params, p)
		}
	}
	return params
}

func shapeNumel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// summingMLP is an engine and mlpParams, averaged in the graph over two
// processes by a collective that multiplies by 3 (averagedRef's).
func summingMLP(t *testing.T) (*Engine, []*Tensor) {
	t.Helper()
	e := newEngine(t)
	params := mlpParams(t, e)
	require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
	return e, params
}

// mlpAndW is the MLP's parameters and one more, w = {5, 6}, all resident
// and data-parallel over two processes whose "sum" is times 3.
func mlpAndW(t *testing.T, e *Engine) ([]*Tensor, *Tensor) {
	t.Helper()
	params := mlpParams(t, e)
	w := host(t, []int{2}, 5, 6)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, w.MoveToDevice(e, residency.Persistent))
	require.NoError(t, e.SetDataParallel(append(params, w), 2, nil, scaleCollective(t, 3)))
	return params, w
}

// squares is sum(w·w), recorded on the tape if one is on.
func squares(t *testing.T, e *Engine, w *Tensor) *Tensor {
	t.Helper()
	sq, err := e.Mul(w, w)
	require.NoError(t, err)
	loss, err := e.Sum(sq)
	require.NoError(t, err)
	return loss
}

// backwardOfSquares runs backward of squares(w) on a tape of its own: w's
// gradient gains 2w, whose average over the collective is 1.5 · 2w.
func backwardOfSquares(t *testing.T, e *Engine, w *Tensor) {
	t.Helper()
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error { loss = squares(t, e, w); return nil }))
	_, err := e.Backward(loss)
	require.NoError(t, err)
}

// mlpBackward runs backward of the MLP's cross-entropy on a fixed batch,
// with grads zeroed first unless accumulate.
func mlpBackward(t *testing.T, e *Engine, params []*Tensor, accumulate bool) {
	t.Helper()
	if !accumulate {
		ZeroGrad(params)
	}
	_, err := e.Backward(mlpLoss(t, e, params, mlpBatch(t), mlpLabels, e.Relu))
	require.NoError(t, err)
}

var mlpLabels = []int{0, 2, 1, 1, 0}

func mlpBatch(t *testing.T) *Tensor {
	return host(t, []int{5, 4}, 0.5, -1, 2, 0.1, 1, 1, -0.5, 0.3, -2, 0.7, 0.2, 1.5, 0.9, -0.4, 0.6, -1.1, 0.8, 0.05, -0.3, 1.2)
}

// mlpLoss is the cross-entropy of an MLP (params: weight, bias, ...; act
// between the layers) on x and labels, recorded on a tape.
func mlpLoss(t *testing.T, e *Engine, params []*Tensor, x *Tensor, labels []int, act func(*Tensor) (*Tensor, error)) *Tensor {
	t.Helper()
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		h := x
		for l := 0; l < len(params); l += 2 {
			var err error
			if h, err = e.Linear(h, params[l]); err == nil {
				h, err = e.Add(h, params[l+1])
			}
			if err == nil && l+2 < len(params) {
				h, err = act(h)
			}
			if err != nil {
				return err
			}
		}
		var err error
		loss, err = e.CrossEntropyLabels(h, labels)
		return err
	}))
	return loss
}

// refGrads are the MLP's gradients in one process without data
// parallelism (its weights stored as dtype, if given).
func refGrads(t *testing.T, dtype ...ggmlcgo.Type) [][]float32 {
	t.Helper()
	ref := newEngine(t)
	params := mlpParams(t, ref, dtype...)
	mlpBackward(t, ref, params, false)
	return gradsOf(t, params)
}

// averagedRef is refGrads as the collective that multiplies by 3 averages
// them over two processes: 1.5 times one process's.
func averagedRef(t *testing.T, dtype ...ggmlcgo.Type) [][]float32 {
	t.Helper()
	grads := refGrads(t, dtype...)
	for i := range grads {
		grads[i] = scaledBy(1.5, grads[i])
	}
	return grads
}

// l2Norm is the L2 norm of all of grads, in float64.
func l2Norm(grads [][]float32) float64 {
	var sq float64
	for _, g := range grads {
		for _, v := range g {
			sq += float64(v) * float64(v)
		}
	}
	return math.Sqrt(sq)
}

// assertScaled checks got = k·want, element by element.
func assertScaled(t *testing.T, k float32, want, got [][]float32) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDeltaSlice(t, scaledBy(k, want[i]), got[i], 1e-5, "param %d", i)
	}
}

func scaledBy(k float32, v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = k * x
	}
	return out
}

func gradsOf(t *testing.T, params []*Tensor) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, p := range params {
		require.NotNil(t, p.Grad())
		v, err := p.Grad().Float32s()
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// TestInGraphSumsAverage: with the gradients "summed" by a collective that
// multiplies by 3 and averaged over 2 processes, every gradient is 1.5
// times one process's, in one bucket or several, accumulating across
// backward calls as .grad does (the sum of the accumulated gradients), and
// a parameter no op reached on any process keeps no gradient.
func TestInGraphSumsAverage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bucket int64
	}{{"one bucket", 25 << 20}, {"a bucket per parameter", 4}, {"two parameters a bucket", 100}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
			graphBucketBytes = tc.bucket

			ref := newEngine(t)
			refParams := mlpParams(t, ref)
			mlpBackward(t, ref, refParams, false)
			want := gradsOf(t, refParams)
			mlpBackward(t, ref, refParams, true)
			wantAcc := gradsOf(t, refParams)

			e := newEngine(t)
			params, unused := mlpAndW(t, e)
			mlpBackward(t, e, params, false)
			got := gradsOf(t, params)
			assertScaled(t, 1.5, want, got)
			assert.Nil(t, unused.Grad(), "no process gave it a gradient (the fake's other process mirrors this one): it has none, as alone")
			assert.Zero(t, e.Stats().ReduceTime, "no collective between computes")

			// Without zero_grad: each process adds its new gradient to
			// the average, and the sum is averaged again.
			mlpBackward(t, e, params, true)
			got = gradsOf(t, params)
			for i := range want {
				for j := range want[i] {
					acc := 1.5 * (1.5*want[i][j] + (wantAcc[i][j] - want[i][j]))
					assert.InDelta(t, acc, got[i][j], 1e-5, "accumulated param %d [%d]", i, j)
				}
			}
		})
	}
}

// TestInGraphSumsKeepAnAccumulatedGradient: without zero_grad, a
// parameter the second backward does not reach keeps what its gradient
// (its bucket slice) accumulated, averaged again with its bucket.
func TestInGraphSumsKeepAnAccumulatedGradient(t *testing.T) {
	e := newEngine(t)
	params, w := mlpAndW(t, e)
	backwardOfSquares(t, e, w)
	assertValues(t, []float32{15, 18}, w.Grad()) // 1.5 · 2w
	mlpBackward(t, e, params, true)
	assertScaled(t, 1.5, refGrads(t), gradsOf(t, params))
	assertValues(t, []float32{22.5, 27}, w.Grad())
}

// TestInGraphSumsOverlapTheBackward: the last layer's bucket is summed
// before the first layer's weight gradient is computed (the sums start
// while the backward goes on), every bucket once, and a steady step on
// the CPU is one graph compute: forward, backward, sums and update.
func TestInGraphSumsOverlapTheBackward(t *testing.T) {
	defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
	graphBucketBytes = 4 // a bucket per parameter
	e := newEngine(t)
	params := mlpParams(t, e)
	require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 2)))
	opt, err := NewSGD(e, params, SGDOptions{LR: 0.1})
	require.NoError(t, err)

	var nodes []string
	e.beforeCompute = func(g *ggmlcgo.Graph) {
		nodes = nodes[:0]
		for _, n := range g.Nodes() {
			nodes = append(nodes, n.OpName()+" "+n.Name())
		}
	}
	step := func() {
		mlpBackward(t, e, params, false)
		require.NoError(t, opt.Step())
	}
	step()
	_, err = params[0].Float32s()
	require.NoError(t, err)
	before := e.Stats().GraphComputes
	step()
	_, err = params[0].Float32s()
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Stats().GraphComputes-before, "one compute a step")

	var sums, join, productsAfterFirstSum int
	first := -1
	for i, n := range nodes {
		switch {
		case strings.HasSuffix(n, " all_reduce_mean"):
			sums++
			if first < 0 {
				first = i
			}
		case strings.HasSuffix(n, " all_reduce_join"):
			join = i
		case first >= 0 && join == 0 && (strings.HasPrefix(n, "MUL_MAT") || strings.HasPrefix(n, "OUT_PROD")):
			productsAfterFirstSum++
		}
	}
	assert.Equal(t, len(params), sums, "one sum per bucket:\n%s", strings.Join(nodes, "\n"))
	assert.Greater(t, join, first)
	assert.Positive(t, productsAfterFirstSum, "gradient products after the first sum:\n%s", strings.Join(nodes, "\n"))
}

// TestHostCollectiveWhereTheBackendTakesNoNode: a device collective on the
// CPU backend (or a library without the kernels) falls back to the sums
// between computes.
func TestHostCollectiveWhereTheBackendTakesNoNode(t *testing.T) {
	e := newEngine(t)
	params := mlpParams(t, e)
	coll := scaleCollective(t, 2)
	coll.OnDevice = true
	calls := 0
	require.NoError(t, e.SetDataParallel(params, 2, func(Buffer) error { calls++; return nil }, coll))
	mlpBackward(t, e, params, false)
	require.NoError(t, e.Realize())
	assert.Equal(t, 1, calls, "one bucket summed between computes")
}

// TestFinishCollectivesRunsTheQueuedSums: a script's end computes a
// backward's in-graph sums still pending (a process that ends without
// another compute would leave the others waiting in theirs).
func TestFinishCollectivesRunsTheQueuedSums(t *testing.T) {
	e := newEngine(t)
	params := mlpParams(t, e)
	require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 2)))
	mlpBackward(t, e, params, false)
	require.NotEmpty(t, e.pending, "the sums are queued, not run")
	before := e.Stats().GraphComputes
	require.NoError(t, e.FinishCollectives())
	assert.Empty(t, e.pending)
	assert.Equal(t, int64(1), e.Stats().GraphComputes-before)
	require.NoError(t, e.FinishCollectives())
	assert.Equal(t, int64(1), e.Stats().GraphComputes-before, "nothing left to run")
}

// TestTwoBackwardsInOneTapeSumBoth: a second backward before the first's
// sums ran (two losses in one tape) gets the first's sums run first, so
// each gradient is summed once: 2w from the first, + 3 from the second,
// with a sum over 2 processes holding the same values (times 2) averaged.
func TestTwoBackwardsInOneTapeSumBoth(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{2}, 1, 2)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, w.MoveToDevice(e, residency.Persistent))
	require.NoError(t, e.SetDataParallel([]*Tensor{w}, 2, nil, scaleCollective(t, 2)))
	require.NoError(t, e.WithGradTape(func() error {
		sq, err := e.Mul(w, w)
		if err != nil {
			return err
		}
		l1, err := e.Sum(sq)
		if err != nil {
			return err
		}
		s3, err := e.Scale(w, 3)
		if err != nil {
			return err
		}
		l2, err := e.Sum(s3)
		if err != nil {
			return err
		}
		if _, err = e.Backward(l1); err != nil {
			return err
		}
		_, err = e.Backward(l2)
		return err
	}))
	assertValues(t, []float32{5, 7}, w.Grad())
}

// TestInGraphSumsInSplitGraphsAreJoined: where a backward's work is
// computed in pieces (a compute in the middle of it), every graph that
// holds a sum ends joined (a device's CUDA graph capture must join the
// stream it forked), and the gradients are the same.
func TestInGraphSumsInSplitGraphsAreJoined(t *testing.T) {
	defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
	graphBucketBytes = 4 // a bucket per parameter: the last layer's summed before the split
	want := refGrads(t)
	e := newEngine(t)
	params := mlpParams(t, e)
	require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 2)))
	withSums, open := 0, 0
	e.beforeCompute = func(g *ggmlcgo.Graph) {
		last := ""
		for _, n := range g.Nodes() {
			if name := n.Name(); name == "all_reduce_mean" || name == "all_reduce_join" {
				last = name
			}
		}
		if last != "" {
			withSums++
		}
		if last == "all_reduce_mean" {
			open++
		}
	}
	ZeroGrad(params)
	_, err := e.Backward(mlpLoss(t, e, params, mlpBatch(t), mlpLabels, splittingRelu(e)))
	require.NoError(t, err)
	assertScaled(t, 1, want, gradsOf(t, params))
	assert.Equal(t, 2, withSums, "the backward's sums in two graphs")
	assert.Zero(t, open, "graphs ending with a sum not joined")
}

// TestInGraphSumsOffAndOn: turning data parallelism off runs the sums due
// first and leaves plain gradients; on again, the buckets serve again.
func TestInGraphSumsOffAndOn(t *testing.T) {
	want := refGrads(t)
	e := newEngine(t)
	params := mlpParams(t, e)
	coll := scaleCollective(t, 3)
	require.NoError(t, e.SetDataParallel(params, 2, nil, coll))
	mlpBackward(t, e, params, false)
	type span struct{ lo, hi uintptr }
	var buckets []span
	for _, b := range e.dp.buckets {
		n, err := b.flat.handle.Tensor()
		require.NoError(t, err)
		buckets = append(buckets, span{uintptr(n.Data()), uintptr(n.Data()) + uintptr(n.Nbytes())})
	}
	require.NoError(t, e.SetDataParallel(nil, 0, nil, nil))
	for i, p := range params {
		n, err := p.grad.handle.Tensor()
		require.NoError(t, err)
		for _, b := range buckets {
			at := uintptr(n.Data())
			assert.False(t, at >= b.lo && at < b.hi, "param %d's gradient is still in a bucket, whose views are freed", i)
		}
	}
	assertScaled(t, 1.5, want, gradsOf(t, params))
	mlpBackward(t, e, params, false)
	assertScaled(t, 1, want, gradsOf(t, params))
	require.NoError(t, e.SetDataParallel(params, 2, nil, coll))
	mlpBackward(t, e, params, false)
	assertScaled(t, 1.5, want, gradsOf(t, params))
}

// TestInGraphSumsOfBF16Weights: weights stored in bf16 get f32 gradients,
// summed and averaged as f32 weights' are.
func TestInGraphSumsOfBF16Weights(t *testing.T) {
	want := refGrads(t, ggmlcgo.BF16)

	e := newEngine(t)
	params := mlpParams(t, e, ggmlcgo.BF16)
	require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
	mlpBackward(t, e, params, false)
	got := gradsOf(t, params)
	assertScaled(t, 1.5, want, got)
}

// TestInGraphSumsThenClipping: clipping after backward scales the
// gradients in place, and a gradient is its bucket slice: the norm must be
// of the sums and the scaling must follow them, not move the slice's write
// past them. With the sums in the graph and between computes (each "sum"
// times 3, so the averages are 1.5 times one process's gradients), in
// buckets of every size and eagerly too, against the norm and clipped
// gradients worked out here from one process's.
func TestInGraphSumsThenClipping(t *testing.T) {
	const maxNorm = 0.3
	summed := averagedRef(t)
	norm := l2Norm(summed)
	coef := float32(maxNorm / (norm + 1e-6))
	require.Less(t, coef, float32(1), "the test clips")
	for _, inGraph := range []bool{true, false} {
		for _, bucket := range []int64{graphBucketBytes, 4} {
			for _, eager := range []bool{false, true} {
				name := fmt.Sprintf("in graph %v, bucket %d, eager %v", inGraph, bucket, eager)
				func() {
					defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
					graphBucketBytes = bucket
					e := newEngine(t)
					e.SetEager(eager)
					params := mlpParams(t, e)
					if inGraph {
						require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
					} else {
						require.NoError(t, e.SetDataParallel(params, 2, func(b Buffer) error {
							v := unsafe.Slice((*float32)(b.Data), b.Count)
							for i := range v {
								v[i] *= 3
							}
							return nil
						}, nil))
					}
					for step := 0; step < 2; step++ {
						mlpBackward(t, e, params, false)
						n, err := e.ClipGradNorm(params, maxNorm)
						require.NoError(t, err)
						got := gradsOf(t, params)
						v, err := n.Item()
						require.NoError(t, err)
						assert.InDelta(t, norm, v, 1e-4*norm, name)
						for i := range summed {
							assert.InDeltaSlice(t, scaledBy(coef, summed[i]), got[i], 1e-5, "%s, param %d", name, i)
						}
					}
				}()
			}
		}
	}
}

// TestClippingSomeParametersOfABucket: clipping a subset of the
// data-parallel parameters scales whole buckets as one tensor only where
// every gradient in them is clipped: the norm is the subset's, and the
// gradients outside it (sharing a bucket with one inside) keep their
// values, eager or lazy.
func TestClippingSomeParametersOfABucket(t *testing.T) {
	defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
	graphBucketBytes = 100 // buckets [b3 W3 b2] [W2] [b1] [W1]
	const maxNorm = 0.1
	summed := averagedRef(t)
	norm := l2Norm(summed[:4])
	coef := float32(maxNorm / (norm + 1e-6))
	require.Less(t, coef, float32(1), "the test clips")
	for _, eager := range []bool{false, true} {
		e := newEngine(t)
		e.SetEager(eager)
		params := mlpParams(t, e)
		require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
		mlpBackward(t, e, params, false)
		n, err := e.ClipGradNorm(params[:4], maxNorm)
		require.NoError(t, err)
		require.Len(t, e.dp.buckets, 4)
		flats, _ := e.dp.wholeGradBuckets(params[:4])
		assert.Len(t, flats, 3, "[W2] [b1] [W1] are whole")
		v, err := n.Item()
		require.NoError(t, err)
		assert.InDelta(t, norm, v, 1e-4*norm, "eager %v", eager)
		got := gradsOf(t, params)
		for i := range summed {
			k := float32(1)
			if i < 4 {
				k = coef
			}
			assert.InDeltaSlice(t, scaledBy(k, summed[i]), got[i], 1e-5, "eager %v, param %d", eager, i)
		}
	}
}

// TestAGradientReadAfterASplitBackwardIsTheSum: a compute in the middle of
// a backward (here an op's gradient that computes what is pending, as one
// reading a value on the host would) runs the slice writes queued so far,
// while their bucket's sum is queued later: a gradient, which is its
// slice, read after the backward must still wait for the sum.
func TestAGradientReadAfterASplitBackwardIsTheSum(t *testing.T) {
	want := refGrads(t)
	e, params := summingMLP(t)
	ZeroGrad(params)
	_, err := e.Backward(mlpLoss(t, e, params, mlpBatch(t), mlpLabels, splittingRelu(e)))
	require.NoError(t, err)
	for i := len(params) - 1; i >= 0; i-- { // the last layer's first: its write ran early
		v, err := params[i].Grad().Float32s()
		require.NoError(t, err)
		assert.InDeltaSlice(t, scaledBy(1.5, want[i]), v, 1e-5, "param %d", i)
	}
}

// splittingRelu is relu for mlpLoss whose second use's gradient (after the
// last layer's, whose slices are written and, with a bucket per
// parameter, summed by then) first computes what is pending, as an op
// reading a value on the host would.
func splittingRelu(e *Engine) func(*Tensor) (*Tensor, error) {
	relus := 0
	return func(h *Tensor) (*Tensor, error) {
		h, err := e.Relu(h)
		if relus++; err != nil || relus != 2 {
			return h, err
		}
		f := h.gradFn.backward
		h.gradFn.backward = func(g *Tensor) ([]*Tensor, error) {
			if err := e.Realize(); err != nil {
				return nil, err
			}
			return f(g)
		}
		return h, nil
	}
}

// TestReadsWithTheInGraphSums: on an asynchronous device, reading the loss
// after backward queues the backward, its sums and the update, as without
// data parallelism (the host takes no part in these sums); with
// GGLUA_DIST_READS=wait it leaves them for the next compute, as with the
// sums between computes, and reading a gradient computes its sum first.
func TestReadsWithTheInGraphSums(t *testing.T) {
	defer func(was bool) { distReadsWait = was }(distReadsWait)
	for _, wait := range []bool{false, true} {
		distReadsWait = wait
		e := newEngine(t)
		require.NoError(t, e.backend.ComputeAsDevice())
		params := mlpParams(t, e)
		require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
		ZeroGrad(params)
		loss := mlpLoss(t, e, params, mlpBatch(t), mlpLabels, e.Relu)
		_, err := e.Backward(loss)
		require.NoError(t, err)
		_, err = loss.Item()
		require.NoError(t, err)
		if wait {
			assert.NotEmpty(t, e.pending, "waiting: the backward and its sums stay pending")
		} else {
			assert.Empty(t, e.pending, "overlapping: the backward and its sums are queued")
		}
		assertScaled(t, 1.5, refGrads(t), gradsOf(t, params))
		assert.Empty(t, e.pending)
	}
}

// TestAGradientHeldAcrossDataParallelOff: a gradient held from before data
// parallelism is turned off (backward's result, a script's local) is the
// parameter's gradient still, with its value in memory of its own (the
// bucket slices' views are freed).
func TestAGradientHeldAcrossDataParallelOff(t *testing.T) {
	want := refGrads(t)
	e, params := summingMLP(t)
	mlpBackward(t, e, params, false)
	held := params[0].Grad()
	require.NoError(t, e.SetDataParallel(nil, 0, nil, nil))
	assert.Same(t, held, params[0].Grad())
	v, err := held.Float32s()
	require.NoError(t, err)
	assert.InDeltaSlice(t, scaledBy(1.5, want[0]), v, 1e-5)
}

// TestNoSyncAccumulatesThenSumsOnce: backward inside NoSync adds this
// process's gradients to .grad and sums nothing; the next backward
// averages all that accumulated (here the same batch three times: 3g,
// "summed" times 3 over 2 processes), with one sum a bucket, whether the
// sums run in the graph or between computes.
func TestNoSyncAccumulatesThenSumsOnce(t *testing.T) {
	want := refGrads(t)
	for _, inGraph := range []bool{true, false} {
		e := newEngine(t)
		params := mlpParams(t, e)
		calls := 0
		if inGraph {
			require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
		} else {
			require.NoError(t, e.SetDataParallel(params, 2, func(b Buffer) error {
				calls++
				v := unsafe.Slice((*float32)(b.Data), b.Count)
				for i := range v {
					v[i] *= 3
				}
				return nil
			}, nil))
		}
		sums := 0
		e.beforeCompute = func(g *ggmlcgo.Graph) {
			for _, n := range g.Nodes() {
				if n.Name() == "all_reduce_mean" {
					sums++
				}
			}
		}
		require.NoError(t, e.NoSync(func() error {
			mlpBackward(t, e, params, false)
			mlpBackward(t, e, params, true)
			return nil
		}))
		assertScaled(t, 2, want, gradsOf(t, params)) // this process's alone
		mlpBackward(t, e, params, true)
		assertScaled(t, 4.5, want, gradsOf(t, params))
		assert.Equal(t, 1, sums+calls, "in graph %v: one sum", inGraph)
	}
}

// A collective's BucketBytes (dist.data_parallel's bucket_cap_mb) bounds
// the buckets in place of the default, and the averages stay the same.
func TestBucketBytesBoundTheBuckets(t *testing.T) {
	want := refGrads(t)
	for _, c := range []struct {
		bytes   int64
		buckets int
	}{{0, 1}, {4, 6}, {1 << 30, 1}} {
		e := newEngine(t)
		params := mlpParams(t, e)
		require.Len(t, params, 6)
		coll := scaleCollective(t, 3)
		coll.BucketBytes = c.bytes
		require.NoError(t, e.SetDataParallel(params, 2, nil, coll))
		mlpBackward(t, e, params, false)
		assertScaled(t, 1.5, want, gradsOf(t, params))
		assert.Len(t, e.dp.buckets, c.buckets, "bucket bytes %d", c.bytes)
	}
}

// TestTheCollectiveMustHaveTheWorldsProcesses: the in-graph mean divides
// by the collective's own count of processes, so a world size that
// differs is refused rather than averaged wrong.
func TestTheCollectiveMustHaveTheWorldsProcesses(t *testing.T) {
	e := newEngine(t)
	params := mlpParams(t, e)
	err := e.SetDataParallel(params, 3, nil, scaleCollective(t, 3))
	assert.ErrorContains(t, err, "data parallel: the collective has 2 processes, not 3")
	assert.Nil(t, e.dp)
	require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
}
