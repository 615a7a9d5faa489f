package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Optimizers update parameters on the device, inside the step graph: each
// update is an in-place write into the parameter's persistent buffer, and
// their state (momentum, moments) lives in the persistent pool, allocated
// once. Step-dependent numbers (learning rate, bias corrections) are baked
// into the graph's ops, so a step uploads nothing.
//
// A step is queued, not run: it runs with the next graph compute, or is
// lost if that compute is cancelled or the pending work dropped. So the
// optimizer counts a step (Adam's bias correction) and marks fresh state as
// written only once it knows the step ran: the engine numbers its batches
// of pending work and says which were dropped.

// Rate is an optimizer's learning rate as schedulers see it: the rate the
// next step uses (kept in float64 as it was set, and as the float32 the
// update kernels read) and torch's initial_lr, the base rate a scheduler
// starts from, which the first scheduler made on the optimizer sets and the
// optimizer's state dict keeps.
type Rate struct {
	lr         *float32 // what the kernels read
	lr64       float64  // the rate as set; current while float32(lr64) == *lr
	initial    float64
	hasInitial bool
}

// NewRate makes a Rate driving *lr (a host's own rate, or a test's).
func NewRate(lr *float32) *Rate { return &Rate{lr: lr, lr64: float64(*lr)} }

// LR is the rate the next step uses, in float64: the value it was set to,
// unless the float32 the kernels read was changed behind the Rate's back.
func (r *Rate) LR() float64 {
	if float32(r.lr64) == *r.lr {
		return r.lr64
	}
	return float64(*r.lr)
}

// SetLR sets the rate: a finite number >= 0.
func (r *Rate) SetLR(v float64) error {
	if err := checkRate("set_lr", "learning rate", v); err != nil {
		return err
	}
	r.set(v)
	return nil
}

func (r *Rate) set(v float64) { r.lr64, *r.lr = v, float32(v) }

// InitialLR is torch's initial_lr, and whether one was set.
func (r *Rate) InitialLR() (float64, bool) { return r.initial, r.hasInitial }

// SetInitialLR sets initial_lr: a finite number >= 0.
func (r *Rate) SetInitialLR(v float64) error {
	if err := checkRate("initial_lr", "initial learning rate", v); err != nil {
		return err
	}
	r.initial, r.hasInitial = v, true
	return nil
}

// checkRate refuses a rate that is not a finite number >= 0 (also once
// rounded to the float32 the kernels use).
func checkRate(fn, what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || math.IsInf(float64(float32(v)), 0) {
		return argErrorf("%s: %s must be a finite number >= 0, got %g", fn, what, v)
	}
	return nil
}

// checkFinite refuses NaN and ±Inf; nonNeg also refuses negatives.
func checkFinite(fn, name string, v float64, nonNeg bool) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return argErrorf("%s: %s must be a finite number, got %g", fn, name, v)
	}
	if nonNeg && v < 0 {
		return argErrorf("%s: %s must be >= 0, got %g", fn, name, v)
	}
	return nil
}

// Rated is what a scheduler drives: one rate per parameter group (an
// optimizer), or a single Rate.
type Rated interface{ Rates() []*Rate }

// Rates is r alone, so a scheduler can drive a host's own rate.
func (r *Rate) Rates() []*Rate { return []*Rate{r} }

// Parameter groups are torch's: each group holds its parameters and its own
// settings (learning rate included), given by the caller as the defaults
// overridden by the group's own (luabind does the merging, as torch's
// constructor does). The parameters' positions, across the groups in order,
// name their state ("state.<i>.<slot>", 1-based), as torch's state_dict
// numbers them.

// paramGroup is one group: its parameters and its rate, which drives the
// float32 lr in the optimizer's options for the group.
type paramGroup struct {
	params []*Tensor
	rate   *Rate
}

