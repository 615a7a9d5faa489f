package core

import (
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// Adam and AdamW, as torch.optim's: the fused ggml kernel for f32 weights,
// composed ops otherwise.

// AdamOptions are torch.optim.Adam's; Decoupled makes it AdamW.
type AdamOptions struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Decoupled                          bool
}

// AdamGroup is one parameter group: its parameters and its settings (the
// defaults overridden by the group's own, as torch merges them).
type AdamGroup struct {
	Params []*Tensor
	Opts   AdamOptions
}

// Adam is Adam, or AdamW when made Decoupled.
type Adam struct {
	optimizer
	decoupled bool
	// opts[g] are group g's settings; opts[g].LR is what its rate drives
	// (pointers: a group added later must not move the others' LR).
	opts []*AdamOptions
}

func (a *Adam) name() string {
	if a.decoupled {
		return "adamw"
	}
	return "adam"
}

// checkAdam refuses settings torch refuses, and NaN or ±Inf ones.
func checkAdam(fn string, opts AdamOptions) error {
	for i, b := range []float32{opts.Beta1, opts.Beta2} {
		if !(b >= 0 && b < 1) { // NaN fails too
			return argErrorf("%s: beta %d must be in [0, 1), got %g", fn, i+1, b)
		}
	}
	if err := checkFinite(fn, "eps", float64(opts.Eps), true); err != nil {
		return err
	}
	return checkFinite(fn, "weight_decay", float64(opts.WeightDecay), true)
}

// NewAdam makes an Adam(W) optimizer of one group; host parameters move to
// the persistent pool.
func NewAdam(e *Engine, params []*Tensor, opts AdamOptions) (*Adam, error) {
	return NewAdamGroups(e, []AdamGroup{{Params: params, Opts: opts}}, opts.Decoupled)
}

// NewAdamGroups makes an Adam optimizer (AdamW if decoupled, whatever the
// groups' Decoupled says) of parameter groups: none empty, no parameter in
// two.
func NewAdamGroups(e *Engine, groups []AdamGroup, decoupled bool) (*Adam, error) {
	a := &Adam{decoupled: decoupled, opts: make([]*AdamOptions, len(groups))}
	fn := a.name()
	params := make([][]*Tensor, len(groups))
	lrs := make([]*float32, len(groups))
	for g, gr := range groups {
		if err := checkRate(fn, "lr", float64(gr.Opts.LR)); err != nil {
			return nil, err
		}
		if err := checkAdam(fn, gr.Opts); err != nil {
			return nil, err
		}
		gr.Opts.Decoupled = decoupled
		o := gr.Opts
		a.opts[g], params[g], lrs[g] = &o, gr.Params, &o.LR
	}
	o, err := newOptimizer(e, fn, params, lrs)
	if err != nil {
		return nil, err
	}
	a.optimizer = o
	return a, nil
}

// GroupOptions are group g's settings (g 0-based), LR the float32 its
// rate drives.
func (a *Adam) GroupOptions(g int) AdamOptions { return *a.opts[g] }

// SetGroupOptions sets group g's settings but its rate (opts.LR is not
// used: the rate is set through Rates()[g]; nor Decoupled: Adam stays
// Adam).
func (a *Adam) SetGroupOptions(g int, opts AdamOptions) error {
	if err := checkAdam(a.name(), opts); err != nil {
		return err
	}
	opts.LR, opts.Decoupled = a.opts[g].LR, a.decoupled
	*a.opts[g] = opts
	return nil
}

// AddGroup adds a parameter group, as torch's add_param_group: gr.Opts
// are its settings (the caller fills them from the defaults), and its
// parameters must be in no other group. Only before the first step: torch
// counts Adam's steps per parameter, gglua per optimizer, so parameters
// added later would take the wrong bias correction; that is refused.
func (a *Adam) AddGroup(gr AdamGroup) error {
	fn := a.name() + ": add_param_group"
	a.settle()
	if n := a.steps + len(a.queued); n > 0 {
		return argErrorf("%s: a group can only be added before the first step (%d steps taken): gglua counts Adam's steps per optimizer, not per parameter as torch, so the new parameters' bias correction would be wrong", fn, n)
	}
	if err := checkRate(fn, "lr", float64(gr.Opts.LR)); err != nil {
		return err
	}
	if err := checkAdam(fn, gr.Opts); err != nil {
		return err
	}
	o := gr.Opts
	o.Decoupled = a.decoupled
	if err := a.addGroup(fn, gr.Params, &o.LR); err != nil {
		return err
	}
	a.opts = append(a.opts, &o)
	return nil
}

