package core

import (
	"maps"
	"math"
	"slices"
)

// Plateau is torch's ReduceLROnPlateau: it watches a metric, passed to
// each Step, and multiplies every group's rate by Factor (not below the
// group's MinLR) once the metric has not improved for more than Patience
// steps, then waits Cooldown steps before counting again. A step improves
// on the best so far when the metric is below best·(1 - threshold) (mode
// min, threshold_mode rel), below best - threshold (min, abs), above
// best·(1 + threshold) (max, rel) or above best + threshold (max, abs);
// NaN never improves. A reduction smaller than Eps is skipped.
type Plateau struct {
	on    Rated
	rates []*Rate
	o     PlateauOptions
	last  []float64
	// torch's best, num_bad_epochs, cooldown_counter and last_epoch.
	best                     float64
	bad, cooldownLeft, epoch int
}

// PlateauOptions are ReduceLROnPlateau's settings; DefaultPlateau holds
// torch's defaults.
type PlateauOptions struct {
	Mode, ThresholdMode string // "min" or "max"; "rel" or "abs"
	Factor, Threshold   float64
	Patience, Cooldown  int
	MinLRs              []float64 // one for every group, or one for all
	Eps                 float64
}

// DefaultPlateau is torch's: mode min, factor 0.1, patience 10, threshold
// 1e-4 relative, no cooldown, min_lr 0, eps 1e-8.
var DefaultPlateau = PlateauOptions{Mode: "min", ThresholdMode: "rel", Factor: 0.1, Threshold: 1e-4, Patience: 10,
	MinLRs: []float64{0}, Eps: 1e-8}

// ReduceLROnPlateau makes a Plateau over every group of r. Unlike the
// other schedulers it neither sets a rate when made nor keeps bases.
func ReduceLROnPlateau(r Rated, o PlateauOptions) (*Plateau, error) {
	const fn = "reduce_on_plateau scheduler"
	rates := r.Rates()
	if len(rates) == 0 {
		return nil, argErrorf("%s: nothing to schedule", fn)
	}
	if o.Mode != "min" && o.Mode != "max" {
		return nil, argErrorf("%s: mode must be \"min\" or \"max\", got %q", fn, o.Mode)
	}
	if o.ThresholdMode != "rel" && o.ThresholdMode != "abs" {
		return nil, argErrorf("%s: threshold_mode must be \"rel\" or \"abs\", got %q", fn, o.ThresholdMode)
	}
	if !(o.Factor >= 0 && o.Factor < 1) {
		return nil, argErrorf("%s: factor must be >= 0 and < 1, got %g", fn, o.Factor)
	}
	if o.Patience < 0 || o.Cooldown < 0 {
		return nil, argErrorf("%s: patience and cooldown must be >= 0, got %d and %d", fn, o.Patience, o.Cooldown)
	}
	if err := checkFinite(fn, "threshold", o.Threshold, false); err != nil {
		return nil, err
	}
	if err := checkFinite(fn, "eps", o.Eps, true); err != nil {
		return nil, err
	}
	switch len(o.MinLRs) {
	case 1:
		o.MinLRs = slices.Repeat(o.MinLRs, len(rates))
	case len(rates):
		o.MinLRs = slices.Clone(o.MinLRs)
	default:
		return nil, argErrorf("%s: expected %d min_lrs (one for each parameter group), got %d", fn, len(rates), len(o.MinLRs))
	}
	for _, m := range o.MinLRs {
		if err := checkRate(fn, "min_lr", m); err != nil {
			return nil, err
		}
	}
	p := &Plateau{on: r, rates: rates, o: o, best: math.Inf(1)}
	if o.Mode == "max" {
		p.best = math.Inf(-1)
	}
	for _, rate := range rates {
		p.last = append(p.last, rate.LR())
	}
	return p, nil
}

// better is torch's is_better.
func (p *Plateau) better(a float64) bool {
	t := p.o.Threshold
	switch {
	case p.o.Mode == "min" && p.o.ThresholdMode == "rel":
		return a < p.best*(1-t)
	case p.o.Mode == "min":
		return a < p.best-t
	case p.o.ThresholdMode == "rel":
		return a > p.best*(t+1)
	}
	return a > p.best+t
}

