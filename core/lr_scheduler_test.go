package core

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rateOf is a Rate holding lr exactly (float64), as an optimizer made from
// Lua holds it.
func rateOf(t *testing.T, lr float64) *Rate {
	f := float32(lr)
	r := NewRate(&f)
	require.NoError(t, r.SetLR(lr))
	return r
}

// torchSchedulers are the cases of testdata/lr_schedulers.json, written by
// scripts/reference/lr_schedulers.py from PyTorch 1.13.
type torchSchedulers struct {
	Cases []struct {
		Name  string
		Kind  string
		LR    float64
		Opts  map[string]float64
		LRs   []float64
		Error *struct {
			Call    int
			Message string
		}
		Texts      map[string]string // plateau's modes
		Metrics    []string          // plateau's, one a step ("nan" among them)
		Milestones []int             // sequential's
		Subs       []struct {
			Kind string
			Opts map[string]float64
		}
	}
}

// lam is the reference script's LambdaLR factor.
func lam(o map[string]float64) func(epoch, group int) (float64, error) {
	return func(e, _ int) (float64, error) {
		return math.Pow(o["a"], float64(e))*math.Min(1, float64(e+1)/o["warm"]) + o["b"]*float64(e), nil
	}
}

func makeScheduler(r *Rate, kind string, o map[string]float64) (*Scheduler, error) {
	switch kind {
	case "step":
		return StepLR(r, int(o["step_size"]), o["gamma"])
	case "cosine":
		return CosineLR(r, int(o["t_max"]), o["eta_min"])
	case "one_cycle":
		return OneCycleLR(r, o["max_lr"], int(o["total"]), o["pct_start"], o["div_factor"], o["final_div_factor"])
	case "warmup_cosine":
		return WarmupCosineLR(r, int(o["warmup"]), int(o["total"]), o["eta_min"])
	case "exponential":
		return ExponentialLR(r, o["gamma"])
	case "cosine_restarts":
		return CosineRestartsLR(r, int(o["t_0"]), int(o["t_mult"]), o["eta_min"])
	case "linear":
		return LinearLR(r, o["start_factor"], o["end_factor"], int(o["total_iters"]))
	case "multi_step":
		var ms []int
		for i := 1; o[fmt.Sprintf("milestone.%d", i)] > 0; i++ {
			ms = append(ms, int(o[fmt.Sprintf("milestone.%d", i)]))
		}
		return MultiStepLR(r, ms, o["gamma"])
	case "lambda":
		return LambdaLR(r, lam(o))
	}
	panic(kind)
}

// TestSchedulersMatchTorch: the rates torch 1.13 produces when step() is
// called repeatedly (cosine past t_max rising again, one_cycle refusing to
// step past total with torch's message), in float64.
func TestSchedulersMatchTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/lr_schedulers.json")
	require.NoError(t, err)
	var ref torchSchedulers
	require.NoError(t, json.Unmarshal(raw, &ref))
	require.NotEmpty(t, ref.Cases)
	for _, c := range ref.Cases {
		t.Run(c.Name, func(t *testing.T) {
			r := rateOf(t, c.LR)
			var s LRScheduler
			var step func(i int) error
			switch c.Kind {
			case "plateau":
				o := PlateauOptions{Mode: c.Texts["mode"], ThresholdMode: c.Texts["threshold_mode"], Factor: c.Opts["factor"],
					Threshold: c.Opts["threshold"], Patience: int(c.Opts["patience"]), Cooldown: int(c.Opts["cooldown"]),
					MinLRs: []float64{c.Opts["min_lr"]}, Eps: c.Opts["eps"]}
				p, err := ReduceLROnPlateau(r, o)
				require.NoError(t, err)
				s, step = p, func(i int) error {
					m, err := strconv.ParseFloat(c.Metrics[i-1], 64)
					require.NoError(t, err)
					return p.Step(m)
				}
			case "sequential":
				var subs []*Scheduler
				for _, sub := range c.Subs {
					one, err := makeScheduler(r, sub.Kind, sub.Opts)
					require.NoError(t, err)
					subs = append(subs, one)
				}
				q, err := SequentialLR(r, subs, c.Milestones)
				require.NoError(t, err)
				s, step = q, func(int) error { return q.Step() }
			default:
				one, err := makeScheduler(r, c.Kind, c.Opts)
				require.NoError(t, err)
				s, step = one, func(int) error { return one.Step() }
			}
			for i, want := range c.LRs {
				if i > 0 {
					require.NoError(t, step(i), "step %d", i)
				}
				assert.InDelta(t, want, r.LR(), 1e-13*math.Max(1, math.Abs(want)), "rate after %d steps", i)
				assert.Equal(t, float32(r.LR()), *r.lr, "the kernels' float32")
			}
			if c.Error != nil {
				require.Equal(t, len(c.LRs), c.Error.Call, "torch refused the call after the last rate")
				before := r.LR()
				err := step(len(c.LRs))
				assert.ErrorIs(t, err, ErrArgument)
				assert.ErrorContains(t, err, c.Error.Message)
				assert.Equal(t, before, r.LR(), "a refused step changes nothing")
				assert.Equal(t, len(c.LRs)-1, s.LastEpoch())
			}
		})
	}
}

