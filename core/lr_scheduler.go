package core

import (
	"math"
)

// Scheduler sets an optimizer's learning rate from the number of times
// Step was called, as torch.optim.lr_scheduler does: the rate at creation is
// the schedule at 0, each Step advances one.
type Scheduler struct {
	lr    *float32
	at    func(step int) float64
	steps int
}

func newScheduler(lr *float32, at func(int) float64) *Scheduler {
	s := &Scheduler{lr: lr, at: at}
	*lr = float32(at(0))
	return s
}

// Step advances the schedule by one and sets the learning rate.
func (s *Scheduler) Step() {
	s.steps++
	*s.lr = float32(s.at(s.steps))
}

// LR is the current learning rate.
func (s *Scheduler) LR() float32 { return *s.lr }

// StepLR multiplies the base rate by gamma every stepSize steps.
func StepLR(lr *float32, stepSize int, gamma float64) (*Scheduler, error) {
	if stepSize < 1 || gamma <= 0 {
		return nil, argErrorf("step scheduler: need step_size >= 1 and gamma > 0 (got %d, %g)", stepSize, gamma)
	}
	base := float64(*lr)
	return newScheduler(lr, func(t int) float64 { return base * math.Pow(gamma, float64(t/stepSize)) }), nil
}

func cosineBetween(from, to, frac float64) float64 {
	return to + (from-to)*(1+math.Cos(math.Pi*frac))/2
}

// CosineLR anneals from the base rate to etaMin over tMax steps (and stays).
func CosineLR(lr *float32, tMax int, etaMin float64) (*Scheduler, error) {
	if tMax < 1 {
		return nil, argErrorf("cosine scheduler: t_max must be >= 1, got %d", tMax)
	}
	base := float64(*lr)
	return newScheduler(lr, func(t int) float64 {
		return cosineBetween(base, etaMin, math.Min(float64(t), float64(tMax))/float64(tMax))
	}), nil
}

// WarmupCosineLR rises linearly from 0 to the base rate over warmup steps,
// then anneals to etaMin by total steps.
func WarmupCosineLR(lr *float32, warmup, total int, etaMin float64) (*Scheduler, error) {
	if warmup < 0 || total <= warmup {
		return nil, argErrorf("warmup-cosine scheduler: need 0 <= warmup < total (got %d, %d)", warmup, total)
	}
	base := float64(*lr)
	return newScheduler(lr, func(t int) float64 {
		if t < warmup {
			return base * float64(t+1) / float64(warmup+1)
		}
		return cosineBetween(base, etaMin, math.Min(float64(t-warmup), float64(total-warmup))/float64(total-warmup))
	}), nil
}

// OneCycleLR is torch's OneCycleLR (cosine, two phases): from maxLR/div up
// to maxLR over pctStart of total steps, then down to maxLR/div/finalDiv.
func OneCycleLR(lr *float32, maxLR float64, total int, pctStart, div, finalDiv float64) (*Scheduler, error) {
	if total < 2 || pctStart <= 0 || pctStart >= 1 || div <= 0 || finalDiv <= 0 || maxLR <= 0 {
		return nil, argErrorf("one-cycle scheduler: need total >= 2, 0 < pct_start < 1, positive max_lr and factors")
	}
	initial := maxLR / div
	final := initial / finalDiv
	peak := pctStart*float64(total) - 1
	end := float64(total - 1)
	return newScheduler(lr, func(t int) float64 {
		x := math.Min(float64(t), end)
		if x <= peak {
			return cosineBetween(initial, maxLR, x/peak)
		}
		return cosineBetween(maxLR, final, (x-peak)/(end-peak))
	}), nil
}
