package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gradOf sets p's gradient to c by one backward of sum(p*c).
func gradOf(t *testing.T, e *Engine, p, c *Tensor) {
	t.Helper()
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		loss, err = sumOf(e)(e.Mul(p, c))
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
}

func TestClipGradNormAndValue(t *testing.T) {
	e := newEngine(t)
	p := host(t, []int{2}, 1, 1)
	_, err := NewSGD(e, []*Tensor{p}, SGDOptions{LR: 0.1}) // makes p a resident parameter
	require.NoError(t, err)
	gradOf(t, e, p, host(t, []int{2}, 3, 4))
	norm, err := e.ClipGradNorm([]*Tensor{p}, 1)
	require.NoError(t, err)
	n, err := norm.Item()
	require.NoError(t, err)
	assert.InDelta(t, 5, n, 1e-5)
	assertClose(t, []float64{0.6, 0.8}, values(t, p.Grad()), 1e-5, "clipped to norm 1")

	ZeroGrad([]*Tensor{p})
	gradOf(t, e, p, host(t, []int{2}, 3, -4))
	require.NoError(t, e.ClipGradValue([]*Tensor{p}, 3.5))
	assertClose(t, []float64{3, -3.5}, values(t, p.Grad()), 1e-6, "clamped")
	_, err = e.ClipGradNorm([]*Tensor{p}, 0)
	assert.Error(t, err)
}

func TestSchedulersFollowTorchFormulas(t *testing.T) {
	lrs := func(s *Scheduler, lr *float32, n int) []float64 {
		out := []float64{float64(*lr)}
		for i := 1; i < n; i++ {
			s.Step()
			out = append(out, float64(*lr))
		}
		return out
	}
	check := func(name string, want []float64, got []float64) {
		require.Len(t, got, len(want), name)
		for i := range want {
			assert.InDelta(t, want[i], got[i], 1e-6, "%s at step %d", name, i)
		}
	}
	lr := float32(0.1)
	s, err := StepLR(&lr, 2, 0.5)
	require.NoError(t, err)
	check("step", []float64{0.1, 0.1, 0.05, 0.05, 0.025}, lrs(s, &lr, 5))

	lr = 1
	s, err = CosineLR(&lr, 4, 0)
	require.NoError(t, err)
	check("cosine", []float64{1, 0.8535534, 0.5, 0.1464466, 0, 0}, lrs(s, &lr, 6))

	lr = 1
	s, err = WarmupCosineLR(&lr, 2, 6, 0)
	require.NoError(t, err)
	check("warmup-cosine", []float64{1. / 3, 2. / 3, 1, 0.8535534, 0.5, 0.1464466, 0}, lrs(s, &lr, 7))

	lr = 0
	s, err = OneCycleLR(&lr, 1, 10, 0.3, 25, 1e4)
	require.NoError(t, err)
	got := lrs(s, &lr, 10)
	check("one-cycle", []float64{0.04, 0.52, 1}, got[:3])
	assert.InDelta(t, 4e-6, got[9], 1e-9)
	assert.Greater(t, got[5], got[6], "annealing down after the peak")
	_, err = StepLR(&lr, 0, 0.5)
	assert.Error(t, err)
}

func TestAdamStateDictResumesTraining(t *testing.T) {
	e := newEngine(t)
	opts := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	target := host(t, []int{3}, f32s(tgt)...)

	w := host(t, []int{3}, f32s(w0)...)
	a, err := NewAdam(e, []*Tensor{w}, opts)
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		quadStep(t, e, w, target, a.ZeroGrad, a.Step)
	}
	tensors, nums := a.StateDict()
	require.Contains(t, tensors, "state.1.exp_avg")
	assert.Equal(t, 2.0, nums["step"])
	saved := map[string]*Tensor{}
	for k, v := range tensors {
		h, err := v.ToHost()
		require.NoError(t, err)
		saved[k] = h
	}

	// A fresh optimizer on a copy of the weights, loaded with that state,
	// takes the same third step as the original.
	w2 := host(t, []int{3}, values(t, w)...)
	b, err := NewAdam(e, []*Tensor{w2}, opts)
	require.NoError(t, err)
	require.NoError(t, b.LoadStateDict(saved, nums))
	quadStep(t, e, w, target, a.ZeroGrad, a.Step)
	quadStep(t, e, w2, target, b.ZeroGrad, b.Step)
	assertClose(t, refAdam(w0, tgt, opts, 3), values(t, w2), 1e-5, "resumed")
	assert.Equal(t, values(t, w), values(t, w2))

	assert.ErrorContains(t, b.LoadStateDict(map[string]*Tensor{"state.9.exp_avg": saved["state.1.exp_avg"]}, nil), "unexpected entry")
}