// Step takes one step with the metric's latest value.
func (p *Plateau) Step(metric float64) error {
	if err := checkGroups("reduce_on_plateau", p.on, p.rates); err != nil {
		return err
	}
	p.epoch++
	if p.better(metric) {
		p.best, p.bad = metric, 0
	} else {
		p.bad++
	}
	if p.cooldownLeft > 0 {
		p.cooldownLeft--
		p.bad = 0 // bad steps in the cooldown do not count
	}
	if p.bad > p.o.Patience {
		for g, r := range p.rates {
			old := r.LR()
			if lr := math.Max(old*p.o.Factor, p.o.MinLRs[g]); old-lr > p.o.Eps {
				r.set(lr)
			}
		}
		p.cooldownLeft, p.bad = p.o.Cooldown, 0
	}
	for g, r := range p.rates {
		p.last[g] = r.LR()
	}
	return nil
}

// Kind is "reduce_on_plateau".
func (p *Plateau) Kind() string { return "reduce_on_plateau" }

// LR is the first group's current rate.
func (p *Plateau) LR() float64 { return p.rates[0].LR() }

// LastLRs are the rates after the last step (when made, the rates then).
func (p *Plateau) LastLRs() []float64 { return slices.Clone(p.last) }

// LastEpoch is the number of Step calls.
func (p *Plateau) LastEpoch() int { return p.epoch }

func (p *Plateau) params() []SchedulerParam {
	ps := []SchedulerParam{{"factor", p.o.Factor}, {"patience", float64(p.o.Patience)}, {"threshold", p.o.Threshold},
		{"cooldown", float64(p.o.Cooldown)}, {"eps", p.o.Eps}}
	for g, m := range p.o.MinLRs {
		ps = append(ps, SchedulerParam{groupKey("min_lr", g), m})
	}
	return ps
}

// StateDict holds torch's progress (last_epoch, best, num_bad_epochs,
// cooldown_counter, last_lr per group), the settings and the two modes.
func (p *Plateau) StateDict() SchedulerState {
	nums := map[string]float64{"last_epoch": float64(p.epoch), "best": p.best, "num_bad_epochs": float64(p.bad),
		"cooldown_counter": float64(p.cooldownLeft)}
	for g := range p.rates {
		nums[groupKey("last_lr", g)] = p.last[g]
	}
	for _, s := range p.params() {
		nums[s.Name] = s.Value
	}
	return SchedulerState{Kind: "reduce_on_plateau", Nums: nums, Texts: map[string]string{"mode": p.o.Mode, "threshold_mode": p.o.ThresholdMode}}
}

// LoadStateDict restores what StateDict returned, from a scheduler of the
// same settings, and sets each group's rate to the last one saved.
func (p *Plateau) LoadStateDict(st SchedulerState) error {
	const fn = "scheduler load_state_dict"
	if st.Kind != "reduce_on_plateau" {
		return argErrorf("%s: the state is of a %q scheduler, this one is \"reduce_on_plateau\"", fn, st.Kind)
	}
	if len(st.Subs) > 0 || len(st.Texts) != 2 || st.Texts["mode"] != p.o.Mode || st.Texts["threshold_mode"] != p.o.ThresholdMode {
		return argErrorf("%s: the state's mode and threshold_mode are %q and %q, this scheduler's %q and %q", fn,
			st.Texts["mode"], st.Texts["threshold_mode"], p.o.Mode, p.o.ThresholdMode)
	}
	nums := maps.Clone(st.Nums)
	best, ok := nums["best"]
	if !ok || math.IsNaN(best) {
		return argErrorf("%s: best must be a number, got %g", fn, best)
	}
	counts := map[string]int{}
	for _, k := range []string{"num_bad_epochs", "cooldown_counter"} {
		v, ok := nums[k]
		if !ok || v < 0 || v != math.Trunc(v) || v > 1<<53 {
			return argErrorf("%s: %s must be an integer >= 0, got %g", fn, k, v)
		}
		counts[k] = int(v)
	}
	for _, k := range []string{"best", "num_bad_epochs", "cooldown_counter"} {
		delete(nums, k)
	}
	epoch, err := checkSchedulerNums(fn, "reduce_on_plateau", nums, p.params(), len(p.rates), "last_lr")
	if err != nil {
		return err
	}
	p.epoch, p.best, p.bad, p.cooldownLeft = epoch, best, counts["num_bad_epochs"], counts["cooldown_counter"]
	for g, r := range p.rates {
		p.last[g] = st.Nums[groupKey("last_lr", g)]
		r.set(p.last[g])
	}
	return nil
}
