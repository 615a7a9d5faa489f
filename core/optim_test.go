package core

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quadStep runs one standard step on loss = sum((w - target)^2), whose
// gradient is 2(w - target).
func quadStep(t *testing.T, e *Engine, w, target *Tensor, zero func(), step func() error) {
	t.Helper()
	zero()
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		d, err := e.Sub(w, target)
		if err != nil {
			return err
		}
		sq, err := e.Mul(d, d)
		if err != nil {
			return err
		}
		loss, err = e.Sum(sq)
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	require.NoError(t, step())
	_, err = loss.Item()
	require.NoError(t, err)
}

// refSGD is torch.optim.SGD's update rule, in float64, written from its
// documentation.
func refSGD(w, target []float64, o SGDOptions, steps int) []float64 {
	w = append([]float64(nil), w...)
	buf := make([]float64, len(w))
	for s := 0; s < steps; s++ {
		for i := range w {
			g := 2*(w[i]-target[i]) + float64(o.WeightDecay)*w[i]
			if o.Momentum != 0 {
				if s == 0 {
					buf[i] = g
				} else {
					buf[i] = float64(o.Momentum)*buf[i] + (1-float64(o.Dampening))*g
				}
				if o.Nesterov {
					g += float64(o.Momentum) * buf[i]
				} else {
					g = buf[i]
				}
			}
			w[i] -= float64(o.LR) * g
		}
	}
	return w
}

// refAdam is torch.optim.Adam / AdamW's update rule, in float64.
func refAdam(w, target []float64, o AdamOptions, steps int) []float64 {
	w = append([]float64(nil), w...)
	m, v := make([]float64, len(w)), make([]float64, len(w))
	b1, b2, lr, wd := float64(o.Beta1), float64(o.Beta2), float64(o.LR), float64(o.WeightDecay)
	for s := 1; s <= steps; s++ {
		for i := range w {
			g := 2 * (w[i] - target[i])
			if o.Decoupled {
				w[i] *= 1 - lr*wd
			} else {
				g += wd * w[i]
			}
			m[i] = b1*m[i] + (1-b1)*g
			v[i] = b2*v[i] + (1-b2)*g*g
			mh, vh := m[i]/(1-math.Pow(b1, float64(s))), v[i]/(1-math.Pow(b2, float64(s)))
			w[i] -= lr * mh / (math.Sqrt(vh) + float64(o.Eps))
		}
	}
	return w
}

var w0, tgt = []float64{1, -2, 0.5}, []float64{0.25, 0.5, -1}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func TestSGDMatchesHandComputedSteps(t *testing.T) {
	// Worked by hand: w = (1, -2), target 0, lr 0.1, momentum 0.9:
	// buf (2,-4) -> w (0.8,-1.6); buf (3.4,-6.8) -> w (0.46,-0.92);
	// buf (3.98,-7.96) -> w (0.062,-0.124).
	e := newEngine(t)
	w := host(t, []int{2}, 1, -2)
	opt, err := NewSGD(e, []*Tensor{w}, SGDOptions{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)
	zero := host(t, []int{2}, 0, 0)
	for i := 0; i < 3; i++ {
		quadStep(t, e, w, zero, opt.ZeroGrad, opt.Step)
	}
	assertClose(t, []float64{0.062, -0.124}, values(t, w), 1e-5, "w")
	assert.Equal(t, "persistent", w.Scope(), "the optimizer keeps its weights resident")
}

// TestAFrozenParameterStaysFrozen: a tensor frozen with requires_grad off
// and handed to an optimizer gets no gradient and is not stepped, as in
// PyTorch, in the constructor's list or in a group added later; a plain
// tensor given to one becomes a parameter.
func TestAFrozenParameterStaysFrozen(t *testing.T) {
	for _, added := range []bool{false, true} {
		e := newEngine(t)
		w, frozen, plain := host(t, []int{2}, 1, -2), host(t, []int{2}, 3, 4), host(t, []int{2}, 5, 6)
		require.NoError(t, frozen.SetRequiresGrad(false))
		params := []*Tensor{w, frozen, plain}
		opt, err := NewSGD(e, params[:1], SGDOptions{LR: 0.1})
		require.NoError(t, err)
		if added {
			require.NoError(t, opt.AddGroup(SGDGroup{Params: params[1:], Opts: SGDOptions{LR: 0.1}}))
		} else {
			opt, err = NewSGD(e, params, SGDOptions{LR: 0.1})
			require.NoError(t, err)
		}
		assert.False(t, frozen.RequiresGrad(), "added %v", added)
		assert.True(t, plain.RequiresGrad(), "added %v", added)
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			loss, err = e.Add(squares(t, e, frozen), squares(t, e, plain))
			return err
		}))
		_, err = e.Backward(loss)
		require.NoError(t, err)
		require.NoError(t, opt.Step())
		assert.Nil(t, frozen.Grad())
		assert.Equal(t, []float32{3, 4}, values(t, frozen), "added %v: not stepped", added)
		assertClose(t, []float64{4, 4.8}, values(t, plain), 1e-6, fmt.Sprintf("added %v: w - 0.1·2w", added))
	}
}