func TestWarmupCosine(t *testing.T) {
	// Worked by hand: base 1, warmup 2 (1/3, 2/3), then cos from 1 to 0 over
	// 4 steps: (1 + cos(k·π/4))/2, and 0 from then on.
	r := rateOf(t, 1)
	s, err := WarmupCosineLR(r, 2, 6, 0)
	require.NoError(t, err)
	want := []float64{1. / 3, 2. / 3, 1, 0.8535533905932737, 0.5, 0.14644660940672627, 0, 0, 0}
	for i, w := range want {
		if i > 0 {
			require.NoError(t, s.Step())
		}
		assert.InDelta(t, w, r.LR(), 1e-15, "step %d", i)
	}
}

// TestSchedulerResumes: an optimizer's state dict keeps initial_lr, so a
// scheduler made after load_state_dict has the original base; with the
// scheduler's own state loaded too, the rates carry on exactly as if
// training had never stopped.
func TestSchedulerResumes(t *testing.T) {
	for _, kind := range []string{"step", "cosine", "one_cycle", "warmup_cosine", "exponential", "linear", "multi_step", "cosine_restarts", "lambda"} {
		t.Run(kind, func(t *testing.T) {
			opts := map[string]float64{"step_size": 3, "gamma": 0.5, "t_max": 5, "eta_min": 0.01, "max_lr": 0.5, "total": 12,
				"pct_start": 0.3, "div_factor": 25, "final_div_factor": 1e4, "warmup": 2, "start_factor": 0.25, "end_factor": 1,
				"total_iters": 8, "milestone.1": 3, "milestone.2": 6, "t_0": 2, "t_mult": 2, "a": 0.9, "warm": 3, "b": 0.01}
			if kind == "warmup_cosine" {
				opts["total"] = 10
			}
			e := newEngine(t)
			newOpt := func() *SGD {
				o, err := NewSGD(e, []*Tensor{host(t, []int{2}, 1, 2)}, SGDOptions{LR: 0.1, Momentum: 0.9})
				require.NoError(t, err)
				require.NoError(t, o.Rate().SetLR(0.1))
				return o
			}
			// Uninterrupted: 11 steps.
			opt := newOpt()
			s, err := makeScheduler(opt.Rate(), kind, opts)
			require.NoError(t, err)
			var want []float64
			for i := 0; i < 11; i++ {
				require.NoError(t, s.Step())
				want = append(want, opt.Rate().LR())
			}

			// Stopped after 4 steps, resumed in a fresh optimizer.
			opt = newOpt()
			s, err = makeScheduler(opt.Rate(), kind, opts)
			require.NoError(t, err)
			for i := 0; i < 4; i++ {
				require.NoError(t, s.Step())
			}
			tensors, nums, err := opt.StateDict()
			require.NoError(t, err)
			initial, ok := opt.Rate().InitialLR()
			require.True(t, ok)
			assert.Equal(t, initial, nums["initial_lr"])
			st := s.StateDict()
			assert.Equal(t, kind, st.Kind)
			assert.Equal(t, 4.0, st.Nums["last_epoch"])

			opt2 := newOpt()
			require.NoError(t, opt2.LoadStateDict(tensors, nums))
			s2, err := makeScheduler(opt2.Rate(), kind, opts)
			require.NoError(t, err)
			assert.Equal(t, initial, s2.BaseLR(), "the base is initial_lr, not the loaded rate")
			require.NoError(t, s2.LoadStateDict(st))
			got := want[:4:4]
			for i := 4; i < 11; i++ {
				require.NoError(t, s2.Step())
				got = append(got, opt2.Rate().LR())
			}
			assert.Equal(t, want, got, "resumed rates")
		})
	}
}

