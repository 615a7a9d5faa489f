package core

import (
	"fmt"
	"math"
)

// Optimizers made of elementwise ops: each is a Rule (torch's settings
// and state by name, and the update of one parameter, in
// optim_rules.go), and RuleOptimizer runs any of them with parameter
// groups, state dicts and the steps that may be queued or dropped, as SGD
// and Adam run theirs.

// Setting is one of a rule's settings, by torch's name: a number, a flag
// (a boolean, kept as 0 or 1) or a pair (betas: two numbers).
type Setting struct {
	Name     string
	Defaults []float64 // one value, or two for a pair
	Flag     bool
	Whole    bool // one value for every group (see whole)
}

// Rule is one optimizer: torch's name and default lr, its settings, the
// state tensors a parameter may have, and what one step does.
type Rule struct {
	Name     string  // "rmsprop": optim.<Name> and its messages
	LR       float64 // torch's default lr
	Settings []Setting
	Slots    []string // by torch's names, as state_dict's "state.<i>.<slot>"
	// uses says which slots a group's settings need (nil: all).
	uses func(s Settings) []bool
	// check refuses what torch refuses, and NaN or ±Inf (fn names the call).
	check func(fn string, s Settings) error
	// update queues one parameter's step.
	update func(u *ruleStep) error
	// filled names the setting torch's constructor fills the first slot
	// with for every parameter (Adagrad's sum), "" where state starts at
	// the first step.
	filled string
}

// Settings are a group's settings but lr, in the order of its rule's
// Settings, pairs taking two places (a value: copies are independent).
type Settings struct {
	Rule *Rule
	v    [8]float64
}

// Defaults are torch's.
func (r *Rule) Defaults() Settings {
	s := Settings{Rule: r}
	i := 0
	for _, st := range r.Settings {
		i += copy(s.v[i:], st.Defaults)
	}
	return s
}

// index is where setting name's values start, and how many it has.
func (s Settings) index(name string) (int, int) {
	i := 0
	for _, st := range s.Rule.Settings {
		if st.Name == name {
			return i, len(st.Defaults)
		}
		i += len(st.Defaults)
	}
	panic(fmt.Sprintf("%s has no setting %q", s.Rule.Name, name))
}

// Get is setting name's values (one, or two for a pair).
func (s Settings) Get(name string) []float64 {
	i, n := s.index(name)
	return append([]float64(nil), s.v[i:i+n]...)
}

// With is s with setting name set to v (one value, or two for a pair).
func (s Settings) With(name string, v ...float64) Settings {
	i, n := s.index(name)
	if len(v) != n {
		panic(fmt.Sprintf("%s: setting %q takes %d values, got %d", s.Rule.Name, name, n, len(v)))
	}
	copy(s.v[i:], v)
	return s
}

func (s Settings) has(name string) bool {
	for _, st := range s.Rule.Settings {
		if st.Name == name {
			return true
		}
	}
	return false
}

func (s Settings) num(name string) float32 { i, _ := s.index(name); return float32(s.v[i]) }
func (s Settings) flag(name string) bool   { i, _ := s.index(name); return s.v[i] != 0 }
func (s Settings) betas() (float32, float32) {
	i, _ := s.index("betas")
	return float32(s.v[i]), float32(s.v[i+1])
}

// checkSettings refuses settings of another rule, then what the rule refuses.
func (r *Rule) checkSettings(fn string, s Settings) error {
	if s.Rule != r {
		return argErrorf("%s: the settings are %s's", fn, s.Rule.Name)
	}
	for _, v := range s.v {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return argErrorf("%s: settings must be finite, got %g", fn, v)
		}
	}
	return r.check(fn, s)
}

// RuleGroup is one parameter group: its parameters, lr and settings.
type RuleGroup struct {
	Params []*Tensor
	LR     float32
	Opts   Settings
}

// RuleOptimizer runs a Rule over parameter groups.
type RuleOptimizer struct {
	optimizer
	rule *Rule
	// lrs[g] is what group g's rate drives; opts[g] its other settings;
	// products[g] its running product (ruleStep.product).
	lrs      []*float32
	opts     []Settings
	products []runningProduct
}

// runningProduct is ∏ f(t) for t = 1..step, of the f that key names.
type runningProduct struct {
	key  [2]float64
	step int
	v    float64
}

// NewRuleOptimizer makes rule's optimizer of parameter groups: none empty,
// no parameter in two; host parameters move to the persistent pool.
func NewRuleOptimizer(e *Engine, rule *Rule, groups []RuleGroup) (*RuleOptimizer, error) {
	o := &RuleOptimizer{rule: rule}
	params := make([][]*Tensor, len(groups))
	for g, gr := range groups {
		if err := o.checkGroup(rule.Name, gr); err != nil {
			return nil, err
		}
		lr := gr.LR
		o.lrs, o.opts, params[g] = append(o.lrs, &lr), append(o.opts, gr.Opts), gr.Params
		o.products = append(o.products, runningProduct{})
	}
	opt, err := newOptimizer(e, rule.Name, params, o.lrs)
	if err != nil {
		return nil, err
	}
	o.optimizer = opt
	return o, nil
}

