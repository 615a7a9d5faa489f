package core

import (
	"errors"
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

// SGDOptions are torch.optim.SGD's.
type SGDOptions struct {
	LR, Momentum, Dampening, WeightDecay float32
	Nesterov                             bool
}

// SGD is stochastic gradient descent with momentum, Nesterov and weight decay.
type SGD struct {
	optimizer
	Opts SGDOptions
}

// NewSGD makes an SGD optimizer; host parameters move to the persistent pool.
func NewSGD(e *Engine, params []*Tensor, opts SGDOptions) (*SGD, error) {
	if err := checkRate("sgd", "lr", float64(opts.LR)); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name   string
		v      float32
		nonNeg bool
	}{{"momentum", opts.Momentum, true}, {"dampening", opts.Dampening, false}, {"weight_decay", opts.WeightDecay, true}} {
		if err := checkFinite("sgd", c.name, float64(c.v), c.nonNeg); err != nil {
			return nil, err
		}
	}
	if opts.Nesterov && (opts.Momentum == 0 || opts.Dampening != 0) {
		return nil, argErrorf("sgd: nesterov needs momentum > 0 and dampening = 0")
	}
	s := &SGD{Opts: opts}
	o, err := newOptimizer(e, params, &s.Opts.LR)
	if err != nil {
		return nil, err
	}
	s.optimizer = o
	return s, nil
}

