package core

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Scheduler sets an optimizer's learning rates from the number of times
// Step was called, as torch.optim.lr_scheduler does: making it is step 0
// (last_epoch 0), each Step advances one. It drives every parameter group's
// rate, each from its own base: the group's initial_lr, which the first
// scheduler made on an optimizer sets from the rate it finds and the
// optimizer's state dict keeps: a scheduler made after load_state_dict
// starts from the same bases as the one before the save. StateDict and
// LoadStateDict carry the scheduler's own progress.
//
// StepLR and CosineLR are torch's chainable forms: each step computes a
// group's new rate from its current one, so the numbers are those torch
// produces when step() is called repeatedly (a rate set by hand in between
// carries on, as in torch).
type Scheduler struct {
	kind   string
	on     Rated // to notice a group added after the scheduler was made
	rates  []*Rate
	base   []float64 // torch's base_lrs
	last   []float64 // the rates the last step set (torch's _last_lr)
	epoch  int       // torch's last_epoch
	params []SchedulerParam
	// at is group's rate at epoch, given its current rate and its base.
	at func(epoch, group int, cur, base float64) (float64, error)
}

// SchedulerParam is one of a scheduler's settings, kept in its state dict.
type SchedulerParam struct {
	Name  string
	Value float64
}

// newScheduler makes a scheduler whose bases are the groups' initial_lr
// (set from the current rate where a group has none; setInitial overrides
// them all) and takes step 0. It changes the rates only once nothing can
// fail.
func newScheduler(kind string, on Rated, params []SchedulerParam, setInitial *float64, at func(epoch, group int, cur, base float64) (float64, error)) (*Scheduler, error) {
	rates := on.Rates()
	if len(rates) == 0 {
		return nil, argErrorf("%s scheduler: nothing to schedule", kind)
	}
	if setInitial != nil {
		if err := checkRate(kind+" scheduler", "initial_lr", *setInitial); err != nil {
			return nil, err
		}
	}
	s := &Scheduler{kind: kind, on: on, rates: rates, params: params, at: at}
	setBase := make([]bool, len(rates))
	for g, r := range rates {
		base, ok := r.InitialLR()
		if !ok {
			base = r.LR()
		}
		if setInitial != nil {
			base, ok = *setInitial, false
		}
		setBase[g] = !ok
		s.base = append(s.base, base)
	}
	lrs, err := s.ratesAt(0, nil)
	if err != nil {
		return nil, err
	}
	for g, r := range rates {
		if setBase[g] {
			r.initial, r.hasInitial = s.base[g], true
		}
	}
	s.set(lrs)
	return s, nil
}

// ratesAt computes every group's rate at epoch, checked, from the
// current rates or (where from is not nil) from those.
func (s *Scheduler) ratesAt(epoch int, from []float64) ([]float64, error) {
	lrs := make([]float64, len(s.rates))
	for g, r := range s.rates {
		cur := r.LR()
		if from != nil {
			cur = from[g]
		}
		lr, err := s.at(epoch, g, cur, s.base[g])
		if err == nil {
			err = checkScheduled(s.kind, epoch, lr)
		}
		if err != nil {
			return nil, err
		}
		lrs[g] = lr
	}
	return lrs, nil
}

func (s *Scheduler) set(lrs []float64) {
	s.last = lrs
	for g, r := range s.rates {
		r.set(lrs[g])
	}
}

// checkScheduled refuses a rate a schedule cannot set (negative, NaN).
func checkScheduled(kind string, epoch int, lr float64) error {
	if err := checkRate(kind+" scheduler", "the scheduled rate", lr); err != nil {
		return fmt.Errorf("%w (at step %d)", err, epoch)
	}
	return nil
}

// Step advances the schedule by one and sets every group's learning rate.
// A step the schedule refuses (one_cycle past its total) changes nothing.
func (s *Scheduler) Step() error {
	if err := s.checkGroups(); err != nil {
		return err
	}
	lrs, err := s.ratesAt(s.epoch+1, nil)
	if err != nil {
		return err
	}
	s.epoch++
	s.set(lrs)
	return nil
}

// restart takes step 0 again from the rates from (nil: the bases, as
// torch's step(0), the closed forms at epoch 0): SequentialLR's start and
// milestones.
func (s *Scheduler) restart(from []float64) error {
	if err := s.checkGroups(); err != nil {
		return err
	}
	if from == nil {
		from = s.base
	}
	lrs, err := s.ratesAt(0, from)
	if err != nil {
		return err
	}
	s.epoch = 0
	s.set(lrs)
	return nil
}