// GroupState is one parameter group as an optimizer's state dict holds it
// (an entry of torch's param_groups): the 1-based positions of its
// parameters, its rate, initial_lr if one was set, and its other settings,
// an SGDOptions for SGD or an AdamOptions for Adam(W) (their LR is not
// used: LR is the group's rate).
type GroupState struct {
	Params       []int
	LR           float64
	InitialLR    float64
	HasInitialLR bool
	Options      any
}

// OptimizerState is an optimizer's whole state dict: the state tensors
// ("state.<i>.<slot>"), the numbers ("lr" and "initial_lr", group 1's, and
// Adam's "step") and the groups. Groups nil in a state to load is the
// older flat form, which only an optimizer of one group takes.
type OptimizerState struct {
	Tensors map[string]*Tensor
	Nums    map[string]float64
	Groups  []GroupState
}

type optimizer struct {
	e      *Engine
	params []*Tensor // every group's, in order
	groups []paramGroup
	state  map[*Tensor][]*Tensor
	// live: the parameter's state holds what a step wrote (one that ran,
	// or one still queued); state that is allocated but not live is zero
	// and the next step starts it afresh.
	live   map[*Tensor]bool
	queued []queuedStep // steps queued whose fate is not known yet
	steps  int          // steps that ran
}

// queuedStep is a step queued but not yet known to have run.
type queuedStep struct {
	batch int64     // the engine's batch of pending work that holds its updates
	fresh []*Tensor // parameters whose state the step writes first
}

// newOptimizer checks the groups (none empty, no parameter twice) and
// makes their parameters resident; lrs[g] is the float32 group g's rate
// drives.
func newOptimizer(e *Engine, fn string, groups [][]*Tensor, lrs []*float32) (optimizer, error) {
	if len(groups) == 0 {
		return optimizer{}, argErrorf("optimizer: no parameters given")
	}
	seen := map[*Tensor]int{}
	var params []*Tensor
	for g, ps := range groups {
		if len(ps) == 0 {
			if len(groups) == 1 {
				return optimizer{}, argErrorf("optimizer: no parameters given")
			}
			return optimizer{}, argErrorf("%s: parameter group %d has no parameters", fn, g+1)
		}
		for _, p := range ps {
			if p == nil {
				return optimizer{}, argErrorf("%s: parameter %d is nil", fn, len(params)+1)
			}
			if h, ok := seen[p]; ok {
				if h == g && len(groups) == 1 {
					return optimizer{}, argErrorf("%s: parameter %d is given twice", fn, len(params)+1)
				}
				if h == g {
					return optimizer{}, argErrorf("%s: a parameter appears twice in parameter group %d", fn, g+1)
				}
				return optimizer{}, argErrorf("%s: a parameter appears in more than one parameter group (groups %d and %d)", fn, h+1, g+1)
			}
			seen[p] = g
			params = append(params, p)
		}
	}
	for i, p := range params {
		if !p.IsLeaf() {
			return optimizer{}, fmt.Errorf("optimizer: parameter %d is not a leaf tensor", i+1)
		}
		if p.storage().dtype == ggmlcgo.I32 {
			return optimizer{}, argErrorf("%s: parameter %d is an i32 tensor, which has no gradient (only floating-point tensors can be optimized)", fn, i+1)
		}
	}
	for i, p := range params {
		// A plain tensor is made a parameter (optim.sgd({tensor.randn(3)})
		// trains it); one frozen with requires_grad(false) stays frozen,
		// gets no gradient and is skipped, as in PyTorch.
		p.requiresGrad = !p.frozen
		if err := p.MoveToDevice(e, residency.Persistent); err != nil { // weights stay resident
			return optimizer{}, fmt.Errorf("optimizer: parameter %d: %w", i+1, err)
		}
	}
	o := optimizer{e: e, params: params, state: map[*Tensor][]*Tensor{}, live: map[*Tensor]bool{}}
	for g, ps := range groups {
		o.groups = append(o.groups, paramGroup{params: ps, rate: NewRate(lrs[g])})
	}
	return o, nil
}

