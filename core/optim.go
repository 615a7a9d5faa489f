package core

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gglua/gglua/core/residency"
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
// written only once it knows the step ran: each step queues a one-number
// witness beside its updates, computed if and only if they were.

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

type optimizer struct {
	e      *Engine
	params []*Tensor
	state  map[*Tensor][]*Tensor
	// live: the parameter's state holds what a step wrote (one that ran,
	// or one still queued); state that is allocated but not live is zero
	// and the next step starts it afresh.
	live   map[*Tensor]bool
	rate   Rate
	queued []queuedStep // steps queued whose fate is not known yet
	steps  int          // steps that ran
}

// queuedStep is a step queued but not yet known to have run.
type queuedStep struct {
	witness *Tensor   // a pending op result queued with the step's updates
	fresh   []*Tensor // parameters whose state the step writes first
}

func newOptimizer(e *Engine, params []*Tensor, lr *float32) (optimizer, error) {
	if len(params) == 0 {
		return optimizer{}, errors.New("optimizer: no parameters given")
	}
	for i, p := range params {
		if !p.IsLeaf() {
			return optimizer{}, fmt.Errorf("optimizer: parameter %d is not a leaf tensor", i+1)
		}
		p.requiresGrad = true
		if err := p.MoveToDevice(e, residency.Persistent); err != nil { // weights stay resident
			return optimizer{}, fmt.Errorf("optimizer: parameter %d: %w", i+1, err)
		}
	}
	return optimizer{e: e, params: params, state: map[*Tensor][]*Tensor{}, live: map[*Tensor]bool{},
		rate: Rate{lr: lr, lr64: float64(*lr)}}, nil
}

// Params are the optimized tensors.
func (o *optimizer) Params() []*Tensor { return o.params }

// Rate is the optimizer's learning rate, as schedulers drive it.
func (o *optimizer) Rate() *Rate { return &o.rate }

// ZeroGrad clears the parameters' gradients.
func (o *optimizer) ZeroGrad() { ZeroGrad(o.params) }