func (s *Scheduler) checkGroups() error { return checkGroups(s.kind, s.on, s.rates) }

// checkGroups refuses to step a scheduler made for rates once on has more
// groups. torch's schedulers treat a group added by add_param_group after
// they were made in ways of their own (StepLR scales it, OneCycleLR fails
// on its missing initial_lr, CosineAnnealingLR skips it at restarts): gglua
// refuses rather than differ.
func checkGroups(kind string, on Rated, rates []*Rate) error {
	if n := len(on.Rates()); n != len(rates) {
		return argErrorf("%s scheduler: the optimizer now has %d parameter groups, the scheduler was made for %d (add_param_group after it was made); make the scheduler after adding the group", kind, n, len(rates))
	}
	return nil
}

// LR is the optimizer's current learning rate (its first group's).
func (s *Scheduler) LR() float64 { return s.rates[0].LR() }

// LRs are every group's current learning rates.
func (s *Scheduler) LRs() []float64 {
	out := make([]float64, len(s.rates))
	for g, r := range s.rates {
		out[g] = r.LR()
	}
	return out
}

// LastLRs are the rates the last step set (torch's get_last_lr()).
func (s *Scheduler) LastLRs() []float64 { return slices.Clone(s.last) }

// LastEpoch is the number of Step calls (torch's last_epoch).
func (s *Scheduler) LastEpoch() int { return s.epoch }

// BaseLR is the rate the schedule starts from (torch's base_lrs[0]).
func (s *Scheduler) BaseLR() float64 { return s.base[0] }

// BaseLRs are every group's base rate (torch's base_lrs).
func (s *Scheduler) BaseLRs() []float64 { return slices.Clone(s.base) }

// Kind names the schedule: "step", "multi_step", "exponential", "linear",
// "cosine", "cosine_restarts", "lambda", "warmup_cosine", "one_cycle".
func (s *Scheduler) Kind() string { return s.kind }

// groupKey names group g's entry of a state dict: "base_lr" for the first
// group, "base_lr.2" for the second...
func groupKey(name string, g int) string {
	if g == 0 {
		return name
	}
	return fmt.Sprintf("%s.%d", name, g+1)
}

// SchedulerState is a scheduler's state dict: its kind, its progress and
// settings as numbers by name, ReduceLROnPlateau's modes as texts, and
// SequentialLR's schedulers' own states in order.
type SchedulerState struct {
	Kind  string
	Nums  map[string]float64
	Texts map[string]string
	Subs  []SchedulerState
}

// LRScheduler is what every scheduler answers. Their Step differs:
// ReduceLROnPlateau's takes the metric it watches.
type LRScheduler interface {
	Kind() string
	LR() float64
	LastLRs() []float64
	LastEpoch() int
	StateDict() SchedulerState
	LoadStateDict(SchedulerState) error
}

// StateDict is the scheduler's progress (last_epoch; base_lr and last_lr,
// the first group's, and base_lr.<g> and last_lr.<g> for group g >= 2) and
// its settings, by name.
func (s *Scheduler) StateDict() SchedulerState {
	nums := map[string]float64{"last_epoch": float64(s.epoch)}
	for g := range s.rates {
		nums[groupKey("base_lr", g)] = s.base[g]
		nums[groupKey("last_lr", g)] = s.last[g]
	}
	for _, p := range s.params {
		nums[p.Name] = p.Value
	}
	return SchedulerState{Kind: s.kind, Nums: nums}
}

// LoadStateDict restores what StateDict returned. The state must be of the
// same kind of schedule with the same settings and as many groups (torch
// would silently take the saved settings over the ones this scheduler was
// made with). It also sets each group's rate to the one the scheduler last
// set, where torch leaves the optimizer's rates alone: a scheduler made
// after the optimizer's state was loaded has just taken its step 0 (for
// warmup_cosine the warm-up's first rate), and the first resumed step
// would train at it. Saved together, the optimizer's and the scheduler's
// rates agree, so the order of the two loads no longer matters.
func (s *Scheduler) LoadStateDict(st SchedulerState) error {
	apply, err := s.loader(st)
	if err != nil {
		return err
	}
	apply()
	return nil
}

