package core

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Parameter groups against PyTorch, and what checks them.

// torchGroups are the runs of testdata/torch_optim_groups.json, written by
// scripts/reference/optim_groups.py from PyTorch 1.13: an optimizer of two
// parameter groups (w [3, 2] and b [2]) with a scheduler, on
// sum((x @ w + b - 1)^2).
type torchGroups struct {
	Cases []torchGroupCase
}

type torchGroupCase struct {
	Name      string
	Kind      string
	Defaults  map[string]any
	Groups    []map[string]any
	Scheduler map[string]any
	SetLR     *struct {
		After, Group int
		LR           float64
	} `json:"set_lr"`
	W, B, X struct {
		Shape  []int
		Values []float64
	}
	Steps []struct {
		W, B  []float64
		LRs   []float64
		State map[string][]float64
	}
	ParamGroups []map[string]any `json:"param_groups"`
}

func loadTorchGroups(t *testing.T) []torchGroupCase {
	raw, err := os.ReadFile("testdata/torch_optim_groups.json")
	require.NoError(t, err)
	var ref torchGroups
	require.NoError(t, json.Unmarshal(raw, &ref))
	require.NotEmpty(t, ref.Cases)
	return ref.Cases
}

// groupSetting is key's value in the group, else in the defaults, else def, as
// torch merges a group's options over the defaults.
func groupSetting(group, defaults map[string]any, key string, def any) any {
	if v, ok := group[key]; ok {
		return v
	}
	if v, ok := defaults[key]; ok {
		return v
	}
	return def
}

func optNum(v any) float32 { return float32(v.(float64)) }

// groupsRun is one optimizer of a torchGroupCase with its scheduler.
type groupsRun struct {
	e       *Engine
	w, b, x *Tensor
	opt     interface {
		ZeroGrad()
		Step() error
		Rates() []*Rate
		State() (OptimizerState, error)
		LoadState(OptimizerState) error
	}
	sched *Scheduler
}

// newGroupsRun makes the case's optimizer on fresh copies of w and b (or
// on w and b, given); plain makes every group of the default settings
// (torch's own defaults), as a fresh optimizer about to load a state.
// straightRun is a run of case c through all its steps, each checked.
func straightRun(t *testing.T, c torchGroupCase) *groupsRun {
	r := newGroupsRun(t, newEngine(t), c, f32s(c.W.Values), f32s(c.B.Values), false)
	for i := 1; i <= len(c.Steps); i++ {
		r.step(t, c, i)
		r.check(t, c, i)
	}
	return r
}

// resumedRun is a run of case c stopped after stop steps: a fresh run of
// the default settings (plain), at the weights reached, loaded with the
// optimizer's and the scheduler's state.
func resumedRun(t *testing.T, c torchGroupCase, stop int) *groupsRun {
	e := newEngine(t)
	r := newGroupsRun(t, e, c, f32s(c.W.Values), f32s(c.B.Values), false)
	for i := 1; i <= stop; i++ {
		r.step(t, c, i)
	}
	st, err := r.opt.State()
	require.NoError(t, err)
	sst := r.sched.StateDict()
	r2 := newGroupsRun(t, e, c, values(t, r.w), values(t, r.b), true)
	require.NoError(t, r2.opt.LoadState(st))
	require.NoError(t, r2.sched.LoadStateDict(sst))
	return r2
}