func TestEagerModeComputesEachOpAndAgrees(t *testing.T) {
	run := func(eager bool) ([]float32, Stats) {
		e := newEngine(t)
		e.SetEager(eager)
		x := host(t, []int{2, 3}, 1, -2, 3, 0.5, 2, -1)
		w := host(t, []int{4, 3}, 0.1, 0.2, 0.3, -0.1, 0.5, 0.2, 0.3, -0.3, 0.1, 0.2, 0.2, 0.2)
		require.NoError(t, w.SetRequiresGrad(true))
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			y, err := e.Linear(x, w)
			if err == nil {
				y, err = e.Tanh(y)
			}
			if err == nil {
				loss, err = e.Sum(y)
			}
			return err
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
		return values(t, w.Grad()), e.Stats()
	}
	lazy, ls := run(false)
	eager, es := run(true)
	assert.Equal(t, lazy, eager)
	assert.Equal(t, int64(1), ls.GraphComputes, "lazy: one graph")
	assert.Greater(t, es.GraphComputes, int64(4), "eager: a compute per op")
}

func TestAnErrorMidStepLeavesTrainingIntact(t *testing.T) {
	train := func(faults bool) []float32 {
		e := newEngine(t)
		w := host(t, []int{3}, f32s(w0)...)
		opt, err := NewAdam(e, []*Tensor{w}, AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		require.NoError(t, err)
		target := host(t, []int{3}, f32s(tgt)...)
		for i := 0; i < 4; i++ {
			if faults {
				// A shape error inside the tape, a backward from a non-scalar,
				// an in-place change of a parameter inside the tape: each an
				// error that changes nothing.
				opt.ZeroGrad()
				assert.ErrorContains(t, e.WithGradTape(func() error {
					_, err := e.Add(w, host(t, []int{2}, 1, 2))
					return err
				}), "add: shapes 3 and 2")
				var y *Tensor
				require.NoError(t, e.WithGradTape(func() error {
					var err error
					y, err = e.Mul(w, w)
					if err == nil {
						err = e.Assign(w, y)
					}
					assert.ErrorContains(t, err, "inside with_grad_tape")
					return nil
				}))
				_, err := e.Backward(y)
				assert.ErrorContains(t, err, "one element")
				_, err = e.CrossEntropyLabels(host(t, []int{1, 3}, 1, 2, 3), []int{5})
				assert.ErrorContains(t, err, "out of range")
			}
			quadStep(t, e, w, target, opt.ZeroGrad, opt.Step)
		}
		return values(t, w)
	}
	assert.Equal(t, train(false), train(true))
}

func TestAssignInPlace(t *testing.T) {
	e := newEngine(t)
	h := host(t, []int{2}, 1, 2)
	require.NoError(t, e.Assign(h, host(t, []int{2}, 5, 6)))
	assert.Equal(t, []float32{5, 6}, values(t, h))
	d, err := h.ToDevice(e, 1, 0)
	require.NoError(t, err)
	sum, err := e.Add(d, d)
	require.NoError(t, err)
	require.NoError(t, e.Assign(d, sum))
	assert.Equal(t, []float32{10, 12}, values(t, d))
	assert.ErrorContains(t, e.Assign(d, host(t, []int{3}, 1, 2, 3)), "shape")
	assert.False(t, math.IsNaN(float64(values(t, d)[0])))
}

func TestRealizedValuesAreLeavesAndReadValuesOutliveTheStep(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{3}, 1, 2, 3)
	y, err := e.Exp(x)
	require.NoError(t, err)
	y, err = e.Tanh(y)
	require.NoError(t, err)
	_, err = y.Float32s()
	require.NoError(t, err)
	before := e.Stats()
	z, err := e.AddScalar(y, 1)
	require.NoError(t, err)
	_, err = z.Float32s()
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Stats().NodesComputed-before.NodesComputed, "only the new node runs; y's ancestry does not")

	// A value read in one step can still be read after the next pass reset;
	// one never read is an error that names the pool.
	unread, err := e.AddScalar(y, 2)
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	require.NoError(t, e.WithGradTape(func() error { return nil }))
	assert.Equal(t, values(t, z), []float32{float32(math.Tanh(math.E)) + 1, float32(math.Tanh(math.Exp(2))) + 1, float32(math.Tanh(math.Exp(3))) + 1})
	_, err = unread.Float32s()
	assert.ErrorContains(t, err, "reset of the pass pool")
}