func TestSGDVariantsMatchReference(t *testing.T) {
	for name, o := range map[string]SGDOptions{
		"plain":        {LR: 0.1},
		"momentum":     {LR: 0.05, Momentum: 0.9, Dampening: 0.1},
		"nesterov":     {LR: 0.05, Momentum: 0.8, Nesterov: true},
		"weight decay": {LR: 0.1, Momentum: 0.5, WeightDecay: 0.2},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t)
			w := host(t, []int{3}, f32s(w0)...)
			opt, err := NewSGD(e, []*Tensor{w}, o)
			require.NoError(t, err)
			target := host(t, []int{3}, f32s(tgt)...)
			for i := 0; i < 3; i++ {
				quadStep(t, e, w, target, opt.ZeroGrad, opt.Step)
			}
			assertClose(t, refSGD(w0, tgt, o, 3), values(t, w), 1e-5, name)
		})
	}
}

func TestAdamAndAdamWMatchReference(t *testing.T) {
	for name, o := range map[string]AdamOptions{
		"adam":    {LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		"adam l2": {LR: 0.05, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
		"adamw":   {LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Decoupled: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t)
			w := host(t, []int{3}, f32s(w0)...)
			opt, err := NewAdam(e, []*Tensor{w}, o)
			require.NoError(t, err)
			target := host(t, []int{3}, f32s(tgt)...)
			for i := 0; i < 3; i++ {
				quadStep(t, e, w, target, opt.ZeroGrad, opt.Step)
			}
			assertClose(t, refAdam(w0, tgt, o, 3), values(t, w), 1e-5, name)
		})
	}
}

// In eager mode a step runs when it is made: work dropped afterwards (a
// compute refused by the budget, then a pass reset) is not charged to it,
// and Adam's bias correction goes on from the steps that ran.
func TestEagerStepsCountOnceTheyRan(t *testing.T) {
	e := newEngine(t)
	e.SetEager(true)
	o := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	w := host(t, []int{3}, f32s(w0)...)
	a, err := NewAdam(e, []*Tensor{w}, o)
	require.NoError(t, err)
	target := host(t, []int{3}, f32s(tgt)...)
	big, err := host(t, []int{1 << 20}, make([]float32, 1<<20)...).ToDevice(e, residency.Persistent, ggmlcgo.F32)
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		quadStep(t, e, w, target, a.ZeroGrad, a.Step)
	}
	_, err = e.Residency().SetLimit(e.Residency().Ledger().TotalBufferBytes + 64)
	require.NoError(t, err)
	_, err = e.Scale(big, 2) // its memory is refused, the work left pending
	require.Error(t, err)
	require.Error(t, e.WithGradTape(func() error { return nil })) // the pending work is dropped
	_, err = e.Residency().SetLimit(0)
	require.NoError(t, err)
	_, nums, err := a.StateDict()
	require.NoError(t, err)
	assert.Equal(t, 2.0, nums["step"])
	quadStep(t, e, w, target, a.ZeroGrad, a.Step)
	assertClose(t, refAdam(w0, tgt, o, 3), values(t, w), 1e-5, "the third step's bias correction")
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
	tensors, nums, err := a.StateDict()
	require.NoError(t, err)
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

// refAdamState is refAdam keeping the moments: weights, exp_avg and
// exp_avg_sq after steps, in float64.
func refAdamState(w, target []float64, o AdamOptions, steps int) (wOut, m, v []float64) {
	w = append([]float64(nil), w...)
	m, v = make([]float64, len(w)), make([]float64, len(w))
	b1, b2, lr := float64(o.Beta1), float64(o.Beta2), float64(o.LR)
	for s := 1; s <= steps; s++ {
		for i := range w {
			g := 2 * (w[i] - target[i])
			m[i] = b1*m[i] + (1-b1)*g
			v[i] = b2*v[i] + (1-b2)*g*g
			mh, vh := m[i]/(1-math.Pow(b1, float64(s))), v[i]/(1-math.Pow(b2, float64(s)))
			w[i] -= lr * mh / (math.Sqrt(vh) + float64(o.Eps))
		}
	}
	return w, m, v
}

