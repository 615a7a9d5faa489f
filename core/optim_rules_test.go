package core

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam against PyTorch:
// testdata/torch_optim_rules.json, written by
// scripts/reference/optim_rules.py, runs of two parameter groups under
// StepLR as torch_optim_groups.json's (groupsRun runs them).

func ruleNamed(t *testing.T, name string) *Rule {
	for _, r := range Rules {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no rule %q", name)
	return nil
}

// ruleSettings is the rule's defaults with each of the maps' settings over
// them, later maps first (a group over the optimizer's defaults).
func ruleSettings(rule *Rule, maps ...map[string]any) Settings {
	s := rule.Defaults()
	for i := len(maps) - 1; i >= 0; i-- {
		for k, v := range maps[i] {
			switch v := v.(type) {
			case bool:
				b := 0.0
				if v {
					b = 1
				}
				s = s.With(k, b)
			case []any:
				s = s.With(k, v[0].(float64), v[1].(float64))
			case float64:
				if k != "lr" {
					s = s.With(k, v)
				}
			}
		}
	}
	return s
}

func newRuleRun(t *testing.T, e *Engine, kind string, groups []map[string]any, defaults map[string]any, params [][]*Tensor) (*RuleOptimizer, []float64) {
	rule := ruleNamed(t, kind)
	var gs []RuleGroup
	var lrs []float64
	for g, gr := range groups {
		lr := groupSetting(gr, defaults, "lr", rule.LR).(float64)
		lrs = append(lrs, lr)
		gs = append(gs, RuleGroup{Params: params[g], LR: float32(lr), Opts: ruleSettings(rule, gr, defaults)})
	}
	opt, err := NewRuleOptimizer(e, rule, gs)
	require.NoError(t, err)
	return opt, lrs
}

// TestRuleOptimizersMatchTorch: weights, rates and state after each of 8
// steps are torch's, for every rule (RMSprop centered and with momentum,
// Adagrad's lr decay and initial accumulator, NAdam's and RAdam's
// decoupled weight decay, RAdam before and after its rectification starts);
// the step count is the steps taken. Resumed: a fresh optimizer of the
// default settings, loaded with the state after step 4, carries on to
// torch's values.
func TestRuleOptimizersMatchTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_optim_rules.json")
	require.NoError(t, err)
	var ref torchGroups
	require.NoError(t, json.Unmarshal(raw, &ref))
	kinds := map[string]bool{}
	for _, c := range ref.Cases {
		kinds[c.Kind] = true
		t.Run(c.Name, func(t *testing.T) {
			r := straightRun(t, c)
			st, err := r.opt.State()
			require.NoError(t, err)
			assert.Equal(t, float64(len(c.Steps)), st.Nums["step"])
			require.Len(t, st.Groups, 2)
			assert.Equal(t, ruleSettings(ruleNamed(t, c.Kind), c.Groups[1], c.Defaults), st.Groups[1].Options)
		})
		t.Run(c.Name+" resumed", func(t *testing.T) {
			const stop = 4
			r2 := resumedRun(t, c, stop)
			for i := stop + 1; i <= len(c.Steps); i++ {
				r2.step(t, c, i)
				r2.check(t, c, i)
			}
		})
	}
	for _, r := range Rules {
		assert.True(t, kinds[r.Name], "no torch run of %s", r.Name)
	}
}