func TestDiamondGradientsAreSummedOnce(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2}, 0.5, -1)
	require.NoError(t, x.SetRequiresGrad(true))
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		y, err := e.Exp(x) // y feeds three uses
		if err != nil {
			return err
		}
		yy, err := e.Mul(y, y)
		if err != nil {
			return err
		}
		loss, err = sumOf(e)(e.Add(yy, y))
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	want := []float64{}
	for _, v := range []float64{0.5, -1} {
		y := math.Exp(v)
		want = append(want, (2*y+1)*y)
	}
	assertClose(t, want, values(t, x.Grad()), 1e-5, "d/dx (e^2x + e^x)")
}

func TestKeptValuesFromOutsideATapeSurviveSteps(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{3}, 1, 2, 3)
	y, err := e.AddScalar(x, 1) // data prepared before the loop
	require.NoError(t, err)
	y.Keep()
	w := host(t, []int{3}, 1, 1, 1)
	require.NoError(t, w.SetRequiresGrad(true))
	for step := 0; step < 3; step++ {
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			loss, err = sumOf(e)(e.Mul(w, y))
			return err
		}))
		v, err := loss.Item()
		require.NoError(t, err)
		assert.Equal(t, float32(9), v, "step %d", step)
	}
	assert.Equal(t, []float32{2, 3, 4}, values(t, y))
}

func TestAnomalyModes(t *testing.T) {
	for _, mode := range []AnomalyMode{AnomalyOff, AnomalyWarn, AnomalyStop} {
		e := newEngine(t)
		var warned []string
		e.SetAnomalyMode(mode, func(s string) { warned = append(warned, s) })
		w := host(t, []int{2}, 4, -1) // sqrt(-1): a NaN gradient
		opt, err := NewSGD(e, []*Tensor{w}, SGDOptions{LR: 0.1})
		require.NoError(t, err)
		require.NoError(t, e.WithGradTape(func() error {
			loss, err := sumOf(e)(e.Sqrt(w))
			if err == nil {
				_, err = e.Backward(loss)
			}
			return err
		}))
		err = opt.Step()
		v := values(t, w)
		switch mode {
		case AnomalyOff:
			require.NoError(t, err)
			assert.True(t, math.IsNaN(float64(v[1])), "unchecked, the NaN reaches the weight")
		case AnomalyWarn:
			require.NoError(t, err)
			assert.Equal(t, []float32{4, -1}, v, "the step was skipped")
			require.Len(t, warned, 1)
			assert.Contains(t, warned[0], "NaN or Inf")
		case AnomalyStop:
			assert.ErrorContains(t, err, "anomaly")
			assert.Equal(t, []float32{4, -1}, v)
		}
	}
	_, err := ParseAnomalyMode("loud")
	assert.Error(t, err)
}

// TestAFailedOptimizerStepChangesNothing: a step refused for want of memory
// (its moments do not fit the budget) leaves weights, state and step count
// as they were; the next step, with room, matches a run that never failed.
func TestAFailedOptimizerStepChangesNothing(t *testing.T) {
	opts := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	// Big enough that the moments need buffers of their own (a small
	// tensor's would fit in the weight's arena and never meet the budget).
	const n = 400_000
	init, goal := make([]float32, n), make([]float32, n)
	for i := range init {
		init[i], goal[i] = float32(w0[i%3]), float32(tgt[i%3])
	}
	train := func(fail bool) []float32 {
		e := newEngine(t)
		w := host(t, []int{n}, append([]float32(nil), init...)...)
		opt, err := NewAdam(e, []*Tensor{w}, opts)
		require.NoError(t, err)
		target := host(t, []int{n}, goal...)
		if fail {
			// Forward and backward run; then the budget is set just above
			// what is held, so the step's moments cannot be allocated.
			opt.ZeroGrad()
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				d, err := e.Sub(w, target)
				if err == nil {
					loss, err = sumOf(e)(e.Mul(d, d))
				}
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			require.NoError(t, e.Realize())
			_, err = e.Residency().SetLimit(e.Residency().Ledger().TotalBufferBytes + 1024)
			require.NoError(t, err)
			assert.ErrorContains(t, opt.Step(), "budget exceeded")
			assert.Equal(t, init, values(t, w), "no update")
			_, err = e.Residency().SetLimit(0)
			require.NoError(t, err)
		}
		for i := 0; i < 3; i++ {
			quadStep(t, e, w, target, opt.ZeroGrad, opt.Step)
		}
		return values(t, w)[:6]
	}
	assert.Equal(t, train(false), train(true))
}