// addGroup appends a group of parameters (none in another group, none
// twice, all leaves) whose rate drives *lr, as torch's add_param_group;
// the parameters are made resident as the constructor makes them. Nothing
// changes unless every check passes.
func (o *optimizer) addGroup(fn string, ps []*Tensor, lr *float32) error {
	if len(ps) == 0 {
		return argErrorf("%s: the group has no parameters", fn)
	}
	group := map[*Tensor]int{}
	for g, pg := range o.groups {
		for _, p := range pg.params {
			group[p] = g
		}
	}
	mine := map[*Tensor]bool{}
	for i, p := range ps {
		switch g, taken := group[p]; {
		case p == nil:
			return argErrorf("%s: parameter %d is nil", fn, i+1)
		case taken:
			return argErrorf("%s: parameter %d is already in parameter group %d (a parameter may appear in one group only)", fn, i+1, g+1)
		case mine[p]:
			return argErrorf("%s: parameter %d is given twice", fn, i+1)
		case !p.IsLeaf():
			return argErrorf("%s: parameter %d is not a leaf tensor", fn, i+1)
		case p.storage().dtype == ggmlcgo.I32:
			return argErrorf("%s: parameter %d is an i32 tensor, which has no gradient (only floating-point tensors can be optimized)", fn, i+1)
		}
		mine[p] = true
	}
	for i, p := range ps {
		p.requiresGrad = !p.frozen // as the constructor
		if err := p.MoveToDevice(o.e, residency.Persistent); err != nil {
			return fmt.Errorf("%s: parameter %d: %w", fn, i+1, err)
		}
	}
	o.groups = append(o.groups, paramGroup{params: slices.Clone(ps), rate: NewRate(lr)})
	o.params = append(o.params, ps...)
	return nil
}

// Params are the optimized tensors, every group's, in order.
func (o *optimizer) Params() []*Tensor { return o.params }

// NumGroups is the number of parameter groups.
func (o *optimizer) NumGroups() int { return len(o.groups) }

// GroupParams are group g's parameters (g 0-based).
func (o *optimizer) GroupParams(g int) []*Tensor { return o.groups[g].params }

// Rate is the first parameter group's learning rate, as schedulers drive
// it (the optimizer's only one, when made from a list of parameters).
func (o *optimizer) Rate() *Rate { return o.groups[0].rate }

// Rates are every group's learning rates, in order.
func (o *optimizer) Rates() []*Rate {
	out := make([]*Rate, len(o.groups))
	for g := range o.groups {
		out[g] = o.groups[g].rate
	}
	return out
}

// ZeroGrad clears the parameters' gradients.
func (o *optimizer) ZeroGrad() { ZeroGrad(o.params) }

// settle learns the fate of queued steps: a step whose batch was computed
// ran and is counted; one whose batch was dropped (a cancelled compute,
// DropPending, a reset of the pass pool) did not, and the state it was to
// write first is fresh again.
func (o *optimizer) settle() {
	var still []queuedStep
	for _, q := range o.queued {
		switch {
		case q.batch == o.e.batch:
			still = append(still, q)
		case slices.Contains(o.e.lost, q.batch):
			for _, p := range q.fresh {
				delete(o.live, p)
			}
		default:
			o.steps++
		}
	}
	o.queued = still
}

// queue records a step just queued (fresh: the parameters whose state it
// writes first).
func (o *optimizer) queue(fresh []*Tensor) error {
	o.settle() // the steps before: the list holds only those in flight
	for _, p := range fresh {
		o.live[p] = true
	}
	o.queued = append(o.queued, queuedStep{batch: o.e.batch, fresh: fresh})
	if o.e.eager { // eager: the step runs now (in-place updates wait for a Realize)
		return o.realized()
	}
	return nil
}

// realized computes pending work (a queued step included) and settles.
func (o *optimizer) realized() error {
	err := o.e.Realize()
	o.settle()
	return err
}