// loader checks a state against the scheduler and returns what loads it,
// so that SequentialLR changes none of its schedulers unless all can load.
func (s *Scheduler) loader(st SchedulerState) (func(), error) {
	const fn = "scheduler load_state_dict"
	if st.Kind != s.kind {
		return nil, argErrorf("%s: the state is of a %q scheduler, this one is %q", fn, st.Kind, s.kind)
	}
	if len(st.Texts) > 0 || len(st.Subs) > 0 {
		return nil, argErrorf("%s: a %q scheduler's state holds numbers only", fn, s.kind)
	}
	epoch, err := checkSchedulerNums(fn, s.kind, st.Nums, s.params, len(s.rates), "base_lr", "last_lr")
	if err != nil {
		return nil, err
	}
	base, last := make([]float64, len(s.rates)), make([]float64, len(s.rates))
	for g := range s.rates {
		base[g], last[g] = st.Nums[groupKey("base_lr", g)], st.Nums[groupKey("last_lr", g)]
	}
	return func() {
		s.epoch, s.base = epoch, base
		s.set(last)
	}, nil
}

// checkSchedulerNums checks a state's numbers: the settings equal to
// params, each group's entries of perGroup (base_lr, base_lr.2, ...)
// present and rates, nothing else, and last_epoch a whole number >= 0,
// which it returns.
func checkSchedulerNums(fn, kind string, nums map[string]float64, params []SchedulerParam, groups int, perGroup ...string) (int, error) {
	names := []string{"last_epoch"}
	for _, p := range params {
		names = append(names, p.Name)
		v, ok := nums[p.Name]
		if !ok {
			return 0, argErrorf("%s: %s is missing", fn, p.Name)
		}
		if v != p.Value {
			return 0, argErrorf("%s: the state has %s = %g, this %s scheduler was made with %g", fn, p.Name, v, kind, p.Value)
		}
	}
	for g := 0; g < groups; g++ {
		for _, n := range perGroup {
			name := groupKey(n, g)
			names = append(names, name)
			v, ok := nums[name]
			if !ok {
				return 0, argErrorf("%s: %s is missing (this optimizer has %d parameter groups)", fn, name, groups)
			}
			if err := checkRate(fn, name, v); err != nil {
				return 0, err
			}
		}
	}
	for k := range nums {
		if !slices.Contains(names, k) {
			if prefix, _, ok := strings.Cut(k, "."); ok && slices.Contains(perGroup, prefix) {
				return 0, argErrorf("%s: unexpected entry %q (the state is of more parameter groups than this optimizer's %d)", fn, k, groups)
			}
			return 0, argErrorf("%s: unexpected entry %q", fn, k)
		}
	}
	epoch, ok := nums["last_epoch"]
	if !ok || epoch < 0 || epoch != math.Trunc(epoch) || epoch > 1<<53 {
		return 0, argErrorf("%s: last_epoch must be an integer >= 0, got %g", fn, epoch)
	}
	return int(epoch), nil
}

// schedParams checks that every setting is a finite number.
func schedParams(kind string, ps ...SchedulerParam) ([]SchedulerParam, error) {
	for _, p := range ps {
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			return nil, argErrorf("%s scheduler: %s must be a finite number, got %g", kind, p.Name, p.Value)
		}
	}
	return ps, nil
}

// StepLR is torch's StepLR: the rate is multiplied by gamma every stepSize
// steps.
func StepLR(r Rated, stepSize int, gamma float64) (*Scheduler, error) {
	ps, err := schedParams("step", SchedulerParam{"step_size", float64(stepSize)}, SchedulerParam{"gamma", gamma})
	if err != nil {
		return nil, err
	}
	if stepSize < 1 || gamma <= 0 {
		return nil, argErrorf("step scheduler: need step_size >= 1 and gamma > 0 (got %d, %g)", stepSize, gamma)
	}
	return newScheduler("step", r, ps, nil, func(t, _ int, cur, _ float64) (float64, error) {
		if t == 0 || t%stepSize != 0 {
			return cur, nil
		}
		return cur * gamma, nil
	})
}

// ExponentialLR is torch's ExponentialLR: the rate is multiplied by gamma
// every step.
func ExponentialLR(r Rated, gamma float64) (*Scheduler, error) {
	ps, err := schedParams("exponential", SchedulerParam{"gamma", gamma})
	if err != nil {
		return nil, err
	}
	if gamma <= 0 {
		return nil, argErrorf("exponential scheduler: need gamma > 0 (got %g)", gamma)
	}
	return newScheduler("exponential", r, ps, nil, func(t, _ int, cur, _ float64) (float64, error) {
		if t == 0 {
			return cur, nil
		}
		return cur * gamma, nil
	})
}

