package core

import (
	"fmt"
	"math"
	"slices"
)

// Scheduler sets an optimizer's learning rate from the number of times
// Step was called, as torch.optim.lr_scheduler does: making it is step 0
// (last_epoch 0), each Step advances one. Its base rate is the optimizer's
// initial_lr, which the first scheduler made on an optimizer sets from the
// rate it finds and the optimizer's state dict keeps: a scheduler made
// after load_state_dict starts from the same base as the one before the
// save. StateDict and LoadStateDict carry the scheduler's own progress.
//
// StepLR and CosineLR are torch's chainable forms: each step computes the
// new rate from the optimizer's current one, so the numbers are those torch
// produces when step() is called repeatedly (a rate set by hand in between
// carries on, as in torch).
type Scheduler struct {
	kind   string
	rate   *Rate
	base   float64 // torch's base_lrs[0]
	last   float64 // the rate the last step set (torch's _last_lr[0])
	epoch  int     // torch's last_epoch
	params []SchedulerParam
	// at is the rate at epoch, given the current rate and the base.
	at func(epoch int, cur, base float64) (float64, error)
}

// SchedulerParam is one of a scheduler's settings, kept in its state dict.
type SchedulerParam struct {
	Name  string
	Value float64
}

// newScheduler makes a scheduler of base initial_lr (set from the current
// rate if the optimizer has none; setInitial overrides it) and takes step 0.
// It changes the rate only once nothing can fail.
func newScheduler(kind string, r *Rate, params []SchedulerParam, setInitial *float64, at func(epoch int, cur, base float64) (float64, error)) (*Scheduler, error) {
	base, ok := r.InitialLR()
	if !ok {
		base = r.LR()
	}
	if setInitial != nil {
		base, ok = *setInitial, false
		if err := checkRate(kind+" scheduler", "initial_lr", base); err != nil {
			return nil, err
		}
	}
	s := &Scheduler{kind: kind, rate: r, base: base, params: params, at: at}
	lr, err := at(0, r.LR(), base)
	if err != nil {
		return nil, err
	}
	if err := checkScheduled(kind, 0, lr); err != nil {
		return nil, err
	}
	if !ok {
		r.initial, r.hasInitial = base, true
	}
	s.last = lr
	r.set(lr)
	return s, nil
}

// checkScheduled refuses a rate a schedule cannot set (negative, NaN).
func checkScheduled(kind string, epoch int, lr float64) error {
	if err := checkRate(kind+" scheduler", "the scheduled rate", lr); err != nil {
		return fmt.Errorf("%w (at step %d)", err, epoch)
	}
	return nil
}

// Step advances the schedule by one and sets the learning rate. A step the
// schedule refuses (one_cycle past its total) changes nothing.
func (s *Scheduler) Step() error {
	lr, err := s.at(s.epoch+1, s.rate.LR(), s.base)
	if err == nil {
		err = checkScheduled(s.kind, s.epoch+1, lr)
	}
	if err != nil {
		return err
	}
	s.epoch++
	s.last = lr
	s.rate.set(lr)
	return nil
}

// LR is the optimizer's current learning rate.
func (s *Scheduler) LR() float64 { return s.rate.LR() }

// LastEpoch is the number of Step calls (torch's last_epoch).
func (s *Scheduler) LastEpoch() int { return s.epoch }

// BaseLR is the rate the schedule starts from (torch's base_lrs[0]).
func (s *Scheduler) BaseLR() float64 { return s.base }

// Kind names the schedule: "step", "cosine", "warmup_cosine", "one_cycle".
func (s *Scheduler) Kind() string { return s.kind }

// StateDict is the scheduler's progress (last_epoch, base_lr, last_lr) and
// its settings, by name.
func (s *Scheduler) StateDict() (kind string, nums map[string]float64) {
	nums = map[string]float64{"last_epoch": float64(s.epoch), "base_lr": s.base, "last_lr": s.last}
	for _, p := range s.params {
		nums[p.Name] = p.Value
	}
	return s.kind, nums
}