// stepInPlace queues a fused optimizer kernel (build) that updates p in
// its own memory from inputs. The kernel reads the weight itself, so a
// queued update of p (an in-place change before the step) is computed
// first.
func (o *optimizer) stepInPlace(p *Tensor, inputs []*Tensor, build func(c ctx, base node, in []node) (node, error)) error {
	if p.pending {
		if err := o.realized(); err != nil {
			return err
		}
	}
	return o.e.inPlace(p, inputs, build)
}

// slots returns p's state tensors, allocating (zeroed, on the device, in
// the persistent pool) those need asks for that it lacks; a slot nothing
// asked for stays nil (RMSprop's momentum buffer without momentum).
func (o *optimizer) slots(p *Tensor, need []bool) ([]*Tensor, error) {
	s := o.state[p]
	if s == nil {
		s = make([]*Tensor, len(need))
	}
	for i, want := range need {
		if !want || s[i] != nil {
			continue
		}
		if p.Numel() == 0 { // an empty parameter's state is empty (empty.go)
			s[i] = emptyTensor(p.shape)
			continue
		}
		h, err := o.e.res.Alloc(residency.Request{Shape: p.shape, Scope: residency.Persistent})
		if err == nil {
			err = h.Zero()
		}
		if err != nil {
			return nil, err
		}
		s[i] = &Tensor{shape: p.Shape(), dtype: h.Type(), handle: h, engine: o.e}
	}
	o.state[p] = s
	return s, nil
}

// slotNeed is n slots, all wanted, or (with only) just slot only.
func slotNeed(n int, only ...int) []bool {
	need := make([]bool, n)
	for i := range need {
		need[i] = len(only) == 0 || slices.Contains(only, i)
	}
	return need
}

// stateDict is a snapshot of the state tensors, named "state.<i>.<slot>"
// (i is the 1-based parameter position) as torch's optimizer state_dict
// names them, the first group's rates ("lr", "initial_lr") and every
// group (opts gives group g's settings): everything queued is computed
// first, so the values are those after the last step, and they are host
// copies, which later steps do not change.
func (o *optimizer) stateDict(slotNames []string, opts func(g int) any) (OptimizerState, error) {
	if err := o.realized(); err != nil {
		return OptimizerState{}, fmt.Errorf("state_dict: %w", err)
	}
	out := map[string]*Tensor{}
	for i, p := range o.params {
		if !o.live[p] {
			continue
		}
		for j, t := range o.state[p] {
			if t == nil {
				continue
			}
			h, err := t.ToHost()
			if err != nil {
				return OptimizerState{}, fmt.Errorf("state_dict: %w", err)
			}
			out[fmt.Sprintf("state.%d.%s", i+1, slotNames[j])] = h
		}
	}
	first := o.groups[0].rate
	nums := map[string]float64{"lr": first.LR()}
	if v, ok := first.InitialLR(); ok {
		nums["initial_lr"] = v
	}
	groups := make([]GroupState, len(o.groups))
	pos := 1
	for g, pg := range o.groups {
		gs := GroupState{LR: pg.rate.LR(), Options: opts(g)}
		gs.InitialLR, gs.HasInitialLR = pg.rate.InitialLR()
		for range pg.params {
			gs.Params = append(gs.Params, pos)
			pos++
		}
		groups[g] = gs
	}
	return OptimizerState{Tensors: out, Nums: nums, Groups: groups}, nil
}

// countedState is stateDict plus "step", the number of steps that ran,
// for the optimizers that count them (Adam's and the rules' bias
// corrections).
func (o *optimizer) countedState(slotNames []string, opts func(g int) any) (OptimizerState, error) {
	st, err := o.stateDict(slotNames, opts)
	if err != nil {
		return st, err
	}
	st.Nums["step"] = float64(o.steps)
	return st, nil
}