// MultiStepLR is torch's MultiStepLR: the rate is multiplied by gamma at
// each milestone (by gamma^k at one listed k times, as torch counts them).
func MultiStepLR(r Rated, milestones []int, gamma float64) (*Scheduler, error) {
	ps := []SchedulerParam{{"gamma", gamma}}
	count := map[int]int{}
	for i, m := range milestones {
		if m < 1 {
			return nil, argErrorf("multi_step scheduler: milestones are steps from 1, got %d", m)
		}
		if i > 0 && m < milestones[i-1] {
			return nil, argErrorf("multi_step scheduler: milestones must be in increasing order, got %v", milestones)
		}
		count[m]++
		ps = append(ps, SchedulerParam{fmt.Sprintf("milestone.%d", i+1), float64(m)})
	}
	ps, err := schedParams("multi_step", ps...)
	if err != nil {
		return nil, err
	}
	if len(milestones) == 0 || gamma <= 0 {
		return nil, argErrorf("multi_step scheduler: need milestones and gamma > 0 (got %v, %g)", milestones, gamma)
	}
	return newScheduler("multi_step", r, ps, nil, func(t, _ int, cur, _ float64) (float64, error) {
		if k := count[t]; k > 0 {
			return cur * math.Pow(gamma, float64(k)), nil
		}
		return cur, nil
	})
}

// LinearLR is torch's LinearLR: the rate scaled by a factor going linearly
// from start to end over total steps (then kept), in torch's chainable
// form.
func LinearLR(r Rated, start, end float64, total int) (*Scheduler, error) {
	ps, err := schedParams("linear", SchedulerParam{"start_factor", start}, SchedulerParam{"end_factor", end},
		SchedulerParam{"total_iters", float64(total)})
	if err != nil {
		return nil, err
	}
	if !(start > 0 && start <= 1) || !(end >= 0 && end <= 1) || total < 1 {
		return nil, argErrorf("linear scheduler: need 0 < start_factor <= 1, 0 <= end_factor <= 1 and total_iters >= 1 (got %g, %g, %d)", start, end, total)
	}
	return newScheduler("linear", r, ps, nil, func(t, _ int, cur, _ float64) (float64, error) {
		switch {
		case t == 0:
			return cur * start, nil
		case t > total:
			return cur, nil
		}
		return cur * (1 + (end-start)/(float64(total)*start+float64(t-1)*(end-start))), nil
	})
}

// CosineRestartsLR is torch's CosineAnnealingWarmRestarts: a cosine from
// the base rate down to etaMin over t0 steps, then again from the base
// over t0·tMult steps, and so on (tMult 1: every t0 steps).
func CosineRestartsLR(r Rated, t0, tMult int, etaMin float64) (*Scheduler, error) {
	ps, err := schedParams("cosine_restarts", SchedulerParam{"t_0", float64(t0)}, SchedulerParam{"t_mult", float64(tMult)},
		SchedulerParam{"eta_min", etaMin})
	if err != nil {
		return nil, err
	}
	if t0 < 1 || tMult < 1 || etaMin < 0 {
		return nil, argErrorf("cosine_restarts scheduler: need t_0 >= 1, t_mult >= 1 and eta_min >= 0 (got %d, %d, %g)", t0, tMult, etaMin)
	}
	return newScheduler("cosine_restarts", r, ps, nil, func(t, _ int, _, base float64) (float64, error) {
		cur, period := t, t0 // torch's T_cur and T_i after t steps
		for cur >= period {
			cur -= period
			period *= tMult
		}
		return etaMin + (base-etaMin)*(1+math.Cos(math.Pi*float64(cur)/float64(period)))/2, nil
	})
}

// CosineLR is torch's CosineAnnealingLR: from the base rate down to etaMin
// over tMax steps along a cosine, and on past tMax as the same cosine, back
// up to the base rate at 2·tMax (period 2·tMax), in torch's recursive form.
func CosineLR(r Rated, tMax int, etaMin float64) (*Scheduler, error) {
	ps, err := schedParams("cosine", SchedulerParam{"t_max", float64(tMax)}, SchedulerParam{"eta_min", etaMin})
	if err != nil {
		return nil, err
	}
	if tMax < 1 || etaMin < 0 {
		return nil, argErrorf("cosine scheduler: need t_max >= 1 and eta_min >= 0 (got %d, %g)", tMax, etaMin)
	}
	return newScheduler("cosine", r, ps, nil, func(t, _ int, cur, base float64) (float64, error) {
		T := float64(tMax)
		e := float64(t)
		switch {
		case t == 0:
			return cur, nil
		case (t-1-tMax)%(2*tMax) == 0:
			return cur + (base-etaMin)*(1-math.Cos(math.Pi/T))/2, nil
		}
		return (1+math.Cos(math.Pi*e/T))/(1+math.Cos(math.Pi*(e-1)/T))*(cur-etaMin) + etaMin, nil
	})
}