// LoadStateDict restores what StateDict returned. The state must be of the
// same kind of schedule with the same settings (torch would silently take
// the saved settings over the ones this scheduler was made with); as in
// torch, the optimizer's rate is left as it is (its own load_state_dict
// restores it).
func (s *Scheduler) LoadStateDict(kind string, nums map[string]float64) error {
	const fn = "scheduler load_state_dict"
	if kind != s.kind {
		return argErrorf("%s: the state is of a %q scheduler, this one is %q", fn, kind, s.kind)
	}
	names := []string{"last_epoch", "base_lr", "last_lr"}
	for _, p := range s.params {
		names = append(names, p.Name)
		v, ok := nums[p.Name]
		if !ok {
			return argErrorf("%s: %s is missing", fn, p.Name)
		}
		if v != p.Value {
			return argErrorf("%s: the state has %s = %g, this %s scheduler was made with %g", fn, p.Name, v, s.kind, p.Value)
		}
	}
	for k := range nums {
		if !slices.Contains(names, k) {
			return argErrorf("%s: unexpected entry %q", fn, k)
		}
	}
	epoch, ok := nums["last_epoch"]
	if !ok || epoch < 0 || epoch != math.Trunc(epoch) || epoch > 1<<53 {
		return argErrorf("%s: last_epoch must be an integer >= 0, got %g", fn, epoch)
	}
	base, ok := nums["base_lr"]
	if !ok {
		return argErrorf("%s: base_lr is missing", fn)
	}
	if err := checkRate(fn, "base_lr", base); err != nil {
		return err
	}
	last, ok := nums["last_lr"]
	if !ok {
		return argErrorf("%s: last_lr is missing", fn)
	}
	if err := checkRate(fn, "last_lr", last); err != nil {
		return err
	}
	s.epoch, s.base, s.last = int(epoch), base, last
	return nil
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
func StepLR(r *Rate, stepSize int, gamma float64) (*Scheduler, error) {
	ps, err := schedParams("step", SchedulerParam{"step_size", float64(stepSize)}, SchedulerParam{"gamma", gamma})
	if err != nil {
		return nil, err
	}
	if stepSize < 1 || gamma <= 0 {
		return nil, argErrorf("step scheduler: need step_size >= 1 and gamma > 0 (got %d, %g)", stepSize, gamma)
	}
	return newScheduler("step", r, ps, nil, func(t int, cur, _ float64) (float64, error) {
		if t == 0 || t%stepSize != 0 {
			return cur, nil
		}
		return cur * gamma, nil
	})
}

// CosineLR is torch's CosineAnnealingLR: from the base rate down to etaMin
// over tMax steps along a cosine, and on past tMax as the same cosine, back
// up to the base rate at 2·tMax (period 2·tMax), in torch's recursive form.
func CosineLR(r *Rate, tMax int, etaMin float64) (*Scheduler, error) {
	ps, err := schedParams("cosine", SchedulerParam{"t_max", float64(tMax)}, SchedulerParam{"eta_min", etaMin})
	if err != nil {
		return nil, err
	}
	if tMax < 1 || etaMin < 0 {
		return nil, argErrorf("cosine scheduler: need t_max >= 1 and eta_min >= 0 (got %d, %g)", tMax, etaMin)
	}
	return newScheduler("cosine", r, ps, nil, func(t int, cur, base float64) (float64, error) {
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

// cosineBetween goes from `from` (frac 0) to `to` (frac 1) along a half cosine.
func cosineBetween(from, to, frac float64) float64 {
	return to + (from-to)*(1+math.Cos(math.Pi*frac))/2
}

// WarmupCosineLR (not a torch scheduler) rises linearly from
// base/(warmup+1) to the base rate over warmup steps, then anneals to etaMin
// by total steps and stays there.
func WarmupCosineLR(r *Rate, warmup, total int, etaMin float64) (*Scheduler, error) {
	ps, err := schedParams("warmup_cosine", SchedulerParam{"warmup", float64(warmup)}, SchedulerParam{"total", float64(total)},
		SchedulerParam{"eta_min", etaMin})
	if err != nil {
		return nil, err
	}
	if warmup < 0 || total <= warmup || etaMin < 0 {
		return nil, argErrorf("warmup_cosine scheduler: need 0 <= warmup < total and eta_min >= 0 (got %d, %d, %g)", warmup, total, etaMin)
	}
	return newScheduler("warmup_cosine", r, ps, nil, func(t int, _, base float64) (float64, error) {
		if t < warmup {
			return base * float64(t+1) / float64(warmup+1), nil
		}
		return cosineBetween(base, etaMin, math.Min(float64(t-warmup), float64(total-warmup))/float64(total-warmup)), nil
	})
}

// OneCycleLR is torch's OneCycleLR (cosine annealing, two phases, no
// momentum cycling): from maxLR/div up to maxLR over pctStart of total
// steps, then down to maxLR/div/finalDiv. As torch, it sets the optimizer's
// initial_lr to maxLR/div, and stepping past total is an error.
func OneCycleLR(r *Rate, maxLR float64, total int, pctStart, div, finalDiv float64) (*Scheduler, error) {
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
	return newScheduler("one_cycle", r, ps, &initial, func(t int, _, _ float64) (float64, error) {
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
