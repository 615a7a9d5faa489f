package core

// SGD, as torch.optim.SGD: momentum, dampening, Nesterov, weight decay,
// each group with its own settings.

// SGDOptions are torch.optim.SGD's.
type SGDOptions struct {
	LR, Momentum, Dampening, WeightDecay float32
	Nesterov                             bool
}

// SGDGroup is one parameter group: its parameters and its settings (the
// defaults overridden by the group's own, as torch merges them).
type SGDGroup struct {
	Params []*Tensor
	Opts   SGDOptions
}

// SGD is stochastic gradient descent with momentum, Nesterov and weight decay.
type SGD struct {
	optimizer
	// opts[g] are group g's settings; opts[g].LR is what its rate drives
	// (pointers: a group added later must not move the others' LR).
	opts []*SGDOptions
}

// checkSGD refuses settings torch refuses, and NaN or ±Inf ones.
func checkSGD(fn string, opts SGDOptions) error {
	for _, c := range []struct {
		name   string
		v      float32
		nonNeg bool
	}{{"momentum", opts.Momentum, true}, {"dampening", opts.Dampening, false}, {"weight_decay", opts.WeightDecay, true}} {
		if err := checkFinite(fn, c.name, float64(c.v), c.nonNeg); err != nil {
			return err
		}
	}
	if opts.Nesterov && (opts.Momentum == 0 || opts.Dampening != 0) {
		return argErrorf("%s: nesterov needs momentum > 0 and dampening = 0", fn)
	}
	return nil
}

// NewSGD makes an SGD optimizer of one group; host parameters move to the
// persistent pool.
func NewSGD(e *Engine, params []*Tensor, opts SGDOptions) (*SGD, error) {
	return NewSGDGroups(e, []SGDGroup{{Params: params, Opts: opts}})
}

// NewSGDGroups makes an SGD optimizer of parameter groups: none empty, no
// parameter in two.
func NewSGDGroups(e *Engine, groups []SGDGroup) (*SGD, error) {
	s := &SGD{opts: make([]*SGDOptions, len(groups))}
	params := make([][]*Tensor, len(groups))
	lrs := make([]*float32, len(groups))
	for g, gr := range groups {
		if err := checkRate("sgd", "lr", float64(gr.Opts.LR)); err != nil {
			return nil, err
		}
		if err := checkSGD("sgd", gr.Opts); err != nil {
			return nil, err
		}
		o := gr.Opts
		s.opts[g], params[g], lrs[g] = &o, gr.Params, &o.LR
	}
	o, err := newOptimizer(e, "sgd", params, lrs)
	if err != nil {
		return nil, err
	}
	s.optimizer = o
	return s, nil
}

// GroupOptions are group g's settings (g 0-based), LR the float32 its
// rate drives.
func (s *SGD) GroupOptions(g int) SGDOptions { return *s.opts[g] }

// SetGroupOptions sets group g's settings but its rate (opts.LR is not
// used: the rate is set through Rates()[g]).
func (s *SGD) SetGroupOptions(g int, opts SGDOptions) error {
	if err := checkSGD("sgd", opts); err != nil {
		return err
	}
	opts.LR = s.opts[g].LR
	*s.opts[g] = opts
	return nil
}

// AddGroup adds a parameter group, as torch's add_param_group: gr.Opts
// are its settings (the caller fills them from the defaults), and its
// parameters must be in no other group. Its momentum buffers start with
// its first step, as torch's.
func (s *SGD) AddGroup(gr SGDGroup) error {
	const fn = "sgd: add_param_group"
	if err := checkRate(fn, "lr", float64(gr.Opts.LR)); err != nil {
		return err
	}
	if err := checkSGD(fn, gr.Opts); err != nil {
		return err
	}
	o := gr.Opts
	if err := s.addGroup(fn, gr.Params, &o.LR); err != nil {
		return err
	}
	s.opts = append(s.opts, &o)
	return nil
}

// Step updates every parameter that has a gradient, each with its group's
// settings.
func (s *SGD) Step() error {
	e := s.e
	if skip, err := e.checkGrads(s.params); skip || err != nil {
		return err
	}
	withGrad, fresh, err := s.prepare(func(g int) []bool { return []bool{s.opts[g].Momentum != 0} })
	if err != nil || noneToUpdate(withGrad) {
		return err
	}
	first := map[*Tensor]bool{}
	for _, p := range fresh {
		first[p] = true
	}
	err = e.NoGrad(func() error {
		for g, ps := range withGrad {
			o := *s.opts[g]
			for _, p := range ps {
				if err := s.update(p, o, first[p]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.queue(fresh)
}

// update queues one parameter's update (first: its momentum starts here).
func (s *SGD) update(p *Tensor, o SGDOptions, first bool) error {
	e := s.e
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
	return e.writeInPlace(p, np)
}

var sgdSlots = []string{"momentum_buffer"}

// State is a snapshot of the optimizer's state (see stateDict): the
// momentum buffers, group 1's lr and initial_lr, and every group.
func (s *SGD) State() (OptimizerState, error) {
	return s.stateDict(sgdSlots, func(g int) any { return *s.opts[g] })
}

// LoadState restores what State returned (or its older flat form, for an
// optimizer of one group), settings included.
func (s *SGD) LoadState(st OptimizerState) error {
	return s.loadState(sgdSlots, st, func(g int, v any) (func(), error) {
		o, ok := v.(SGDOptions)
		if !ok {
			return nil, argErrorf("the settings are a %T, expected SGD's", v)
		}
		if err := checkSGD("sgd", o); err != nil {
			return nil, err
		}
		return func() { o.LR = s.opts[g].LR; *s.opts[g] = o }, nil
	})
}

// StateDict is State without the groups: the momentum buffers, lr and
// initial_lr.
func (s *SGD) StateDict() (map[string]*Tensor, map[string]float64, error) {
	st, err := s.State()
	return st.Tensors, st.Nums, err
}

// LoadStateDict restores what StateDict returned (an optimizer of one group).
func (s *SGD) LoadStateDict(tensors map[string]*Tensor, nums map[string]float64) error {
	return s.LoadState(OptimizerState{Tensors: tensors, Nums: nums})
}