// Step updates every parameter that has a gradient, each with its group's
// settings. An f32 parameter takes ggml's fused AdamW kernel: one node that
// updates weight and moments in place, with no temporaries; other dtypes
// take the same update built from elementwise ops. The step count (bias
// correction) counts the steps that ran: one cancelled or dropped before
// it ran is not counted.
func (a *Adam) Step() error {
	e := a.e
	if skip, err := e.checkGrads(a.params); skip || err != nil {
		return err
	}
	withGrad, fresh, err := a.prepare(func(int) []bool { return slotNeed(2) })
	if err != nil || noneToUpdate(withGrad) {
		return err
	}
	n := a.steps + len(a.queued) + 1 // steps ran, queued, and this one
	err = e.NoGrad(func() error {
		for g, ps := range withGrad {
			if err := a.stepGroup(ps, *a.opts[g], n); err != nil {
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

// stepGroup queues the updates of one group's parameters, at step n.
func (a *Adam) stepGroup(ps []*Tensor, o AdamOptions, n int) error {
	e := a.e
	bc1 := 1 - math.Pow(float64(o.Beta1), float64(n))
	bc2 := 1 - math.Pow(float64(o.Beta2), float64(n))
	var hyper *Tensor // the fused kernel's 7 numbers, made once per group and step
	for _, p := range ps {
		g := p.Grad()
		var err error
		if o.WeightDecay != 0 && !o.Decoupled {
			if g, err = e.axpby(1, g, o.WeightDecay, p); err != nil {
				return err
			}
		}
		st := a.state[p]
		if p.dtype != ggmlcgo.F32 {
			if err := a.composite(p, g, st[0], st[1], o, bc1, bc2); err != nil {
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
		err = a.stepInPlace(p, []*Tensor{g, st[0], st[1], hyper}, func(c ctx, base node, in []node) (node, error) {
			if e.backend.IsCPU() && !forceGGMLAdamW && in[1].IsContiguous() && in[2].IsContiguous() && in[3].IsContiguous() {
				// gglua's kernel (adamw.c): ggml's update, vectorised.
				if gp, err := e.packed(c, in[0]); err == nil {
					return c.AdamWCPU(base, gp, in[1], in[2], in[3])
				}
			}
			return c.OptStepAdamW(base, in[0], in[1], in[2], in[3])
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// composite is the Adam update made of elementwise ops (for f16/bf16
// weights, whose gradients and moments are f32).
func (a *Adam) composite(p, g, m, v *Tensor, o AdamOptions, bc1, bc2 float64) error {
	e := a.e
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

var adamSlots = []string{"exp_avg", "exp_avg_sq"}

// State is a snapshot of the optimizer's state (see stateDict): the
// moments, the number of steps that ran, group 1's lr and initial_lr, and
// every group.
func (a *Adam) State() (OptimizerState, error) {
	return a.countedState(adamSlots, func(g int) any { return *a.opts[g] })
}

// LoadState restores what State returned (or its older flat form, for an
// optimizer of one group), settings included.
func (a *Adam) LoadState(st OptimizerState) error {
	return a.loadCountedState(adamSlots, st, func(g int, v any) (func(), error) {
		o, ok := v.(AdamOptions)
		if !ok {
			return nil, argErrorf("the settings are a %T, expected Adam's", v)
		}
		if err := checkAdam(a.name(), o); err != nil {
			return nil, err
		}
		return func() { o.LR, o.Decoupled = a.opts[g].LR, a.decoupled; *a.opts[g] = o }, nil
	})
}

// StateDict is State without the groups: the moments, the number of steps
// that ran, lr and initial_lr.
func (a *Adam) StateDict() (map[string]*Tensor, map[string]float64, error) {
	st, err := a.State()
	return st.Tensors, st.Nums, err
}

// LoadStateDict restores what StateDict returned (an optimizer of one group).
func (a *Adam) LoadStateDict(tensors map[string]*Tensor, nums map[string]float64) error {
	return a.LoadState(OptimizerState{Tensors: tensors, Nums: nums})
}

// forceGGMLAdamW makes tests take ggml's AdamW step on the CPU (the one
// devices run).
var forceGGMLAdamW = false