// refMomentum is SGD's momentum buffer after steps (torch's rule).
func refMomentum(w, target []float64, o SGDOptions, steps int) []float64 {
	buf := make([]float64, len(w))
	w = append([]float64(nil), w...)
	for s := 0; s < steps; s++ {
		for i := range w {
			g := 2 * (w[i] - target[i])
			if s == 0 {
				buf[i] = g
			} else {
				buf[i] = float64(o.Momentum)*buf[i] + (1-float64(o.Dampening))*g
			}
			w[i] -= float64(o.LR) * buf[i]
		}
	}
	return buf
}

// queueStep is the standard step without reading anything: forward,
// backward and the optimizer's step stay queued.
func queueStep(t *testing.T, e *Engine, w, target *Tensor, zero func(), step func() error) {
	t.Helper()
	zero()
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
	require.NoError(t, step())
}

// TestStateDictRightAfterStepIsExact: state_dict read right after step()
// (the update still queued) holds that step's moments and count, equal to
// a float64 reference after N steps; and it is a snapshot, which later
// steps do not change.
func TestStateDictRightAfterStepIsExact(t *testing.T) {
	o := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}
	for n := 1; n <= 3; n++ {
		e := newEngine(t)
		w := host(t, []int{3}, f32s(w0)...)
		a, err := NewAdam(e, []*Tensor{w}, o)
		require.NoError(t, err)
		target := host(t, []int{3}, f32s(tgt)...)
		for i := 0; i < n; i++ {
			queueStep(t, e, w, target, a.ZeroGrad, a.Step)
		}
		tensors, nums, err := a.StateDict()
		require.NoError(t, err)
		rw, rm, rv := refAdamState(w0, tgt, o, n)
		assert.Equal(t, float64(n), nums["step"], "step count after %d steps", n)
		assertClose(t, rm, values(t, tensors["state.1.exp_avg"]), 1e-6, "exp_avg")
		assertClose(t, rv, values(t, tensors["state.1.exp_avg_sq"]), 1e-6, "exp_avg_sq")
		assertClose(t, rw, values(t, w), 1e-5, "weights")

		held := values(t, tensors["state.1.exp_avg"])
		queueStep(t, e, w, target, a.ZeroGrad, a.Step)
		require.NoError(t, e.Realize())
		assert.Equal(t, held, values(t, tensors["state.1.exp_avg"]), "a state dict is a snapshot")
	}

	so := SGDOptions{LR: 0.05, Momentum: 0.9, Dampening: 0.3}
	for n := 1; n <= 3; n++ {
		e := newEngine(t)
		w := host(t, []int{3}, f32s(w0)...)
		s, err := NewSGD(e, []*Tensor{w}, so)
		require.NoError(t, err)
		target := host(t, []int{3}, f32s(tgt)...)
		for i := 0; i < n; i++ {
			queueStep(t, e, w, target, s.ZeroGrad, s.Step)
		}
		tensors, _, err := s.StateDict()
		require.NoError(t, err)
		assertClose(t, refMomentum(w0, tgt, so, n), values(t, tensors["state.1.momentum_buffer"]), 1e-5, "momentum buffer")
	}
}