// TestRuleSettingsAreChecked: what torch refuses is refused, naming the
// optimizer and the setting, and NaN too.
func TestRuleSettingsAreChecked(t *testing.T) {
	e := newEngine(t)
	p := host(t, []int{2}, 1, 2)
	for _, c := range []struct {
		rule *Rule
		opts Settings
		want string
	}{
		{RMSprop, RMSprop.Defaults().With("alpha", -0.5), "rmsprop: alpha must be >= 0, got -0.5"},
		{RMSprop, RMSprop.Defaults().With("momentum", -1), "rmsprop: momentum must be >= 0"},
		{Adagrad, Adagrad.Defaults().With("lr_decay", -1), "adagrad: lr_decay must be >= 0"},
		{Adagrad, Adagrad.Defaults().With("initial_accumulator_value", -1), "initial_accumulator_value must be >= 0"},
		{Adadelta, Adadelta.Defaults().With("rho", 1.5), "adadelta: rho must be in [0, 1], got 1.5"},
		{Adamax, Adamax.Defaults().With("betas", 0.9, 1), "adamax: beta 2 must be in [0, 1), got 1"},
		{NAdam, NAdam.Defaults().With("momentum_decay", -1), "nadam: momentum_decay must be >= 0"},
		{RAdam, RAdam.Defaults().With("eps", nan32()), "radam: settings must be finite"},
		{RAdam, NAdam.Defaults(), "radam: the settings are nadam's"},
	} {
		_, err := NewRuleOptimizer(e, c.rule, []RuleGroup{{Params: []*Tensor{p}, LR: 0.1, Opts: c.opts}})
		assert.ErrorIs(t, err, ErrArgument, c.want)
		assert.ErrorContains(t, err, c.want)
	}
	_, err := NewRuleOptimizer(e, Adagrad, []RuleGroup{{Params: []*Tensor{p}, LR: -1, Opts: Adagrad.Defaults()}})
	assert.ErrorContains(t, err, "adagrad: lr")
	// Adagrad's initial_accumulator_value is the optimizer's: a group's may
	// not differ (torch would ignore it).
	q := host(t, []int{2}, 3, 4)
	half := Adagrad.Defaults().With("initial_accumulator_value", 0.5)
	_, err = NewRuleOptimizer(e, Adagrad, []RuleGroup{{Params: []*Tensor{p}, LR: 0.1, Opts: half}, {Params: []*Tensor{q}, LR: 0.1, Opts: Adagrad.Defaults()}})
	assert.ErrorContains(t, err, "adagrad: initial_accumulator_value is 0 for one parameter group and 0.5 for another")
	o, err := NewRuleOptimizer(e, Adagrad, []RuleGroup{{Params: []*Tensor{p}, LR: 0.1, Opts: half}, {Params: []*Tensor{q}, LR: 0.1, Opts: half}})
	require.NoError(t, err)
	assert.ErrorContains(t, o.SetGroupOptions(1, Adagrad.Defaults()), "initial_accumulator_value")
	assert.ErrorContains(t, o.AddGroup(RuleGroup{Params: []*Tensor{host(t, []int{1}, 5)}, LR: 0.1, Opts: Adagrad.Defaults()}), "initial_accumulator_value")
	// Nor may it change once made, even with one group: torch fills the
	// state with it in its constructor, so a later value never counts.
	one, err := NewRuleOptimizer(e, Adagrad, []RuleGroup{{Params: []*Tensor{q}, LR: 0.1, Opts: half}})
	require.NoError(t, err)
	assert.ErrorContains(t, one.SetGroupOptions(0, Adagrad.Defaults()), "initial_accumulator_value is fixed when the optimizer is made")
	other, err := NewRuleOptimizer(e, Adagrad, []RuleGroup{{Params: []*Tensor{host(t, []int{2}, 1, 2)}, LR: 0.1, Opts: Adagrad.Defaults()}})
	require.NoError(t, err)
	st, err := other.State()
	require.NoError(t, err)
	assert.ErrorContains(t, one.LoadState(st), "initial_accumulator_value is fixed when the optimizer is made")
}

func nan32() float64 { var z float64; return z / z }

