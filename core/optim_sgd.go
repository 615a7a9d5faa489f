package core

// SGD, as torch.optim.SGD: momentum, dampening, Nesterov, weight decay.

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