func TestSchedulerStateMustMatch(t *testing.T) {
	r := rateOf(t, 0.1)
	s, err := CosineLR(r, 10, 0)
	require.NoError(t, err)
	for _, c := range []struct {
		kind string
		nums map[string]float64
		want string
	}{
		{"step", map[string]float64{"last_epoch": 1, "base_lr": 0.1, "last_lr": 0.1, "step_size": 2, "gamma": 0.1}, `"step" scheduler`},
		{"cosine", map[string]float64{"last_epoch": 1, "base_lr": 0.1, "last_lr": 0.1, "t_max": 20, "eta_min": 0}, "t_max = 20"},
		{"cosine", map[string]float64{"last_epoch": 1.5, "base_lr": 0.1, "last_lr": 0.1, "t_max": 10, "eta_min": 0}, "last_epoch"},
		{"cosine", map[string]float64{"last_epoch": 1, "base_lr": math.NaN(), "last_lr": 0.1, "t_max": 10, "eta_min": 0}, "base_lr"},
		{"cosine", map[string]float64{"last_epoch": 1, "base_lr": 0.1, "last_lr": 0.1, "t_max": 10, "eta_min": 0, "x": 1}, `unexpected entry "x"`},
	} {
		err := s.LoadStateDict(SchedulerState{Kind: c.kind, Nums: c.nums})
		assert.ErrorIs(t, err, ErrArgument)
		assert.ErrorContains(t, err, c.want)
	}
	assert.Equal(t, 0, s.LastEpoch(), "refused loads changed nothing")
}

// TestSchedulerSettingsMustBeFinite: NaN, ±Inf and out-of-range settings
// are argument errors, and a refused scheduler leaves the rate alone.
func TestSchedulerSettingsMustBeFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		kind string
		opts map[string]float64
		want string
	}{
		{"step", map[string]float64{"step_size": 2, "gamma": nan}, "gamma"},
		{"step", map[string]float64{"step_size": 2, "gamma": inf}, "gamma"},
		{"step", map[string]float64{"step_size": 0, "gamma": 0.5}, "step_size"},
		{"cosine", map[string]float64{"t_max": 10, "eta_min": nan}, "eta_min"},
		{"cosine", map[string]float64{"t_max": 10, "eta_min": inf}, "eta_min"},
		{"cosine", map[string]float64{"t_max": 10, "eta_min": -1}, "eta_min"},
		{"cosine", map[string]float64{"t_max": 0}, "t_max"},
		{"warmup_cosine", map[string]float64{"warmup": 2, "total": 10, "eta_min": nan}, "eta_min"},
		{"one_cycle", map[string]float64{"max_lr": nan, "total": 10, "pct_start": 0.3, "div_factor": 25, "final_div_factor": 1e4}, "max_lr"},
		{"one_cycle", map[string]float64{"max_lr": inf, "total": 10, "pct_start": 0.3, "div_factor": 25, "final_div_factor": 1e4}, "max_lr"},
		{"one_cycle", map[string]float64{"max_lr": 1, "total": 10, "pct_start": nan, "div_factor": 25, "final_div_factor": 1e4}, "pct_start"},
		{"one_cycle", map[string]float64{"max_lr": 1, "total": 10, "pct_start": 0.3, "div_factor": inf, "final_div_factor": 1e4}, "div_factor"},
		{"one_cycle", map[string]float64{"max_lr": 1, "total": 10, "pct_start": 0.3, "div_factor": 25, "final_div_factor": nan}, "final_div_factor"},
		{"one_cycle", map[string]float64{"max_lr": 1, "total": 10, "pct_start": 0.1, "div_factor": 25, "final_div_factor": 1e4}, "step 0"},
		{"one_cycle", map[string]float64{"max_lr": 1e300, "total": 10, "pct_start": 0.3, "div_factor": 1, "final_div_factor": 1e4}, "initial_lr"},
	} {
		r := rateOf(t, 0.1)
		_, err := makeScheduler(r, c.kind, c.opts)
		assert.ErrorIs(t, err, ErrArgument, "%s %v", c.kind, c.opts)
		assert.ErrorContains(t, err, c.want, "%s %v", c.kind, c.opts)
		assert.Equal(t, 0.1, r.LR(), "%s: a refused scheduler leaves the rate", c.kind)
		_, has := r.InitialLR()
		assert.False(t, has, "%s: and initial_lr", c.kind)
	}
}