// Before its first step Adagrad's state holds every parameter's sum at
// initial_accumulator_value, as torch's constructor fills it, and a step
// count of 0; loaded into a fresh optimizer, the steps that follow are the
// straight run's, bit for bit. After a step the sums are the ones made.
func TestAdagradStateBeforeTheFirstStep(t *testing.T) {
	e := newEngine(t)
	c := host(t, []int{2, 3}, 1, -2, 3, 0.5, -1, 2)
	build := func() (*RuleOptimizer, []*Tensor) {
		w := host(t, []int{2, 3}, 0.1, 0.2, -0.3, 0.4, -0.5, 0.6)
		b := host(t, []int{3}, 1, 2, 3)
		for _, p := range []*Tensor{w, b} {
			require.NoError(t, p.SetRequiresGrad(true))
		}
		o, err := NewRuleOptimizer(e, Adagrad, []RuleGroup{{Params: []*Tensor{w}, LR: 0.1, Opts: Adagrad.Defaults().With("initial_accumulator_value", 0.5)},
			{Params: []*Tensor{b}, LR: 0.2, Opts: Adagrad.Defaults().With("initial_accumulator_value", 0.5)}})
		require.NoError(t, err)
		return o, []*Tensor{w, b}
	}
	step := func(o *RuleOptimizer, ps []*Tensor) {
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			loss = e.must(e.Add(e.must(e.Sum(e.must(e.Mul(e.must(e.Mul(ps[0], ps[0])), c)))), e.must(e.Sum(e.must(e.Mul(ps[1], ps[1]))))))
			return nil
		}))
		for _, p := range ps {
			p.grad = nil
		}
		_, err := e.Backward(loss)
		require.NoError(t, err)
		require.NoError(t, o.Step())
	}
	o, ps := build()
	st, err := o.State()
	require.NoError(t, err)
	assert.Equal(t, 0.0, st.Nums["step"])
	require.Len(t, st.Tensors, 2)
	assert.Equal(t, []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, values(t, st.Tensors["state.1.sum"]))
	assert.Equal(t, []float32{0.5, 0.5, 0.5}, values(t, st.Tensors["state.2.sum"]))

	loaded, lps := build()
	require.NoError(t, loaded.LoadState(st))
	for range 3 {
		step(o, ps)
		step(loaded, lps)
	}
	for i := range ps {
		assert.Equal(t, bitsOfFloats(values(t, ps[i])), bitsOfFloats(values(t, lps[i])), "parameter %d", i+1)
	}
	st, err = o.State()
	require.NoError(t, err)
	assert.Equal(t, 3.0, st.Nums["step"])
	assert.Greater(t, values(t, st.Tensors["state.2.sum"])[0], float32(0.5+4)) // 0.5, the first gradient's 2², and two more
}

// TestAdadeltaKernelIsTheComposition: the CPU's Adadelta kernel
// (adadelta.c) gives the composed update's weights and state bit for bit
// over four steps, on a size that leaves vector tails and splits across
// threads, with and without weight decay, and with the weight changed in
// place before a step; and torch's references pass with the composition.
func TestAdadeltaKernelIsTheComposition(t *testing.T) {
	run := func(composed bool, s Settings) [][]float32 {
		forceComposedRules = composed
		defer func() { forceComposedRules = false }()
		e, w := cubeWeight(t, 3)
		opt, err := NewRuleOptimizer(e, Adadelta, []RuleGroup{{Params: []*Tensor{w}, LR: 0.5, Opts: s}})
		require.NoError(t, err)
		cubeSteps(t, e, w, opt, func(step int) {
			if step == 2 { // a queued in-place update of the weight first
				require.NoError(t, e.NoGrad(func() error {
					half, err := e.Scale(w, 0.5)
					if err == nil {
						err = e.writeInPlace(w, half)
					}
					return err
				}))
			}
		})
		return [][]float32{values(t, w), values(t, opt.state[w][0]), values(t, opt.state[w][1])}
	}
	for _, wd := range []float64{0, 0.1} {
		s := Adadelta.Defaults().With("rho", 0.8).With("weight_decay", wd)
		assert.Equal(t, run(true, s), run(false, s), "weight_decay %g: weights, square_avg, acc_delta", wd)
	}
	runForced(t, &forceComposedRules, TestRuleOptimizersMatchTorch)
}
