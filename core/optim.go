package core

import (
	"errors"
	"fmt"
	"math"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Optimizers update parameters on the device, inside the step graph: each
// update is an in-place write into the parameter's persistent buffer, and
// their state (momentum, moments) lives in the persistent pool, allocated
// once. Step-dependent numbers (learning rate, bias corrections) are baked
// into the graph's ops, so a step uploads nothing.

type optimizer struct {
	e      *Engine
	params []*Tensor
	state  map[*Tensor][]*Tensor
}

func newOptimizer(e *Engine, params []*Tensor) (optimizer, error) {
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
	return optimizer{e: e, params: params, state: map[*Tensor][]*Tensor{}}, nil
}

// Params are the optimized tensors.
func (o *optimizer) Params() []*Tensor { return o.params }

// ZeroGrad clears the parameters' gradients.
func (o *optimizer) ZeroGrad() { ZeroGrad(o.params) }

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

// stateDict names the state tensors "state.<i>.<slot>" (i is the 1-based
// parameter position), as torch's optimizer state_dict does.
func (o *optimizer) stateDict(slotNames []string) map[string]*Tensor {
	out := map[string]*Tensor{}
	for i, p := range o.params {
		for j, t := range o.state[p] {
			out[fmt.Sprintf("state.%d.%s", i+1, slotNames[j])] = t
		}
	}
	return out
}

// loadStateDict copies saved state tensors into the optimizer's own.
func (o *optimizer) loadStateDict(slotNames []string, tensors map[string]*Tensor) error {
	known := map[string]bool{}
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
			st, err := o.slots(p, len(slotNames))
			if err != nil {
				return err
			}
			if err := o.e.Assign(st[j], src); err != nil {
				return fmt.Errorf("load_state_dict: %s: %w", key, err)
			}
		}
	}
	for k := range tensors {
		if !known[k] {
			return fmt.Errorf("load_state_dict: unexpected entry %q", k)
		}
	}
	return nil
}

// prepare allocates, for every parameter with a gradient, the n state
// tensors a step needs, before anything is queued: a step that cannot get
// its memory fails whole and changes nothing. It reports which parameters
// had no state before (momentum starts from the first gradient).
func (o *optimizer) prepare(n int) (map[*Tensor]bool, error) {
	fresh := map[*Tensor]bool{}
	for _, p := range o.params {
		if p.Grad() == nil || n == 0 {
			continue
		}
		if _, ok := o.state[p]; !ok {
			fresh[p] = true
		}
		if _, err := o.slots(p, n); err != nil {
			for q := range fresh { // give back what this step allocated
				delete(o.state, q)
			}
			return nil, fmt.Errorf("optimizer step: %w", err)
		}
	}
	return fresh, nil
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
	if opts.LR < 0 || opts.Momentum < 0 || opts.WeightDecay < 0 {
		return nil, argErrorf("sgd: lr, momentum and weight_decay must be >= 0 (got %g, %g, %g)", opts.LR, opts.Momentum, opts.WeightDecay)
	}
	if opts.Nesterov && (opts.Momentum == 0 || opts.Dampening != 0) {
		return nil, argErrorf("sgd: nesterov needs momentum > 0 and dampening = 0")
	}
	o, err := newOptimizer(e, params)
	if err != nil {
		return nil, err
	}
	return &SGD{optimizer: o, Opts: opts}, nil
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
	fresh, err := s.prepare(slots)
	if err != nil {
		return err
	}
	return e.NoGrad(func() error {
		for _, p := range s.params {
			d := p.Grad()
			if d == nil {
				continue
			}
			var err error
			if o.WeightDecay != 0 {
				if d, err = e.axpby(1, d, o.WeightDecay, p); err != nil {
					return err
				}
			}
			if o.Momentum != 0 {
				first := fresh[p]
				st, err := s.slots(p, 1)
				if err != nil {
					return err
				}
				buf := st[0]
				nb := d
				if !first {
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
}

// StateDict is the optimizer's state: tensors and numbers.
func (s *SGD) StateDict() (map[string]*Tensor, map[string]float64) {
	return s.stateDict([]string{"momentum_buffer"}), map[string]float64{"lr": float64(s.Opts.LR)}
}

// LoadStateDict restores what StateDict returned.
func (s *SGD) LoadStateDict(tensors map[string]*Tensor, nums map[string]float64) error {
	if lr, ok := nums["lr"]; ok {
		s.Opts.LR = float32(lr)
	}
	return s.loadStateDict([]string{"momentum_buffer"}, tensors)
}

// AdamOptions are torch.optim.Adam's; Decoupled makes it AdamW.
type AdamOptions struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Decoupled                          bool
}

// Adam is Adam, or AdamW when Opts.Decoupled.
type Adam struct {
	optimizer
	Opts  AdamOptions
	steps int
}

// NewAdam makes an Adam(W) optimizer; host parameters move to the persistent pool.
func NewAdam(e *Engine, params []*Tensor, opts AdamOptions) (*Adam, error) {
	if opts.LR < 0 || opts.Eps < 0 || opts.WeightDecay < 0 || opts.Beta1 < 0 || opts.Beta1 >= 1 || opts.Beta2 < 0 || opts.Beta2 >= 1 {
		return nil, argErrorf("adam: need lr, eps, weight_decay >= 0 and betas in [0, 1) (got lr %g, betas %g %g, eps %g, weight_decay %g)",
			opts.LR, opts.Beta1, opts.Beta2, opts.Eps, opts.WeightDecay)
	}
	o, err := newOptimizer(e, params)
	if err != nil {
		return nil, err
	}
	return &Adam{optimizer: o, Opts: opts}, nil
}

// Step updates every parameter that has a gradient. An f32 parameter takes
// ggml's fused AdamW kernel: one node that updates weight and moments in
// place, with no temporaries; other dtypes take the same update built from
// elementwise ops.
func (a *Adam) Step() error {
	e, o := a.e, a.Opts
	if skip, err := e.checkGrads(a.params); skip || err != nil {
		return err
	}
	if _, err := a.prepare(2); err != nil {
		return err
	}
	a.steps++
	bc1 := 1 - math.Pow(float64(o.Beta1), float64(a.steps))
	bc2 := 1 - math.Pow(float64(o.Beta2), float64(a.steps))
	return e.NoGrad(func() error {
		var hyper *Tensor // the fused kernel's 7 numbers, made once per step
		for _, p := range a.params {
			g := p.Grad()
			if g == nil {
				continue
			}
			var err error
			if o.WeightDecay != 0 && !o.Decoupled {
				if g, err = e.axpby(1, g, o.WeightDecay, p); err != nil {
					return err
				}
			}
			st, err := a.slots(p, 2)
			if err != nil {
				return err
			}
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
				if err := e.Realize(); err != nil {
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

// StateDict is the optimizer's state: moments, step count and rate.
func (a *Adam) StateDict() (map[string]*Tensor, map[string]float64) {
	return a.stateDict([]string{"exp_avg", "exp_avg_sq"}), map[string]float64{"lr": float64(a.Opts.LR), "step": float64(a.steps)}
}

// LoadStateDict restores what StateDict returned.
func (a *Adam) LoadStateDict(tensors map[string]*Tensor, nums map[string]float64) error {
	if lr, ok := nums["lr"]; ok {
		a.Opts.LR = float32(lr)
	}
	if st, ok := nums["step"]; ok {
		if st < 0 || st != math.Trunc(st) {
			return fmt.Errorf("load_state_dict: bad step %g", st)
		}
		a.steps = int(st)
	}
	return a.loadStateDict([]string{"exp_avg", "exp_avg_sq"}, tensors)
}