// loadCountedState is loadState for such an optimizer: "step", where
// given, must be a whole number >= 0 and becomes the step count.
func (o *optimizer) loadCountedState(slotNames []string, st OptimizerState, setOpts func(g int, opts any) (func(), error)) error {
	s, hasStep := st.Nums["step"]
	if hasStep && (s < 0 || s != math.Trunc(s) || math.IsInf(s, 0) || s > 1<<53) {
		return argErrorf("load_state_dict: step must be an integer >= 0, got %g", s)
	}
	if err := o.loadState(slotNames, st, setOpts, "step"); err != nil {
		return err
	}
	if hasStep {
		o.steps = int(s)
	}
	return nil
}

// loadState copies saved state tensors into the optimizer's own and
// restores every group's rates (initial_lr too: absent, it is unset, as
// torch's param_groups are replaced whole) and settings. extra are the
// optimizer's own number keys, checked by the caller; setOpts checks group
// g's saved settings and returns what sets them. With groups, the saved
// groups' parameter positions map the saved state onto this optimizer's
// parameters, group by group and in order, as torch's load_state_dict
// does; without, the positions are this optimizer's. Nothing changes
// unless everything checks.
func (o *optimizer) loadState(slotNames []string, st OptimizerState, setOpts func(g int, opts any) (func(), error), extra ...string) error {
	const fn = "load_state_dict"
	if err := o.realized(); err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	nums := st.Nums
	for k := range nums {
		if k != "lr" && k != "initial_lr" && !slices.Contains(extra, k) {
			return argErrorf("%s: unexpected entry %q", fn, k)
		}
	}
	lr, hasLR := nums["lr"]
	if hasLR {
		if err := checkRate(fn, "lr", lr); err != nil {
			return err
		}
	}
	initial, hasInitial := nums["initial_lr"]
	if hasInitial {
		if err := checkRate(fn, "initial_lr", initial); err != nil {
			return err
		}
	}
	// byID maps a saved position to the parameter it now is.
	byID := map[int]*Tensor{}
	var commits []func()
	type rates struct {
		lr, initial       float64
		hasLR, hasInitial bool
	}
	newRates := make([]rates, len(o.groups))
	if st.Groups == nil {
		if len(o.groups) > 1 {
			return argErrorf("%s: the state has no param_groups, this optimizer has %d parameter groups", fn, len(o.groups))
		}
		for i, p := range o.params {
			byID[i+1] = p
		}
		newRates[0] = rates{lr, initial, hasLR, hasInitial}
	} else {
		if len(st.Groups) != len(o.groups) {
			return argErrorf("%s: the state has %d parameter groups, this optimizer has %d", fn, len(st.Groups), len(o.groups))
		}
		for g, gs := range st.Groups {
			if len(gs.Params) != len(o.groups[g].params) {
				return argErrorf("%s: parameter group %d of the state has %d parameters, this optimizer's has %d", fn, g+1, len(gs.Params), len(o.groups[g].params))
			}
			for k, id := range gs.Params {
				if id < 1 {
					return argErrorf("%s: parameter group %d: parameter positions are integers >= 1, got %d", fn, g+1, id)
				}
				if _, dup := byID[id]; dup {
					return argErrorf("%s: parameter %d appears twice in the state's param_groups", fn, id)
				}
				byID[id] = o.groups[g].params[k]
			}
			what := fmt.Sprintf("param_groups[%d].lr", g+1)
			if err := checkRate(fn, what, gs.LR); err != nil {
				return err
			}
			if gs.HasInitialLR {
				if err := checkRate(fn, fmt.Sprintf("param_groups[%d].initial_lr", g+1), gs.InitialLR); err != nil {
					return err
				}
			}
			if gs.Options != nil {
				commit, err := setOpts(g, gs.Options)
				if err != nil {
					return fmt.Errorf("%s: parameter group %d: %w", fn, g+1, err)
				}
				commits = append(commits, commit)
			}
			newRates[g] = rates{gs.LR, gs.InitialLR, true, gs.HasInitialLR}
		}
		// The flat "lr" and "initial_lr" are group 1's: they must agree.
		g1 := st.Groups[0]
		if hasLR && lr != g1.LR {
			return argErrorf("%s: lr %g differs from param_groups[1].lr %g", fn, lr, g1.LR)
		}
		if hasInitial && (!g1.HasInitialLR || initial != g1.InitialLR) {
			return argErrorf("%s: initial_lr %g differs from param_groups[1].initial_lr", fn, initial)
		}
	}
	known := map[string]bool{}
	type copyOf struct {
		p   *Tensor
		j   int
		src *Tensor
		key string
	}
	var copies []copyOf
	ids := make([]int, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := byID[id]
		for j, name := range slotNames {
			key := fmt.Sprintf("state.%d.%s", id, name)
			src, ok := st.Tensors[key]
			if !ok {
				continue
			}
			known[key] = true
			if !sameShape(src.shape, p.shape) {
				return shapeErrorf("%s: %s has shape %s, its parameter has %s", fn, key, ShapeString(src.shape), ShapeString(p.shape))
			}
			copies = append(copies, copyOf{p, j, src, key})
		}
	}
	for k := range st.Tensors {
		if !known[k] {
			return argErrorf("%s: unexpected entry %q", fn, k)
		}
	}
	for _, c := range copies {
		st, err := o.slots(c.p, slotNeed(len(slotNames), c.j))
		if err != nil {
			return err
		}
		if err := o.e.Assign(st[c.j], c.src); err != nil {
			return fmt.Errorf("%s: %s: %w", fn, c.key, err)
		}
		o.live[c.p] = true
	}
	for g, r := range newRates {
		rate := o.groups[g].rate
		if r.hasLR {
			rate.set(r.lr)
		}
		rate.initial, rate.hasInitial = r.initial, r.hasInitial
	}
	for _, c := range commits {
		c()
	}
	// The copies run now: a load is whole once it returns.
	if err := o.e.Realize(); err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	return nil
}