// TestAStepThatNeverRanIsNotCounted: a step whose queued work is dropped
// (DropPending, a cancelled compute) is not counted and its fresh state is
// fresh again: the steps after it match a run in which it never happened.
func TestAStepThatNeverRanIsNotCounted(t *testing.T) {
	ao := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}
	so := SGDOptions{LR: 0.05, Momentum: 0.9, Dampening: 0.5}
	lose := map[string]func(t *testing.T, e *Engine){
		"drop pending": func(t *testing.T, e *Engine) { e.DropPending() },
		"cancelled compute": func(t *testing.T, e *Engine) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			e.SetContext(ctx)
			assert.ErrorIs(t, e.Realize(), context.Canceled)
			e.SetContext(nil)
		},
	}
	for how, drop := range lose {
		for _, lostAt := range []int{0, 2} { // the first step (fresh state) or a later one
			t.Run(fmt.Sprintf("%s at step %d", how, lostAt+1), func(t *testing.T) {
				e := newEngine(t)
				wa := host(t, []int{3}, f32s(w0)...)
				ws := host(t, []int{3}, f32s(w0)...)
				a, err := NewAdam(e, []*Tensor{wa}, ao)
				require.NoError(t, err)
				s, err := NewSGD(e, []*Tensor{ws}, so)
				require.NoError(t, err)
				target := host(t, []int{3}, f32s(tgt)...)
				step := func() { // both steps queued together, nothing read
					a.ZeroGrad()
					s.ZeroGrad()
					var la, ls *Tensor
					require.NoError(t, e.WithGradTape(func() error {
						da, err := e.Sub(wa, target)
						if err == nil {
							la, err = sumOf(e)(e.Mul(da, da))
						}
						if err != nil {
							return err
						}
						ds, err := e.Sub(ws, target)
						if err == nil {
							ls, err = sumOf(e)(e.Mul(ds, ds))
						}
						return err
					}))
					_, err := e.Backward(la)
					require.NoError(t, err)
					_, err = e.Backward(ls)
					require.NoError(t, err)
					require.NoError(t, a.Step())
					require.NoError(t, s.Step())
				}
				for i := 0; i < lostAt; i++ {
					step()
				}
				step()
				drop(t, e)
				_, nums, err := a.StateDict()
				require.NoError(t, err)
				assert.Equal(t, float64(lostAt), nums["step"], "the lost step is not counted")
				assertClose(t, refAdam(w0, tgt, ao, lostAt), values(t, wa), 1e-5, "adam weights untouched")
				for i := lostAt; i < 3; i++ {
					step()
				}
				require.NoError(t, e.Realize())
				_, nums, err = a.StateDict()
				require.NoError(t, err)
				assert.Equal(t, 3.0, nums["step"])
				assertClose(t, refAdam(w0, tgt, ao, 3), values(t, wa), 1e-5, "adam as if the lost step never was")
				assertClose(t, refSGD(w0, tgt, so, 3), values(t, ws), 1e-5, "sgd momentum as if the lost step never was")
			})
		}
	}
}

// TestAStepWithNoGradientIsNotCounted: as torch, a step with nothing to
// update changes no state.
func TestAStepWithNoGradientIsNotCounted(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{3}, f32s(w0)...)
	a, err := NewAdam(e, []*Tensor{w}, AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8})
	require.NoError(t, err)
	require.NoError(t, a.Step())
	_, nums, err := a.StateDict()
	require.NoError(t, err)
	assert.Equal(t, 0.0, nums["step"])
}

// TestOptimizerSettingsMustBeFinite: NaN and ±Inf (and out-of-range
// values) in any optimizer setting are argument errors naming it.
func TestOptimizerSettingsMustBeFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	okSGD := SGDOptions{LR: 0.1, Momentum: 0.9}
	okAdam := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	sgd := func(f func(*SGDOptions)) SGDOptions { o := okSGD; f(&o); return o }
	adam := func(f func(*AdamOptions)) AdamOptions { o := okAdam; f(&o); return o }
	for _, c := range []struct {
		name string
		sgd  *SGDOptions
		adam *AdamOptions
		want string
	}{
		{"sgd lr nan", ptr(sgd(func(o *SGDOptions) { o.LR = nan })), nil, "lr"},
		{"sgd lr inf", ptr(sgd(func(o *SGDOptions) { o.LR = inf })), nil, "lr"},
		{"sgd lr negative", ptr(sgd(func(o *SGDOptions) { o.LR = -1 })), nil, "lr"},
		{"sgd momentum nan", ptr(sgd(func(o *SGDOptions) { o.Momentum = nan })), nil, "momentum"},
		{"sgd momentum inf", ptr(sgd(func(o *SGDOptions) { o.Momentum = inf })), nil, "momentum"},
		{"sgd dampening nan", ptr(sgd(func(o *SGDOptions) { o.Dampening = nan })), nil, "dampening"},
		{"sgd dampening -inf", ptr(sgd(func(o *SGDOptions) { o.Dampening = -inf })), nil, "dampening"},
		{"sgd weight decay nan", ptr(sgd(func(o *SGDOptions) { o.WeightDecay = nan })), nil, "weight_decay"},
		{"sgd weight decay inf", ptr(sgd(func(o *SGDOptions) { o.WeightDecay = inf })), nil, "weight_decay"},
		{"adam lr nan", nil, ptr(adam(func(o *AdamOptions) { o.LR = nan })), "lr"},
		{"adam lr inf", nil, ptr(adam(func(o *AdamOptions) { o.LR = inf })), "lr"},
		{"adam beta1 nan", nil, ptr(adam(func(o *AdamOptions) { o.Beta1 = nan })), "beta 1"},
		{"adam beta2 nan", nil, ptr(adam(func(o *AdamOptions) { o.Beta2 = nan })), "beta 2"},
		{"adam beta2 1", nil, ptr(adam(func(o *AdamOptions) { o.Beta2 = 1 })), "beta 2"},
		{"adam eps nan", nil, ptr(adam(func(o *AdamOptions) { o.Eps = nan })), "eps"},
		{"adam eps inf", nil, ptr(adam(func(o *AdamOptions) { o.Eps = inf })), "eps"},
		{"adamw weight decay nan", nil, ptr(adam(func(o *AdamOptions) { o.WeightDecay, o.Decoupled = nan, true })), "adamw: weight_decay"},
		{"adam weight decay inf", nil, ptr(adam(func(o *AdamOptions) { o.WeightDecay = inf })), "weight_decay"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t)
			w := host(t, []int{3}, f32s(w0)...)
			var err error
			if c.sgd != nil {
				_, err = NewSGD(e, []*Tensor{w}, *c.sgd)
			} else {
				_, err = NewAdam(e, []*Tensor{w}, *c.adam)
			}
			assert.ErrorIs(t, err, ErrArgument)
			assert.ErrorContains(t, err, c.want)
		})
	}

	e := newEngine(t)
	a, err := NewAdam(e, []*Tensor{host(t, []int{3}, f32s(w0)...)}, okAdam)
	require.NoError(t, err)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.5, 1e300} {
		err := a.Rate().SetLR(v)
		assert.ErrorIs(t, err, ErrArgument, "set_lr(%g)", v)
		assert.ErrorContains(t, err, "set_lr")
		assert.ErrorIs(t, a.LoadStateDict(nil, map[string]float64{"lr": v}), ErrArgument, "load lr %g", v)
		assert.ErrorIs(t, a.LoadStateDict(nil, map[string]float64{"initial_lr": v}), ErrArgument, "load initial_lr %g", v)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), -1, 1.5} {
		assert.ErrorIs(t, a.LoadStateDict(nil, map[string]float64{"step": v}), ErrArgument, "load step %g", v)
	}
	assert.Equal(t, float64(float32(0.1)), a.Rate().LR(), "refused settings changed nothing")
}