func newGroupsRun(t *testing.T, e *Engine, c torchGroupCase, w, b []float32, plain bool) *groupsRun {
	r := &groupsRun{e: e, w: host(t, c.W.Shape, w...), b: host(t, c.B.Shape, b...), x: host(t, c.X.Shape, f32s(c.X.Values)...)}
	groups, defaults := c.Groups, c.Defaults
	if plain {
		groups, defaults = []map[string]any{{}, {}}, map[string]any{"lr": 0.5}
	}
	params := [][]*Tensor{{r.w}, {r.b}}
	var lrs []float64
	switch c.Kind {
	case "sgd":
		var gs []SGDGroup
		for g, gr := range groups {
			lr := groupSetting(gr, defaults, "lr", nil).(float64)
			lrs = append(lrs, lr)
			gs = append(gs, SGDGroup{Params: params[g], Opts: SGDOptions{LR: float32(lr),
				Momentum: optNum(groupSetting(gr, defaults, "momentum", 0.0)), Dampening: optNum(groupSetting(gr, defaults, "dampening", 0.0)),
				WeightDecay: optNum(groupSetting(gr, defaults, "weight_decay", 0.0)), Nesterov: groupSetting(gr, defaults, "nesterov", false).(bool)}})
		}
		opt, err := NewSGDGroups(e, gs)
		require.NoError(t, err)
		r.opt = opt
	case "adam", "adamw":
		var gs []AdamGroup
		wd := 0.0
		if c.Kind == "adamw" {
			wd = 0.01
		}
		for g, gr := range groups {
			lr := groupSetting(gr, defaults, "lr", nil).(float64)
			lrs = append(lrs, lr)
			betas := groupSetting(gr, defaults, "betas", []any{0.9, 0.999}).([]any)
			gs = append(gs, AdamGroup{Params: params[g], Opts: AdamOptions{LR: float32(lr), Beta1: optNum(betas[0]), Beta2: optNum(betas[1]),
				Eps: optNum(groupSetting(gr, defaults, "eps", 1e-8)), WeightDecay: optNum(groupSetting(gr, defaults, "weight_decay", wd))}})
		}
		opt, err := NewAdamGroups(e, gs, c.Kind == "adamw")
		require.NoError(t, err)
		r.opt = opt
	default:
		r.opt, lrs = newRuleRun(t, e, c.Kind, groups, defaults, params)
	}
	for g, lr := range lrs {
		require.NoError(t, r.opt.Rates()[g].SetLR(lr)) // in float64, as luabind sets it
	}
	var err error
	switch s := c.Scheduler; s["kind"] {
	case "step":
		r.sched, err = StepLR(r.opt, int(s["step_size"].(float64)), s["gamma"].(float64))
	case "cosine":
		r.sched, err = CosineLR(r.opt, int(s["t_max"].(float64)), s["eta_min"].(float64))
	default:
		t.Fatalf("scheduler %v", s)
	}
	require.NoError(t, err)
	return r
}

// step is torch's loop body: zero_grad, the loss, backward, step, then the
// scheduler's step (and the case's rate set by hand after step i).
func (r *groupsRun) step(t *testing.T, c torchGroupCase, i int) {
	t.Helper()
	e := r.e
	r.opt.ZeroGrad()
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		y, err := e.Matmul(r.x, r.w)
		if err == nil {
			y, err = e.Add(y, r.b)
		}
		if err == nil {
			y, err = e.AddScalar(y, -1)
		}
		if err == nil {
			loss, err = sumOf(e)(e.Mul(y, y))
		}
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	require.NoError(t, r.opt.Step())
	require.NoError(t, r.sched.Step())
	if c.SetLR != nil && c.SetLR.After == i {
		require.NoError(t, r.opt.Rates()[c.SetLR.Group-1].SetLR(c.SetLR.LR))
	}
}

// check compares weights, every group's rate and the optimizer's state
// after step i with torch's.
func (r *groupsRun) check(t *testing.T, c torchGroupCase, i int) {
	t.Helper()
	want := c.Steps[i-1]
	assertClose(t, want.W, values(t, r.w), 2e-5, fmt.Sprintf("w after step %d", i))
	assertClose(t, want.B, values(t, r.b), 2e-5, fmt.Sprintf("b after step %d", i))
	for g, rate := range r.opt.Rates() {
		assert.InDelta(t, want.LRs[g], rate.LR(), 1e-15, "group %d lr after step %d", g+1, i)
	}
	st, err := r.opt.State()
	require.NoError(t, err)
	require.Len(t, st.Tensors, len(want.State), "state after step %d", i)
	for k, v := range want.State {
		require.Contains(t, st.Tensors, k)
		assertClose(t, v, values(t, st.Tensors[k]), 2e-5, fmt.Sprintf("%s after step %d", k, i))
	}
}