// Step updates every parameter that has a gradient.
func (s *SGD) Step() error {
	e, o := s.e, s.Opts
	if skip, err := e.checkGrads(s.params); skip || err != nil {
		return err
	}
	slots := 0
	if o.Momentum != 0 {
		slots = 1
	}
	withGrad, fresh, err := s.prepare(slots)
	if err != nil || len(withGrad) == 0 {
		return err
	}
	first := map[*Tensor]bool{}
	for _, p := range fresh {
		first[p] = true
	}
	err = e.NoGrad(func() error {
		for _, p := range withGrad {
			d := p.Grad()
			var err error
			if o.WeightDecay != 0 {
				if d, err = e.axpby(1, d, o.WeightDecay, p); err != nil {
					return err
				}
			}
			if o.Momentum != 0 {
				buf := s.state[p][0]
				nb := d
				if !first[p] {
					if nb, err = e.axpby(o.Momentum, buf, 1-o.Dampening, d); err != nil {
						return err
					}
				}
				if err := e.writeInPlace(buf, nb); err != nil {
					return err
				}
				if o.Nesterov {
					d, err = e.axpby(1, d, o.Momentum, buf)
				} else {
					d = buf
				}
				if err != nil {
					return err
				}
			}
			np, err := e.axpby(1, p, -o.LR, d)
			if err != nil {
				return err
			}
			if err := e.writeInPlace(p, np); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.queue(fresh)
}

// StateDict is a snapshot of the optimizer's state (see stateDict): the
// momentum buffers, lr and initial_lr.
func (s *SGD) StateDict() (map[string]*Tensor, map[string]float64, error) {
	return s.stateDict([]string{"momentum_buffer"})
}

// LoadStateDict restores what StateDict returned.
func (s *SGD) LoadStateDict(tensors map[string]*Tensor, nums map[string]float64) error {
	return s.loadStateDict([]string{"momentum_buffer"}, tensors, nums)
}

// AdamOptions are torch.optim.Adam's; Decoupled makes it AdamW.
type AdamOptions struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Decoupled                          bool
}

// Adam is Adam, or AdamW when Opts.Decoupled.
type Adam struct {
	optimizer
	Opts AdamOptions
}

// NewAdam makes an Adam(W) optimizer; host parameters move to the persistent pool.
func NewAdam(e *Engine, params []*Tensor, opts AdamOptions) (*Adam, error) {
	fn := "adam"
	if opts.Decoupled {
		fn = "adamw"
	}
	if err := checkRate(fn, "lr", float64(opts.LR)); err != nil {
		return nil, err
	}
	for i, b := range []float32{opts.Beta1, opts.Beta2} {
		if !(b >= 0 && b < 1) { // NaN fails too
			return nil, argErrorf("%s: beta %d must be in [0, 1), got %g", fn, i+1, b)
		}
	}
	if err := checkFinite(fn, "eps", float64(opts.Eps), true); err != nil {
		return nil, err
	}
	if err := checkFinite(fn, "weight_decay", float64(opts.WeightDecay), true); err != nil {
		return nil, err
	}
	a := &Adam{Opts: opts}
	o, err := newOptimizer(e, params, &a.Opts.LR)
	if err != nil {
		return nil, err
	}
	a.optimizer = o
	return a, nil
}

// Step updates every parameter that has a gradient. An f32 parameter takes
// ggml's fused AdamW kernel: one node that updates weight and moments in
// place, with no temporaries; other dtypes take the same update built from
// elementwise ops. The step count (bias correction) counts the steps that
// ran: one cancelled or dropped before it ran is not counted.
func (a *Adam) Step() error {
	e, o := a.e, a.Opts
	if skip, err := e.checkGrads(a.params); skip || err != nil {
		return err
	}
	withGrad, fresh, err := a.prepare(2)
	if err != nil || len(withGrad) == 0 {
		return err
	}
	n := a.steps + len(a.queued) + 1 // steps ran, queued, and this one
	bc1 := 1 - math.Pow(float64(o.Beta1), float64(n))
	bc2 := 1 - math.Pow(float64(o.Beta2), float64(n))
	err = e.NoGrad(func() error {
		var hyper *Tensor // the fused kernel's 7 numbers, made once per step
		for _, p := range withGrad {
			g := p.Grad()
			var err error
			if o.WeightDecay != 0 && !o.Decoupled {
				if g, err = e.axpby(1, g, o.WeightDecay, p); err != nil {
					return err
				}
			}
			st := a.state[p]
			if p.dtype != ggmlcgo.F32 {
				if err := a.composite(p, g, st[0], st[1], bc1, bc2); err != nil {
					return err
				}
				continue
			}
			if hyper == nil {
				wd := float32(0)
				if o.Decoupled {
					wd = o.WeightDecay
				}
				if hyper, err = e.constants([]float32{o.LR, o.Beta1, o.Beta2, o.Eps, wd, float32(1 / bc1), float32(1 / bc2)}); err != nil {
					return err
				}
			}
			if p.pending { // the fused kernel needs the weight itself, not a queued update of it
				if err := a.realized(); err != nil {
					return err
				}
			}
			err = e.inPlace(p, []*Tensor{g, st[0], st[1], hyper}, func(c ctx, base node, in []node) (node, error) {
				return c.OptStepAdamW(base, in[0], in[1], in[2], in[3])
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return a.queue(fresh)
}

// composite is the Adam update made of elementwise ops (for f16/bf16
// weights, whose gradients and moments are f32).
func (a *Adam) composite(p, g, m, v *Tensor, bc1, bc2 float64) error {
	e, o := a.e, a.Opts
	nm, err := e.axpby(o.Beta1, m, 1-o.Beta1, g)
	if err != nil {
		return err
	}
	g2, err := e.Mul(g, g)
	if err != nil {
		return err
	}
	nv, err := e.axpby(o.Beta2, v, 1-o.Beta2, g2)
	if err != nil {
		return err
	}
	if err := e.writeInPlace(m, nm); err != nil {
		return err
	}
	if err := e.writeInPlace(v, nv); err != nil {
		return err
	}
	// p -= lr * (m/bc1) / (sqrt(v/bc2) + eps)
	den, err := e.Scale(v, float32(1/bc2))
	if err == nil {
		den, err = e.Sqrt(den)
	}
	if err == nil {
		den, err = e.AddScalar(den, o.Eps)
	}
	var step *Tensor
	if err == nil {
		step, err = e.Div(m, den)
	}
	if err != nil {
		return err
	}
	keep := float32(1)
	if o.Decoupled {
		keep = 1 - o.LR*o.WeightDecay
	}
	np, err := e.axpby(keep, p, -o.LR/float32(bc1), step)
	if err != nil {
		return err
	}
	return e.writeInPlace(p, np)
}

// StateDict is a snapshot of the optimizer's state (see stateDict): the
// moments, the number of steps that ran, lr and initial_lr.
func (a *Adam) StateDict() (map[string]*Tensor, map[string]float64, error) {
	tensors, nums, err := a.stateDict([]string{"exp_avg", "exp_avg_sq"})
	if err != nil {
		return nil, nil, err
	}
	nums["step"] = float64(a.steps)
	return tensors, nums, nil
}

// LoadStateDict restores what StateDict returned.
func (a *Adam) LoadStateDict(tensors map[string]*Tensor, nums map[string]float64) error {
	st, hasStep := nums["step"]
	if hasStep && (st < 0 || st != math.Trunc(st) || math.IsInf(st, 0) || st > 1<<53) {
		return argErrorf("load_state_dict: step must be an integer >= 0, got %g", st)
	}
	if err := a.loadStateDict([]string{"exp_avg", "exp_avg_sq"}, tensors, nums, "step"); err != nil {
		return err
	}
	if hasStep {
		a.steps = int(st)
	}
	return nil
}