// LambdaLR is torch's LambdaLR: group g's rate at step t is its base rate
// times factor(t, g). factor is the caller's (a Lua function); its error
// refuses the step.
func LambdaLR(r Rated, factor func(epoch, group int) (float64, error)) (*Scheduler, error) {
	return newScheduler("lambda", r, nil, nil, func(t, g int, _, base float64) (float64, error) {
		f, err := factor(t, g)
		return base * f, err
	})
}

// cosineBetween goes from `from` (frac 0) to `to` (frac 1) along a half cosine.
func cosineBetween(from, to, frac float64) float64 {
	return to + (from-to)*(1+math.Cos(math.Pi*frac))/2
}

// WarmupCosineLR (not a torch scheduler) rises linearly from
// base/(warmup+1) to the base rate over warmup steps, then anneals to etaMin
// by total steps and stays there.
func WarmupCosineLR(r Rated, warmup, total int, etaMin float64) (*Scheduler, error) {
	ps, err := schedParams("warmup_cosine", SchedulerParam{"warmup", float64(warmup)}, SchedulerParam{"total", float64(total)},
		SchedulerParam{"eta_min", etaMin})
	if err != nil {
		return nil, err
	}
	if warmup < 0 || total <= warmup || etaMin < 0 {
		return nil, argErrorf("warmup_cosine scheduler: need 0 <= warmup < total and eta_min >= 0 (got %d, %d, %g)", warmup, total, etaMin)
	}
	return newScheduler("warmup_cosine", r, ps, nil, func(t, _ int, _, base float64) (float64, error) {
		if t < warmup {
			return base * float64(t+1) / float64(warmup+1), nil
		}
		return cosineBetween(base, etaMin, math.Min(float64(t-warmup), float64(total-warmup))/float64(total-warmup)), nil
	})
}

// OneCycleLR is torch's OneCycleLR (cosine annealing, two phases, no
// momentum cycling): from maxLR/div up to maxLR over pctStart of total
// steps, then down to maxLR/div/finalDiv. As torch, it sets every group's
// initial_lr to maxLR/div, and stepping past total is an error.
func OneCycleLR(r Rated, maxLR float64, total int, pctStart, div, finalDiv float64) (*Scheduler, error) {
	ps, err := schedParams("one_cycle", SchedulerParam{"max_lr", maxLR}, SchedulerParam{"total", float64(total)},
		SchedulerParam{"pct_start", pctStart}, SchedulerParam{"div_factor", div}, SchedulerParam{"final_div_factor", finalDiv})
	if err != nil {
		return nil, err
	}
	if total < 2 || pctStart <= 0 || pctStart >= 1 || div <= 0 || finalDiv <= 0 || maxLR <= 0 {
		return nil, argErrorf("one_cycle scheduler: need total >= 2, 0 < pct_start < 1, positive max_lr, div_factor and final_div_factor (got total %d, pct_start %g, max_lr %g, div_factor %g, final_div_factor %g)",
			total, pctStart, maxLR, div, finalDiv)
	}
	initial := maxLR / div
	final := initial / finalDiv
	peak := pctStart*float64(total) - 1 // torch's end_step of phase 1
	end := float64(total) - 1
	if peak == 0 {
		return nil, argErrorf("one_cycle scheduler: pct_start %g of %d steps ends the warm-up phase at step 0 (torch divides by zero here); use a larger pct_start or total", pctStart, total)
	}
	// torch's _annealing_cos, in its order of operations.
	anneal := func(start, end, pct float64) float64 { return end + (start-end)/2.0*(math.Cos(math.Pi*pct)+1) }
	return newScheduler("one_cycle", r, ps, &initial, func(t, _ int, _, _ float64) (float64, error) {
		if t > total {
			return 0, argErrorf("one_cycle scheduler: Tried to step %d times. The specified number of total steps is %d", t+1, total)
		}
		x := float64(t)
		if x <= peak {
			return anneal(initial, maxLR, x/peak), nil
		}
		return anneal(maxLR, final, (x-peak)/(end-peak)), nil
	})
}
