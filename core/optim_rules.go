package core

import (
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam: each torch.optim
// optimizer's settings, state and update (torch 2's single-tensor form),
// run by RuleOptimizer. The optimizer counts steps, as Adam does.

var (
	RMSprop = &Rule{Name: "rmsprop", LR: 1e-2,
		Settings: []Setting{num("alpha", 0.99), num("eps", 1e-8), num("weight_decay", 0), num("momentum", 0), flag("centered")},
		Slots:    []string{"square_avg", "momentum_buffer", "grad_avg"},
		uses:     func(s Settings) []bool { return []bool{true, s.num("momentum") > 0, s.flag("centered")} },
		check:    nonNegative("alpha", "eps", "weight_decay", "momentum"),
		update:   rmsprop,
	}
	Adagrad = &Rule{Name: "adagrad", LR: 1e-2,
		Settings: []Setting{num("lr_decay", 0), num("weight_decay", 0), whole(num("initial_accumulator_value", 0)), num("eps", 1e-10)},
		Slots:    []string{"sum"},
		filled:   "initial_accumulator_value",
		check:    nonNegative("lr_decay", "weight_decay", "initial_accumulator_value", "eps"),
		update:   adagrad,
	}
	Adadelta = &Rule{Name: "adadelta", LR: 1,
		Settings: []Setting{num("rho", 0.9), num("eps", 1e-6), num("weight_decay", 0)},
		Slots:    []string{"square_avg", "acc_delta"},
		check: func(fn string, s Settings) error {
			if rho := s.Get("rho")[0]; rho < 0 || rho > 1 {
				return argErrorf("%s: rho must be in [0, 1], got %g", fn, rho)
			}
			return nonNegative("eps", "weight_decay")(fn, s)
		},
		update: adadelta,
	}
	Adamax = &Rule{Name: "adamax", LR: 2e-3,
		Settings: []Setting{pair("betas", 0.9, 0.999), num("eps", 1e-8), num("weight_decay", 0)},
		Slots:    []string{"exp_avg", "exp_inf"},
		check:    withBetas(nonNegative("eps", "weight_decay")),
		update:   adamax,
	}
	NAdam = &Rule{Name: "nadam", LR: 2e-3,
		Settings: []Setting{pair("betas", 0.9, 0.999), num("eps", 1e-8), num("weight_decay", 0),
			flag("decoupled_weight_decay"), num("momentum_decay", 4e-3)},
		Slots:  []string{"exp_avg", "exp_avg_sq"},
		check:  withBetas(nonNegative("eps", "weight_decay", "momentum_decay")),
		update: nadam,
	}
	RAdam = &Rule{Name: "radam", LR: 1e-3,
		Settings: []Setting{pair("betas", 0.9, 0.999), num("eps", 1e-8), num("weight_decay", 0), flag("decoupled_weight_decay")},
		Slots:    []string{"exp_avg", "exp_avg_sq"},
		check:    withBetas(nonNegative("eps", "weight_decay")),
		update:   radam,
	}
)

// Rules are the rule optimizers, by name.
var Rules = []*Rule{Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop}

func num(name string, def float64) Setting { return Setting{Name: name, Defaults: []float64{def}} }
func flag(name string) Setting             { return Setting{Name: name, Defaults: []float64{0}, Flag: true} }

// whole marks a setting torch reads from the optimizer's defaults only
// (Adagrad fills every state from the constructor's
// initial_accumulator_value): a group may not differ.
func whole(s Setting) Setting { s.Whole = true; return s }

func pair(name string, a, b float64) Setting { return Setting{Name: name, Defaults: []float64{a, b}} }

func nonNegative(names ...string) func(string, Settings) error {
	return func(fn string, s Settings) error {
		for _, n := range names {
			if v := s.Get(n)[0]; v < 0 {
				return argErrorf("%s: %s must be >= 0, got %g", fn, n, v)
			}
		}
		return nil
	}
}

func withBetas(rest func(string, Settings) error) func(string, Settings) error {
	return func(fn string, s Settings) error {
		for i, b := range s.Get("betas") {
			if b < 0 || b >= 1 {
				return argErrorf("%s: beta %d must be in [0, 1), got %g", fn, i+1, b)
			}
		}
		return rest(fn, s)
	}
}

// rmsprop: square_avg = α·square_avg + (1-α)·g²; the denominator is its
// root (less the squared mean gradient when centered) plus eps; with
// momentum the step goes through a buffer.
func rmsprop(u *ruleStep) error {
	g := u.withWeightDecay()
	alpha, eps := u.s.num("alpha"), u.s.num("eps")
	sq, buf, gavg := u.state[0], u.state[1], u.state[2]
	u.set(sq, u.axpby(alpha, sq, 1-alpha, u.mul(g, g)))
	var avg *Tensor
	if u.s.flag("centered") {
		u.set(gavg, u.axpby(alpha, gavg, 1-alpha, g))
		avg = u.sqrt(u.axpby(1, sq, -1, u.mul(gavg, gavg)))
	} else {
		avg = u.sqrt(sq)
	}
	step := u.div(g, u.plus(avg, eps))
	if u.s.num("momentum") > 0 {
		u.set(buf, u.axpby(u.s.num("momentum"), buf, 1, step))
		step = buf
	}
	u.set(u.p, u.axpby(1, u.p, -u.lr, step))
	return nil
}

// adagrad: sum += g² (from initial_accumulator_value), then a step of
// lr / (1 + (step-1)·lr_decay) along g / (√sum + eps).
func adagrad(u *ruleStep) error {
	g := u.withWeightDecay()
	sum := u.state[0]
	if u.first {
		u.set(sum, u.plus(u.mul(g, g), u.s.num("initial_accumulator_value")))
	} else {
		u.set(sum, u.axpby(1, sum, 1, u.mul(g, g)))
	}
	clr := float64(u.lr) / (1 + float64(u.step-1)*float64(u.s.num("lr_decay")))
	step := u.div(g, u.plus(u.sqrt(sum), u.s.num("eps")))
	u.set(u.p, u.axpby(1, u.p, -float32(clr), step))
	return nil
}

// adadelta: the step is g scaled by √(acc_delta + eps) / √(square_avg +
// eps), both running averages with rho.
func adadelta(u *ruleStep) error {
	rho, eps := u.s.num("rho"), u.s.num("eps")
	sq, acc := u.state[0], u.state[1]
	if u.e.backend.IsCPU() && !forceComposedRules && u.p.dtype == ggmlcgo.F32 {
		// One pass of gglua's kernel (adadelta.c), the same operations.
		hyper, err := u.e.constants([]float32{rho, 1 - rho, eps, u.s.num("weight_decay"), -u.lr})
		if err != nil {
			return err
		}
		return u.opt.stepInPlace(u.p, []*Tensor{u.grad, sq, acc, hyper}, func(c ctx, base node, in []node) (node, error) {
			gp, err := u.e.packed(c, in[0])
			if err != nil {
				return node{}, err
			}
			return c.AdadeltaCPU(base, gp, in[1], in[2], in[3])
		})
	}
	g := u.withWeightDecay()
	u.set(sq, u.axpby(rho, sq, 1-rho, u.mul(g, g)))
	std := u.sqrt(u.plus(sq, eps))
	delta := u.mul(u.div(u.sqrt(u.plus(acc, eps)), std), g)
	u.set(acc, u.axpby(rho, acc, 1-rho, u.mul(delta, delta)))
	u.set(u.p, u.axpby(1, u.p, -u.lr, delta))
	return nil
}

// adamax: Adam with the infinity norm, exp_inf = max(β2·exp_inf, |g| + eps).
func adamax(u *ruleStep) error {
	g := u.withWeightDecay()
	b1, b2 := u.s.betas()
	m, inf := u.state[0], u.state[1]
	u.set(m, u.axpby(b1, m, 1-b1, g))
	u.set(inf, u.max(u.scale(inf, b2), u.plus(u.abs(g), u.s.num("eps"))))
	clr := float64(u.lr) / (1 - math.Pow(float64(b1), float64(u.step)))
	u.set(u.p, u.axpby(1, u.p, -float32(clr), u.div(m, inf)))
	return nil
}

// nadam: Adam with Nesterov momentum, whose momentum coefficient μ_t =
// β1·(1 - ½·0.96^(t·momentum_decay)) warms up; μ's product over the steps
// is the group's running product (torch keeps it per parameter). This is
// torch 2's form: 1.13's single-tensor NAdam multiplied μ_t in twice.
func nadam(u *ruleStep) error {
	g := u.withWeightDecay()
	b1, b2 := u.s.betas()
	md := float64(u.s.num("momentum_decay"))
	mu := func(t int) float64 { return float64(b1) * (1 - 0.5*math.Pow(0.96, float64(t)*md)) }
	product := u.product([2]float64{float64(b1), md}, mu)
	m, v := u.adamMoments(g, b1, b2)
	bc2 := 1 - math.Pow(float64(b2), float64(u.step))
	denom := u.plus(u.sqrt(u.scale(v, float32(1/bc2))), u.s.num("eps"))
	lr, now, next := float64(u.lr), mu(u.step), mu(u.step+1)
	np := u.axpby(1, u.p, -float32(lr*(1-now)/(1-product)), u.div(g, denom))
	u.set(u.p, u.axpby(1, np, -float32(lr*next/(1-product*next)), u.div(m, denom)))
	return nil
}

// adamMoments updates Adam's moments, state 0 and 1, with gradient g:
// exp_avg = β1·exp_avg + (1-β1)·g, exp_avg_sq = β2·exp_avg_sq + (1-β2)·g².
func (u *ruleStep) adamMoments(g *Tensor, b1, b2 float32) (m, v *Tensor) {
	m, v = u.state[0], u.state[1]
	u.set(m, u.axpby(b1, m, 1-b1, g))
	u.set(v, u.axpby(b2, v, 1-b2, u.mul(g, g)))
	return m, v
}

// radam: Adam whose adaptive step is rectified by the variance's
// tractability ρ_t, and plain momentum SGD while ρ_t <= 5.
func radam(u *ruleStep) error {
	g := u.withWeightDecay()
	b1, b2 := u.s.betas()
	m, v := u.adamMoments(g, b1, b2)
	t := float64(u.step)
	bc1, bc2 := 1-math.Pow(float64(b1), t), 1-math.Pow(float64(b2), t)
	rhoInf := 2/(1-float64(b2)) - 1
	rho := rhoInf - 2*t*math.Pow(float64(b2), t)/bc2
	lr := float64(u.lr) / bc1
	if rho <= 5 {
		u.set(u.p, u.axpby(1, u.p, -float32(lr), m))
		return nil
	}
	rect := math.Sqrt((rho - 4) * (rho - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rho))
	step := u.div(m, u.plus(u.sqrt(v), u.s.num("eps")))
	u.set(u.p, u.axpby(1, u.p, -float32(lr*rect*math.Sqrt(bc2)), step))
	return nil
}

// forceComposedRules makes tests compose the rules' updates on the CPU
// too, to compare the kernels with them.
var forceComposedRules bool