// prepare allocates, for every parameter with a gradient, the state
// tensors a step needs (need(g): which slots group g uses), before anything
// is queued: a step that cannot get its memory fails whole and changes
// nothing. It returns, per group, the parameters with a gradient, and the
// parameters whose state the step starts (momentum starts from the first
// gradient; moments from zero). A slot a live parameter's group takes up
// later (momentum turned on) starts at zero.
func (o *optimizer) prepare(need func(g int) []bool) (withGrad [][]*Tensor, fresh []*Tensor, err error) {
	o.settle()
	var allocated []*Tensor
	withGrad = make([][]*Tensor, len(o.groups))
	for g, pg := range o.groups {
		want := need(g)
		if !slices.Contains(want, true) {
			withGrad[g] = withGradient(pg.params)
			continue
		}
		for _, p := range pg.params {
			if p.Grad() == nil {
				continue
			}
			withGrad[g] = append(withGrad[g], p)
			st, had := o.state[p]
			if !o.live[p] {
				fresh = append(fresh, p)
			}
			if had && !o.live[p] {
				// Allocated by a step that did not run (a cancelled compute
				// may have written part of it): zero again.
				for _, t := range st {
					if t == nil || t.handle == nil {
						continue
					}
					if err := t.handle.Zero(); err != nil {
						return nil, nil, fmt.Errorf("optimizer step: %w", err)
					}
				}
			}
			if _, err := o.slots(p, want); err != nil {
				for _, q := range allocated { // give back what this step allocated
					delete(o.state, q)
				}
				return nil, nil, fmt.Errorf("optimizer step: %w", err)
			}
			if !had {
				allocated = append(allocated, p)
			}
		}
	}
	return withGrad, fresh, nil
}

func withGradient(ps []*Tensor) []*Tensor {
	var out []*Tensor
	for _, p := range ps {
		if p.Grad() != nil {
			out = append(out, p)
		}
	}
	return out
}

// noneToUpdate reports whether no group has a parameter to update.
func noneToUpdate(withGrad [][]*Tensor) bool {
	for _, ps := range withGrad {
		if len(ps) > 0 {
			return false
		}
	}
	return true
}