// settle learns the fate of queued steps: a step whose witness was
// computed ran and is counted; one whose pending work was dropped (a
// cancelled compute, DropPending, a reset of the pass pool) did not, and
// the state it was to write first is fresh again.
func (o *optimizer) settle() {
	gen := o.e.res.Gen(residency.Pass)
	var still []queuedStep
	for _, q := range o.queued {
		w := q.witness
		switch {
		case w.pending && w.passGen == gen:
			still = append(still, q)
		case w.pending || w.dropped || w.handle == nil:
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
	w, err := o.e.constants([]float32{0})
	if err != nil {
		return err
	}
	for _, p := range fresh {
		o.live[p] = true
	}
	o.queued = append(o.queued, queuedStep{witness: w, fresh: fresh})
	o.settle() // an eager engine has run it already
	return nil
}

// realized computes pending work (a queued step included) and settles.
func (o *optimizer) realized() error {
	err := o.e.Realize()
	o.settle()
	return err
}

// slots returns p's n state tensors, allocated (zeroed, on the device) in
// the persistent pool the first time.
func (o *optimizer) slots(p *Tensor, n int) ([]*Tensor, error) {
	if s, ok := o.state[p]; ok {
		return s, nil
	}
	s := make([]*Tensor, n)
	for i := range s {
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

// stateDict is a snapshot of the state tensors, named "state.<i>.<slot>"
// (i is the 1-based parameter position) as torch's optimizer state_dict
// names them, and the rates: everything queued is computed first, so the
// values are those after the last step, and they are host copies, which
// later steps do not change.
func (o *optimizer) stateDict(slotNames []string) (map[string]*Tensor, map[string]float64, error) {
	if err := o.realized(); err != nil {
		return nil, nil, fmt.Errorf("state_dict: %w", err)
	}
	out := map[string]*Tensor{}
	for i, p := range o.params {
		if !o.live[p] {
			continue
		}
		for j, t := range o.state[p] {
			h, err := t.ToHost()
			if err != nil {
				return nil, nil, fmt.Errorf("state_dict: %w", err)
			}
			out[fmt.Sprintf("state.%d.%s", i+1, slotNames[j])] = h
		}
	}
	nums := map[string]float64{"lr": o.rate.LR()}
	if v, ok := o.rate.InitialLR(); ok {
		nums["initial_lr"] = v
	}
	return out, nums, nil
}

// loadStateDict copies saved state tensors into the optimizer's own and
// restores the rates (initial_lr too: absent, it is unset, as torch's
// param_groups are replaced whole). extra are the optimizer's own number
// keys, checked by the caller.
func (o *optimizer) loadStateDict(slotNames []string, tensors map[string]*Tensor, nums map[string]float64, extra ...string) error {
	if err := o.realized(); err != nil {
		return fmt.Errorf("load_state_dict: %w", err)
	}
	for k := range nums {
		if k != "lr" && k != "initial_lr" && !slices.Contains(extra, k) {
			return argErrorf("load_state_dict: unexpected entry %q", k)
		}
	}
	lr, hasLR := nums["lr"]
	if hasLR {
		if err := checkRate("load_state_dict", "lr", lr); err != nil {
			return err
		}
	}
	initial, hasInitial := nums["initial_lr"]
	if hasInitial {
		if err := checkRate("load_state_dict", "initial_lr", initial); err != nil {
			return err
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
	for i, p := range o.params {
		for j, name := range slotNames {
			key := fmt.Sprintf("state.%d.%s", i+1, name)
			src, ok := tensors[key]
			if !ok {
				continue
			}
			known[key] = true
			if !sameShape(src.shape, p.shape) {
				return shapeErrorf("load_state_dict: %s has shape %s, parameter %d has %s", key, ShapeString(src.shape), i+1, ShapeString(p.shape))
			}
			copies = append(copies, copyOf{p, j, src, key})
		}
	}
	for k := range tensors {
		if !known[k] {
			return argErrorf("load_state_dict: unexpected entry %q", k)
		}
	}
	for _, c := range copies {
		st, err := o.slots(c.p, len(slotNames))
		if err != nil {
			return err
		}
		if err := o.e.Assign(st[c.j], c.src); err != nil {
			return fmt.Errorf("load_state_dict: %s: %w", c.key, err)
		}
		o.live[c.p] = true
	}
	if hasLR {
		o.rate.set(lr)
	}
	o.rate.initial, o.rate.hasInitial = initial, hasInitial
	// The copies run now: a load is whole once it returns.
	if err := o.e.Realize(); err != nil {
		return fmt.Errorf("load_state_dict: %w", err)
	}
	return nil
}

// prepare allocates, for every parameter with a gradient, the n state
// tensors a step needs, before anything is queued: a step that cannot get
// its memory fails whole and changes nothing. It returns the parameters
// with a gradient and those whose state the step starts (momentum starts
// from the first gradient; moments from zero).
func (o *optimizer) prepare(n int) (withGrad, fresh []*Tensor, err error) {
	o.settle()
	var allocated []*Tensor
	for _, p := range o.params {
		if p.Grad() == nil {
			continue
		}
		withGrad = append(withGrad, p)
		if n == 0 || o.live[p] {
			continue
		}
		fresh = append(fresh, p)
		st, had := o.state[p]
		if had {
			// Allocated by a step that did not run (a cancelled compute
			// may have written part of it): zero again.
			for _, t := range st {
				if err := t.handle.Zero(); err != nil {
					return nil, nil, fmt.Errorf("optimizer step: %w", err)
				}
			}
			continue
		}
		if _, err := o.slots(p, n); err != nil {
			for _, q := range allocated { // give back what this step allocated
				delete(o.state, q)
			}
			return nil, nil, fmt.Errorf("optimizer step: %w", err)
		}
		allocated = append(allocated, p)
	}
	return withGrad, fresh, nil
}
