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