// TestOptimizerGroupsMatchTorch: SGD (momentum, dampening, Nesterov),
// Adam and AdamW with two parameter groups, each group's settings its own
// over the defaults, under StepLR or CosineAnnealingLR (one case with a
// rate set by hand mid-schedule): weights, both groups' rates and the
// state after every step are torch's; State's groups are torch's
// param_groups. Resumed: a fresh optimizer of other settings, loaded with
// the state after step 2 (and a fresh scheduler with the scheduler's),
// carries on to torch's values.
func TestOptimizerGroupsMatchTorch(t *testing.T) {
	for _, c := range loadTorchGroups(t) {
		t.Run(c.Name, func(t *testing.T) {
			r := straightRun(t, c)
			st, err := r.opt.State()
			require.NoError(t, err)
			require.Len(t, st.Groups, len(c.ParamGroups))
			for g, want := range c.ParamGroups {
				got := st.Groups[g]
				assert.Equal(t, []int{g + 1}, got.Params)
				assert.InDelta(t, want["lr"].(float64), got.LR, 1e-15, "group %d lr", g+1)
				assert.True(t, got.HasInitialLR)
				assert.Equal(t, want["initial_lr"].(float64), got.InitialLR, "group %d initial_lr", g+1)
				switch o := got.Options.(type) {
				case SGDOptions:
					assert.Equal(t, optNum(want["momentum"]), o.Momentum)
					assert.Equal(t, optNum(want["dampening"]), o.Dampening)
					assert.Equal(t, optNum(want["weight_decay"]), o.WeightDecay)
					assert.Equal(t, want["nesterov"], o.Nesterov)
				case AdamOptions:
					betas := want["betas"].([]any)
					assert.Equal(t, []float32{optNum(betas[0]), optNum(betas[1])}, []float32{o.Beta1, o.Beta2})
					assert.Equal(t, optNum(want["eps"]), o.Eps)
					assert.Equal(t, optNum(want["weight_decay"]), o.WeightDecay)
					assert.Equal(t, c.Kind == "adamw", o.Decoupled)
				default:
					t.Fatalf("options %T", o)
				}
			}
		})
		t.Run(c.Name+" resumed", func(t *testing.T) {
			const stop = 2
			r2 := resumedRun(t, c, stop)
			for g, rate := range r2.opt.Rates() {
				assert.InDelta(t, c.Steps[stop-1].LRs[g], rate.LR(), 1e-15, "group %d's rate restored", g+1)
			}
			for i := stop + 1; i <= len(c.Steps); i++ {
				r2.step(t, c, i)
				r2.check(t, c, i)
			}
		})
	}
}

// TestParamGroupsAreChecked: a parameter in two groups (or twice in one),
// a group without parameters and no parameters at all are argument errors
// naming the problem, for SGD and Adam.
func TestParamGroupsAreChecked(t *testing.T) {
	e := newEngine(t)
	p, q := host(t, []int{2}, 1, 2), host(t, []int{2}, 3, 4)
	sgd := func(groups ...[]*Tensor) error {
		var gs []SGDGroup
		for _, ps := range groups {
			gs = append(gs, SGDGroup{Params: ps, Opts: SGDOptions{LR: 0.1}})
		}
		_, err := NewSGDGroups(e, gs)
		return err
	}
	adam := func(groups ...[]*Tensor) error {
		var gs []AdamGroup
		for _, ps := range groups {
			gs = append(gs, AdamGroup{Params: ps, Opts: AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999}})
		}
		_, err := NewAdamGroups(e, gs, true)
		return err
	}
	for _, c := range []struct {
		name   string
		groups [][]*Tensor
		want   string
	}{
		{"in two groups", [][]*Tensor{{p}, {q, p}}, "a parameter appears in more than one parameter group (groups 1 and 2)"},
		{"twice in a group", [][]*Tensor{{p}, {q, q}}, "a parameter appears twice in parameter group 2"},
		{"twice in a list", [][]*Tensor{{p, q, p}}, "parameter 3 is given twice"},
		{"empty group", [][]*Tensor{{p}, {}}, "parameter group 2 has no parameters"},
		{"no groups", nil, "no parameters given"},
		{"one empty list", [][]*Tensor{{}}, "no parameters given"},
	} {
		for name, mk := range map[string]func(...[]*Tensor) error{"sgd": sgd, "adamw": adam} {
			err := mk(c.groups...)
			assert.ErrorIs(t, err, ErrArgument, "%s %s", name, c.name)
			assert.ErrorContains(t, err, c.want, "%s %s", name, c.name)
		}
	}
	// A group's own settings are checked as the defaults are.
	_, err := NewSGDGroups(e, []SGDGroup{{[]*Tensor{p}, SGDOptions{LR: 0.1}}, {[]*Tensor{q}, SGDOptions{LR: 0.1, Nesterov: true}}})
	assert.ErrorContains(t, err, "nesterov")
	_, err = NewAdamGroups(e, []AdamGroup{{[]*Tensor{p}, AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999}}, {[]*Tensor{q}, AdamOptions{LR: -1}}}, false)
	assert.ErrorContains(t, err, "adam: lr")
}