// TestPlateauAndSequentialResume: stopped after 5 steps and loaded into
// fresh schedulers, ReduceLROnPlateau (best, bad steps and cooldown) and
// SequentialLR (its schedulers' states, past a milestone) carry on as if
// never stopped.
func TestPlateauAndSequentialResume(t *testing.T) {
	metrics := []float64{5, 4, 4, 4, 4, 3.9, 4, 4, 4, 4, 4, 2}
	plateau := func(r *Rate) (LRScheduler, func(int) error) {
		o := DefaultPlateau
		o.Patience, o.Cooldown, o.Factor = 1, 1, 0.5
		p, err := ReduceLROnPlateau(r, o)
		require.NoError(t, err)
		return p, func(i int) error { return p.Step(metrics[i]) }
	}
	sequential := func(r *Rate) (LRScheduler, func(int) error) {
		a, err := LinearLR(r, 0.25, 1, 3)
		require.NoError(t, err)
		b, err := CosineLR(r, 3, 0.01)
		require.NoError(t, err)
		c, err := ExponentialLR(r, 0.5)
		require.NoError(t, err)
		q, err := SequentialLR(r, []*Scheduler{a, b, c}, []int{3, 6})
		require.NoError(t, err)
		return q, func(int) error { return q.Step() }
	}
	for name, build := range map[string]func(*Rate) (LRScheduler, func(int) error){"plateau": plateau, "sequential": sequential} {
		t.Run(name, func(t *testing.T) {
			r := rateOf(t, 0.1)
			_, step := build(r)
			var want []float64
			for i := range metrics {
				require.NoError(t, step(i))
				want = append(want, r.LR())
			}
			assert.Less(t, want[len(want)-1], want[0], "the schedule moved the rate")

			r = rateOf(t, 0.1)
			s, step := build(r)
			for i := 0; i < 5; i++ {
				require.NoError(t, step(i))
			}
			st := s.StateDict()
			initial, _ := r.InitialLR()
			r2 := rateOf(t, 0.1)
			if initial > 0 {
				require.NoError(t, r2.SetInitialLR(initial))
			}
			s2, step2 := build(r2)
			require.NoError(t, s2.LoadStateDict(st))
			assert.Equal(t, st, s2.StateDict())
			got := want[:5:5]
			for i := 5; i < len(metrics); i++ {
				require.NoError(t, step2(i))
				got = append(got, r2.LR())
			}
			assert.Equal(t, want, got)
		})
	}
}

// TestPlateauAndSequentialRefusals: torch's ValueErrors, and states that do
// not fit, refused with the rate left alone.
func TestPlateauAndSequentialRefusals(t *testing.T) {
	r := rateOf(t, 0.1)
	for _, c := range []struct {
		edit func(*PlateauOptions)
		want string
	}{
		{func(o *PlateauOptions) { o.Factor = 1 }, "factor"},
		{func(o *PlateauOptions) { o.Mode = "mid" }, "mode"},
		{func(o *PlateauOptions) { o.ThresholdMode = "pct" }, "threshold_mode"},
		{func(o *PlateauOptions) { o.Patience = -1 }, "patience"},
		{func(o *PlateauOptions) { o.MinLRs = []float64{0, 0} }, "expected 1 min_lrs"},
		{func(o *PlateauOptions) { o.MinLRs = []float64{math.NaN()} }, "min_lr"},
		{func(o *PlateauOptions) { o.Threshold = math.Inf(1) }, "threshold"},
	} {
		o := DefaultPlateau
		c.edit(&o)
		_, err := ReduceLROnPlateau(r, o)
		assert.ErrorIs(t, err, ErrArgument)
		assert.ErrorContains(t, err, c.want)
	}
	p, err := ReduceLROnPlateau(r, DefaultPlateau)
	require.NoError(t, err)
	st := p.StateDict()
	st.Texts["mode"] = "max"
	assert.ErrorContains(t, p.LoadStateDict(st), "mode")
	st = p.StateDict()
	st.Nums["num_bad_epochs"] = -1
	assert.ErrorContains(t, p.LoadStateDict(st), "num_bad_epochs")

	a, err := StepLR(r, 2, 0.5)
	require.NoError(t, err)
	b, err := ExponentialLR(r, 0.9)
	require.NoError(t, err)
	other, err := ExponentialLR(rateOf(t, 0.1), 0.9)
	require.NoError(t, err)
	for _, c := range []struct {
		subs       []*Scheduler
		milestones []int
		want       string
	}{
		{nil, nil, "at least one"},
		{[]*Scheduler{a, b}, nil, "one milestone fewer"},
		{[]*Scheduler{a, b}, []int{0}, "increasing"},
		{[]*Scheduler{a, b, b}, []int{3, 3}, "increasing"},
		{[]*Scheduler{a, other}, []int{3}, "another optimizer"},
	} {
		_, err := SequentialLR(r, c.subs, c.milestones)
		assert.ErrorIs(t, err, ErrArgument)
		assert.ErrorContains(t, err, c.want)
	}
	q, err := SequentialLR(r, []*Scheduler{a, b}, []int{2})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, q.Step())
	}
	before, lr := q.StateDict(), r.LR()
	bad := q.StateDict()
	bad.Subs[0].Nums["last_epoch"] = 7
	bad.Subs[1].Nums["gamma"] = 0.5
	assert.ErrorContains(t, q.LoadStateDict(bad), "scheduler 2 of the sequence")
	assert.Equal(t, before, q.StateDict(), "a refused load changes no scheduler")
	assert.Equal(t, lr, r.LR())
}