func (o *RuleOptimizer) checkGroup(fn string, gr RuleGroup) error {
	if err := checkRate(fn, "lr", float64(gr.LR)); err != nil {
		return err
	}
	if err := o.rule.checkSettings(fn, gr.Opts); err != nil {
		return err
	}
	if len(o.opts) > 0 {
		return o.checkWhole(fn, gr.Opts, -1)
	}
	return nil
}

// checkWhole refuses settings s (for group g, or a new one at -1) whose
// whole-optimizer settings differ from another group's.
func (o *RuleOptimizer) checkWhole(fn string, s Settings, g int) error {
	for _, st := range o.rule.Settings {
		if !st.Whole {
			continue
		}
		for h, other := range o.opts {
			if h != g && s.Get(st.Name)[0] != other.Get(st.Name)[0] {
				return argErrorf("%s: %s is %g for one parameter group and %g for another: it is the optimizer's, one for every group (torch reads only the optimizer's default)",
					fn, st.Name, s.Get(st.Name)[0], other.Get(st.Name)[0])
			}
		}
	}
	return nil
}

// Rule is the optimizer's rule.
func (o *RuleOptimizer) Rule() *Rule { return o.rule }

// GroupOptions are group g's settings (g 0-based) but lr.
func (o *RuleOptimizer) GroupOptions(g int) Settings { return o.opts[g] }

// SetGroupOptions sets group g's settings but lr (set through Rates()[g]).
func (o *RuleOptimizer) SetGroupOptions(g int, s Settings) error {
	if err := o.rule.checkSettings(o.rule.Name, s); err != nil {
		return err
	}
	if err := o.checkFixed(o.rule.Name, s, g); err != nil {
		return err
	}
	o.opts[g] = s
	return nil
}

// checkFixed refuses a change of a whole-optimizer setting once made:
// torch fills its state with it in the constructor (Adagrad's
// initial_accumulator_value), so a later value never reaches it there.
func (o *RuleOptimizer) checkFixed(fn string, s Settings, g int) error {
	for _, st := range o.rule.Settings {
		if st.Whole && s.Get(st.Name)[0] != o.opts[g].Get(st.Name)[0] {
			return argErrorf("%s: %s is fixed when the optimizer is made (%g; torch fills the state with it then), got %g",
				fn, st.Name, o.opts[g].Get(st.Name)[0], s.Get(st.Name)[0])
		}
	}
	return nil
}

// AddGroup adds a parameter group, as torch's add_param_group. Only before
// the first step: gglua counts steps per optimizer, torch per parameter,
// so parameters added later would take the wrong step count; that is
// refused.
func (o *RuleOptimizer) AddGroup(gr RuleGroup) error {
	fn := o.rule.Name + ": add_param_group"
	o.settle()
	if n := o.steps + len(o.queued); n > 0 {
		return argErrorf("%s: a group can only be added before the first step (%d steps taken): gglua counts steps per optimizer, not per parameter as torch, so the new parameters' step count would be wrong", fn, n)
	}
	if err := o.checkGroup(fn, gr); err != nil {
		return err
	}
	lr := gr.LR
	if err := o.addGroup(fn, gr.Params, &lr); err != nil {
		return err
	}
	o.lrs, o.opts, o.products = append(o.lrs, &lr), append(o.opts, gr.Opts), append(o.products, runningProduct{})
	return nil
}

// ruleStep is what a rule's update sees of one parameter's step.
type ruleStep struct {
	calc
	p, grad *Tensor // the parameter and its gradient
	state   []*Tensor
	first   bool // the parameter's state starts with this step
	lr      float32
	s       Settings
	step    int             // this step's number, from 1
	prod    *runningProduct // the group's
	opt     *optimizer
}

// product is ∏ f(t) for t = 1..step (NAdam's momentum coefficients), f
// named by key (the settings it reads). The group's parameters share it
// within a step, and the next step multiplies in one more factor, in the
// order a fresh product would: the work does not grow with the step count.
func (u *ruleStep) product(key [2]float64, f func(t int) float64) float64 {
	p := u.prod
	switch {
	case p.key == key && p.step == u.step:
	case p.key == key && p.step == u.step-1:
		p.v *= f(u.step)
	default:
		p.key, p.v = key, 1
		for t := 1; t <= u.step; t++ {
			p.v *= f(t)
		}
	}
	p.step = u.step
	return p.v
}