// TestLoadStateChecksTheGroups: a state of another number of groups, a
// group of another size, a flat state into an optimizer of two groups, a
// flat lr disagreeing with group 1's and bad group settings are refused,
// and a refused load changes nothing; the saved groups' positions map the
// state onto the parameters, as torch's.
func TestLoadStateChecksTheGroups(t *testing.T) {
	e := newEngine(t)
	p, q, r := host(t, []int{2}, 1, 2), host(t, []int{3}, 3, 4, 5), host(t, []int{2}, 0, 0)
	opt, err := NewSGDGroups(e, []SGDGroup{{[]*Tensor{p}, SGDOptions{LR: 0.1, Momentum: 0.9}}, {[]*Tensor{q, r}, SGDOptions{LR: 0.2}}})
	require.NoError(t, err)
	buf3, buf2 := host(t, []int{3}, 7, 8, 9), host(t, []int{2}, 5, 6)
	good := func() OptimizerState {
		return OptimizerState{
			Tensors: map[string]*Tensor{"state.3.momentum_buffer": buf3, "state.9.momentum_buffer": buf2},
			Nums:    map[string]float64{},
			Groups: []GroupState{
				{Params: []int{9}, LR: 0.01, Options: SGDOptions{Momentum: 0.5}},
				{Params: []int{3, 4}, LR: 0.02, InitialLR: 0.2, HasInitialLR: true, Options: SGDOptions{WeightDecay: 0.1}},
			},
		}
	}
	for _, c := range []struct {
		name string
		edit func(*OptimizerState)
		want string
	}{
		{"one group", func(s *OptimizerState) { s.Groups = s.Groups[:1] }, "the state has 1 parameter groups, this optimizer has 2"},
		{"flat", func(s *OptimizerState) { s.Groups = nil }, "the state has no param_groups"},
		{"group size", func(s *OptimizerState) { s.Groups[1].Params = []int{3} }, "parameter group 2 of the state has 1 parameters, this optimizer's has 2"},
		{"position twice", func(s *OptimizerState) { s.Groups[1].Params = []int{9, 4} }, "parameter 9 appears twice"},
		{"position 0", func(s *OptimizerState) { s.Groups[1].Params = []int{0, 4} }, "integers >= 1"},
		{"lr", func(s *OptimizerState) { s.Groups[1].LR = math.NaN() }, "param_groups[2].lr"},
		{"flat lr", func(s *OptimizerState) { s.Nums["lr"] = 0.5 }, "differs from param_groups[1].lr"},
		{"settings", func(s *OptimizerState) { s.Groups[0].Options = SGDOptions{Momentum: -1} }, "parameter group 1: sgd: momentum"},
		{"adam settings", func(s *OptimizerState) { s.Groups[0].Options = AdamOptions{} }, "expected SGD's"},
		{"shape", func(s *OptimizerState) { s.Tensors["state.9.momentum_buffer"] = buf3 }, "state.9.momentum_buffer has shape 3, its parameter has 2"},
		{"unknown state", func(s *OptimizerState) { s.Tensors["state.5.momentum_buffer"] = buf2 }, `unexpected entry "state.5.momentum_buffer"`},
	} {
		st := good()
		c.edit(&st)
		err := opt.LoadState(st)
		assert.Error(t, err, c.name)
		assert.ErrorContains(t, err, c.want, c.name)
	}
	assert.Equal(t, []float64{float64(float32(0.1)), float64(float32(0.2))}, []float64{opt.Rates()[0].LR(), opt.Rates()[1].LR()}, "refused loads changed nothing")
	assert.Equal(t, float32(0.9), opt.GroupOptions(0).Momentum)

	require.NoError(t, opt.LoadState(good()))
	assert.Equal(t, 0.01, opt.Rates()[0].LR())
	assert.Equal(t, 0.02, opt.Rates()[1].LR())
	_, has := opt.Rates()[0].InitialLR()
	assert.False(t, has, "group 1 has no initial_lr: unset, as torch replaces the groups whole")
	assert.Equal(t, SGDOptions{LR: 0.01, Momentum: 0.5}, opt.GroupOptions(0))
	assert.Equal(t, SGDOptions{LR: 0.02, WeightDecay: 0.1}, opt.GroupOptions(1))
	st, err := opt.State()
	require.NoError(t, err)
	// Saved position 9 is group 1's first parameter (p), 3 group 2's first (q).
	assert.Equal(t, []float32{5, 6}, values(t, st.Tensors["state.1.momentum_buffer"]))
	assert.Equal(t, []float32{7, 8, 9}, values(t, st.Tensors["state.2.momentum_buffer"]))
	assert.Len(t, st.Tensors, 2)
	assert.Equal(t, []int{1}, st.Groups[0].Params)
	assert.Equal(t, []int{2, 3}, st.Groups[1].Params)
	assert.Equal(t, map[string]float64{"lr": 0.01}, st.Nums, "the flat lr is group 1's")
}