func ptr[T any](v T) *T { return &v }

// TestAdamWKernelIsGGMLs: gglua's CPU AdamW kernel (adamw.c) and ggml's
// opt_step_adamw, which devices run, give the same weights and moments
// (within a rounding: either may fuse a multiply-add), over sizes that
// leave vector tails and split across threads, with and without weight
// decay; and the optimizer references pass with ggml's.
func TestAdamWKernelIsGGMLs(t *testing.T) {
	run := func(ggml bool, o AdamOptions) ([]float32, []float32) {
		forceGGMLAdamW = ggml
		defer func() { forceGGMLAdamW = false }()
		e, w := cubeWeight(t, 7)
		opt, err := NewAdam(e, []*Tensor{w}, o)
		require.NoError(t, err)
		cubeSteps(t, e, w, opt, func(int) {})
		return values(t, w), values(t, opt.state[w][1])
	}
	for name, o := range map[string]AdamOptions{
		"adam":  {LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		"adamw": {LR: 0.02, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1, Decoupled: true},
	} {
		wk, vk := run(false, o)
		wg, vg := run(true, o)
		assert.InDeltaSlice(t, wg, wk, 1e-5, name+": weights")
		assert.InEpsilonSlice(t, vg, vk, 1e-5, name+": second moments")
	}
	runForced(t, &forceGGMLAdamW, TestAdamAndAdamWMatchReference, TestAdamStateDictResumesTraining)
}

// cubeWeight is an engine of two threads and a persistent 37x29 weight
// (a size that leaves vector tails) of normal values from seed.
func cubeWeight(t *testing.T, seed int64) (*Engine, *Tensor) {
	e, err := NewEngine(EngineOptions{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	rng := rand.New(rand.NewSource(seed))
	v := make([]float32, 37*29)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	w := host(t, []int{37, 29}, v...)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, w.MoveToDeviceAs(e, residency.Persistent, ggmlcgo.F32))
	return e, w
}

// cubeSteps runs four steps of opt on the loss sum(w³), before(step) just
// before each step.
func cubeSteps(t *testing.T, e *Engine, w *Tensor, opt interface {
	ZeroGrad()
	Step() error
}, before func(step int)) {
	for step := 0; step < 4; step++ {
		opt.ZeroGrad()
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			sq, err := e.Mul(w, w)
			if err == nil {
				sq, err = e.Mul(sq, w)
			}
			if err == nil {
				loss, err = e.Sum(sq)
			}
			return err
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
		before(step)
		require.NoError(t, opt.Step())
	}
}