// withWeightDecay is the gradient plus weight_decay times the parameter
// (torch's L2 penalty), or, with decoupled_weight_decay on, the gradient
// with the parameter shrunk by lr * weight_decay first (AdamW's).
func (u *ruleStep) withWeightDecay() *Tensor {
	wd := u.s.num("weight_decay")
	switch {
	case wd == 0:
		return u.grad
	case u.s.has("decoupled_weight_decay") && u.s.flag("decoupled_weight_decay"):
		u.set(u.p, u.scale(u.p, 1-u.lr*wd))
		return u.grad
	}
	return u.axpby(1, u.grad, wd, u.p)
}

// Step updates every parameter that has a gradient, each with its group's
// settings. The step count counts the steps that ran.
func (o *RuleOptimizer) Step() error {
	e := o.e
	if skip, err := e.checkGrads(o.params); skip || err != nil {
		return err
	}
	withGrad, fresh, err := o.prepare(func(g int) []bool {
		if o.rule.uses == nil {
			return slotNeed(len(o.rule.Slots))
		}
		return o.rule.uses(o.opts[g])
	})
	if err != nil || noneToUpdate(withGrad) {
		return err
	}
	first := map[*Tensor]bool{}
	for _, p := range fresh {
		first[p] = true
	}
	n := o.steps + len(o.queued) + 1 // steps ran, queued, and this one
	err = e.NoGrad(func() error {
		for g, ps := range withGrad {
			for _, p := range ps {
				u := &ruleStep{calc: calc{e: e}, p: p, grad: p.Grad(), state: o.state[p], first: first[p],
					lr: *o.lrs[g], s: o.opts[g], step: n, prod: &o.products[g], opt: &o.optimizer}
				if err := o.rule.update(u); err != nil {
					return err
				}
				if u.err != nil {
					return u.err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return o.queue(fresh)
}

// State is a snapshot of the optimizer's state (see stateDict): the state
// tensors, the number of steps that ran, group 1's lr and initial_lr, and
// every group.
func (o *RuleOptimizer) State() (OptimizerState, error) {
	st, err := o.countedState(o.rule.Slots, func(g int) any { return o.opts[g] })
	if err != nil || o.rule.filled == "" || o.steps > 0 {
		return st, err
	}
	// Before the first step torch's state already holds the filled slot
	// (Adagrad's sum at initial_accumulator_value) for every parameter;
	// gglua makes it at the first step, from the same value.
	pos := 0 // o.params is every group's, in order
	for g, pg := range o.groups {
		v := float32(o.opts[g].num(o.rule.filled))
		for _, p := range pg.params {
			pos++
			key := fmt.Sprintf("state.%d.%s", pos, o.rule.Slots[0])
			if _, ok := st.Tensors[key]; ok {
				continue
			}
			if st.Tensors[key], err = Full(v, p.shape...); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// LoadState restores what State returned, settings included.
func (o *RuleOptimizer) LoadState(st OptimizerState) error {
	stepped := st.Nums["step"] > 0
	return o.loadCountedState(o.rule.Slots, st, func(g int, v any) (func(), error) {
		opts, ok := v.(Settings)
		if !ok {
			return nil, argErrorf("the settings are a %T, expected %s's", v, o.rule.Name)
		}
		if err := o.rule.checkSettings(o.rule.Name, opts); err != nil {
			return nil, err
		}
		if !stepped { // a state that stepped holds the slots it filled: the value is spent
			if err := o.checkFixed("load_state_dict", opts, g); err != nil {
				return nil, err
			}
		}
		return func() { o.opts[g] = opts }, nil
	})
}

// calc is a chain (shape.go: the first error kept, each later op a no-op)
// of an engine's elementwise ops, named for the rules' formulas.
type calc struct {
	chain
	e *Engine
}

func (c *calc) axpby(a float32, x *Tensor, b float32, y *Tensor) *Tensor {
	return c.do(func() (*Tensor, error) { return c.e.axpby(a, x, b, y) })
}
func (c *calc) mul(a, b *Tensor) *Tensor {
	return c.do(func() (*Tensor, error) { return c.e.Mul(a, b) })
}
func (c *calc) div(a, b *Tensor) *Tensor {
	return c.do(func() (*Tensor, error) { return c.e.Div(a, b) })
}
func (c *calc) max(a, b *Tensor) *Tensor {
	return c.do(func() (*Tensor, error) { return c.e.Maximum(a, b) })
}
func (c *calc) sqrt(a *Tensor) *Tensor { return c.do(func() (*Tensor, error) { return c.e.Sqrt(a) }) }
func (c *calc) abs(a *Tensor) *Tensor  { return c.do(func() (*Tensor, error) { return c.e.Abs(a) }) }
func (c *calc) scale(a *Tensor, s float32) *Tensor {
	return c.do(func() (*Tensor, error) { return c.e.Scale(a, s) })
}
func (c *calc) plus(a *Tensor, s float32) *Tensor {
	return c.do(func() (*Tensor, error) { return c.e.AddScalar(a, s) })
}

// set queues dst = v in place of dst.
func (c *calc) set(dst, v *Tensor) {
	if c.err == nil {
		c.err = c.e.writeInPlace(dst, v)
	}
}