// TestSchedulerDrivesEveryGroup: each group's rate is scheduled from its
// own initial_lr; the scheduler's state keeps every group's base and last
// rate and refuses a state of another number of groups.
func TestSchedulerDrivesEveryGroup(t *testing.T) {
	e := newEngine(t)
	p, q := host(t, []int{2}, 1, 2), host(t, []int{2}, 3, 4)
	opt, err := NewSGDGroups(e, []SGDGroup{{[]*Tensor{p}, SGDOptions{LR: 0.5}}, {[]*Tensor{q}, SGDOptions{LR: 0.25}}})
	require.NoError(t, err)
	require.NoError(t, opt.Rates()[1].SetInitialLR(1)) // as a loaded state would have it
	s, err := CosineLR(opt, 2, 0)
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5, 1}, s.BaseLRs())
	require.NoError(t, s.Step())
	// Chainable cosine at t=1 of 2: halfway from each group's current rate.
	assert.InDelta(t, 0.25, opt.Rates()[0].LR(), 1e-15)
	assert.InDelta(t, 0.125, opt.Rates()[1].LR(), 1e-15)
	assert.Equal(t, s.LRs(), s.LastLRs())
	st := s.StateDict()
	kind, nums := st.Kind, st.Nums
	assert.Equal(t, map[string]float64{"last_epoch": 1, "base_lr": 0.5, "base_lr.2": 1, "last_lr": s.LastLRs()[0], "last_lr.2": s.LastLRs()[1],
		"t_max": 2, "eta_min": 0}, nums)

	one, err := NewSGD(e, []*Tensor{host(t, []int{1}, 1)}, SGDOptions{LR: 0.5})
	require.NoError(t, err)
	s1, err := CosineLR(one, 2, 0)
	require.NoError(t, err)
	assert.ErrorContains(t, s1.LoadStateDict(SchedulerState{Kind: kind, Nums: nums}), "more parameter groups")
	delete(nums, "base_lr.2")
	assert.ErrorContains(t, s.LoadStateDict(SchedulerState{Kind: kind, Nums: nums}), "base_lr.2 is missing")
}

// AddGroup keeps every group's rate driving its own settings: the groups'
// settings are not moved when more are added (each rate points at its
// group's LR), and a parameter already in a group is refused.
func TestAddGroupKeepsRates(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{2}, 1, 2)
	s, err := NewSGD(e, []*Tensor{w}, SGDOptions{LR: 0.1})
	require.NoError(t, err)
	for i := range 8 {
		require.NoError(t, s.AddGroup(SGDGroup{Params: []*Tensor{host(t, []int{1}, 1)}, Opts: SGDOptions{LR: float32(i)}}))
	}
	require.Equal(t, 9, s.NumGroups())
	require.NoError(t, s.Rates()[0].SetLR(0.25))
	require.NoError(t, s.Rates()[8].SetLR(0.5))
	assert.Equal(t, float32(0.25), s.GroupOptions(0).LR)
	assert.Equal(t, float32(0.5), s.GroupOptions(8).LR)
	assert.Equal(t, float32(3), s.GroupOptions(4).LR)
	assert.Len(t, s.Params(), 9)
	err = s.AddGroup(SGDGroup{Params: []*Tensor{w}, Opts: SGDOptions{LR: 0.1}})
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorContains(t, err, "already in parameter group 1")
	assert.Equal(t, 9, s.NumGroups())

	a, err := NewAdam(e, []*Tensor{host(t, []int{1}, 1)}, AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999})
	require.NoError(t, err)
	require.NoError(t, a.AddGroup(AdamGroup{Params: []*Tensor{host(t, []int{1}, 1)}, Opts: AdamOptions{LR: 0.2, Beta1: 0.9, Beta2: 0.999}}))
	require.NoError(t, a.Rates()[0].SetLR(0.05))
	assert.Equal(t, float32(0.05), a.GroupOptions(0).LR)
	assert.Equal(t, float32(0.2), a.GroupOptions(1).LR)
}
