package luabind

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Random tensors from the engine's seeded generator (tensor.manual_seed):
// randint, randperm, multinomial, bernoulli, normal_, uniform_, and the
// *_like constructors. Integer results are f32 holding whole numbers,
// exact up to 2^24; indices are 1-based, as everywhere in gglua.

// maxExactInt is the largest integer every smaller one of which an f32
// holds exactly.
const maxExactInt = 1 << 24

// stopCheckEvery is how many draws a random loop makes between looks at
// the script's context.
const stopCheckEvery = 1 << 14

// hostOf makes a host tensor of shape whose elements value(i) gives,
// charged to the host budget.
func (env *Env) hostOf(L *lua.LState, fn string, shape []int, value func(i int) float32) *core.Tensor {
	env.checkHost(L, fn, elements(shape))
	t, err := core.Zeros(shape...)
	if err != nil {
		argError(L, fn, "%s", strings.TrimPrefix(err.Error(), "tensor: "))
	}
	v, _ := t.Float32s()
	for i := range v {
		v[i] = value(i)
	}
	return t
}

// randint([low,] high, {shape} [, opts]): integers in [low, high).
func (env *Env) randint(L *lua.LState) int {
	o, last := trailingOpts(L, "tensor.randint")
	low, high := 0.0, 0.0
	switch last {
	case 2:
		high = float64(checkInteger(L, "tensor.randint", 1))
	case 3:
		low, high = float64(checkInteger(L, "tensor.randint", 1)), float64(checkInteger(L, "tensor.randint", 2))
	default:
		argError(L, "tensor.randint", "expected ([low,] high, {shape}), got %d arguments", last)
	}
	limit := float64(maxExactInt) // f32 holds every integer up to 2^24
	if o.dtype == ggmlcgo.I32 {
		limit = 1 << 31
	}
	if !(low < high) || low < -limit || high > limit {
		argError(L, "tensor.randint", "the range [%.0f, %.0f) is empty or past ±%.0f (%s holds integers exactly up to there)", low, high, limit, o.dtype)
	}
	shape := shapeUpTo(L, "tensor.randint", last, last)
	rng := env.Engine.Rand()
	span := int64(high - low)
	return env.finishExact(L, "tensor.randint", shape, o, func(int) float64 { return low + float64(rng.Int63n(span)) })
}

// randperm(n [, opts]): 1..n in a random order (PyTorch's 0..n-1, made
// 1-based as gglua's indices are).
func (env *Env) randperm(L *lua.LState) int {
	o, _ := trailingOpts(L, "tensor.randperm")
	n := checkInteger(L, "tensor.randperm", 1)
	if n < 0 || (n > maxExactInt && o.dtype != ggmlcgo.I32) {
		argError(L, "tensor.randperm", "n = %d is outside 0..2^24 (use {dtype=\"i32\"} past 2^24)", n)
	}
	env.checkHost(L, "tensor.randperm", int64(n))
	// math/rand's Perm, draw for draw (the same permutation for a seed),
	// stopping with the script's call.
	rng, perm := env.Engine.Rand(), make([]int, n)
	for i := range perm {
		if i%stopCheckEvery == 0 {
			stopIfEnded(L, "tensor.randperm")
		}
		j := rng.Intn(i + 1)
		perm[i] = perm[j]
		perm[j] = i
	}
	return env.finishExact(L, "tensor.randperm", []int{n}, o, func(i int) float64 { return float64(perm[i] + 1) })
}

// multinomial(probs, n [, replacement=false]): n 1-based category indices
// per row of probs (1-d or 2-d, non-negative weights, not all zero).
func (env *Env) multinomial(L *lua.LState) int {
	const fn = "multinomial"
	p := checkTensor(L, fn, 1)
	n := checkInteger(L, fn, 2)
	replace := L.ToBool(3)
	if p.Dim() > 2 {
		argError(L, fn, "expected 1-d or 2-d weights, got shape %s", core.ShapeString(p.Shape()))
	}
	if p.Numel() == 0 {
		argError(L, fn, "weights of shape %s: no categories to draw from", core.ShapeString(p.Shape()))
	}
	w, err := p.Float32s()
	raise(L, err)
	cats := p.Shape()[p.Dim()-1]
	rows := len(w) / cats
	if n < 1 || (!replace && n > cats) {
		argError(L, fn, "cannot draw %d samples from %d categories %s", n, cats, map[bool]string{true: "with replacement", false: "without replacement"}[replace])
	}
	for i, x := range w {
		if !(x >= 0) || math.IsInf(float64(x), 1) {
			argError(L, fn, "weight %d is %g; weights must be finite and non-negative", i+1, x)
		}
	}
	// The result's size, checked before anything is drawn or allocated
	// (rows·n may not even fit an int).
	if int64(n) > core.MaxHostElements/int64(max(rows, 1)) {
		argError(L, fn, "%d samples from each of %d rows is more than a tensor may hold (%d elements)", n, rows, core.MaxHostElements)
	}
	env.checkHost(L, fn, int64(rows)*int64(n))
	rng := env.Engine.Rand()
	out := make([]float32, 0, rows*n)
	for r := range rows {
		row := make([]float64, cats)
		total := 0.0
		for c := range row {
			row[c] = float64(w[r*cats+c])
			total += row[c]
		}
		for k := range n {
			if k%stopCheckEvery == 0 {
				stopIfEnded(L, fn)
			}
			if total <= 0 {
				argError(L, fn, "row %d has no weight left to draw from", r+1)
			}
			u, pick := rng.Float64()*total, cats-1
			for c, x := range row {
				if u < x {
					pick = c
					break
				}
				u -= x
			}
			for row[pick] == 0 { // rounding at the end: the last category with weight
				pick--
			}
			out = append(out, float32(pick+1))
			if !replace {
				total -= row[pick]
				row[pick] = 0
			}
		}
	}
	shape := []int{n}
	if p.Dim() == 2 {
		shape = []int{rows, n}
	}
	t := env.hostOf(L, fn, shape, func(i int) float32 { return out[i] })
	return env.pushResult(L, t, nil)
}

// bernoulli(p): 1 with probability p (each element in [0, 1]), else 0.
func (env *Env) bernoulli(L *lua.LState) int {
	p := checkTensor(L, "bernoulli", 1)
	w, err := p.Float32s()
	raise(L, err)
	for i, x := range w {
		if !(x >= 0 && x <= 1) {
			argError(L, "bernoulli", "probability %d is %g, outside [0, 1]", i+1, x)
		}
	}
	rng := env.Engine.Rand()
	t := env.hostOf(L, "bernoulli", p.Shape(), func(i int) float32 {
		if rng.Float64() < float64(w[i]) {
			return 1
		}
		return 0
	})
	return env.pushResult(L, t, nil)
}

// normalValues is normal_(x [, mean=0 [, std=1]]) for inPlace.
func (env *Env) normalValues(L *lua.LState, x *core.Tensor) *core.Tensor {
	mean, std := float64(L.OptNumber(2, 0)), float64(L.OptNumber(3, 1))
	if !(std >= 0) || math.IsInf(std, 0) || math.IsNaN(mean) || math.IsInf(mean, 0) {
		argError(L, "normal_", "mean %g and std %g: std must be finite and >= 0", mean, std)
	}
	rng := env.Engine.Rand()
	return env.hostOf(L, "normal_", x.Shape(), func(int) float32 { return float32(mean + std*rng.NormFloat64()) })
}

// uniformValues is uniform_(x [, from=0 [, to=1]]) for inPlace.
func (env *Env) uniformValues(L *lua.LState, x *core.Tensor) *core.Tensor {
	from, to := float64(L.OptNumber(2, 0)), float64(L.OptNumber(3, 1))
	if !(from <= to) || math.IsInf(from, 0) || math.IsInf(to, 0) {
		argError(L, "uniform_", "the range [%g, %g) must be finite and from <= to", from, to)
	}
	rng := env.Engine.Rand()
	return env.hostOf(L, "uniform_", x.Shape(), func(int) float32 { return float32(from + (to-from)*rng.Float64()) })
}

// like binds tensor.name_like(x [, value] [, opts]): a new host tensor of
// x's shape, value(i) for each element, of x's dtype unless opts gives one
// (as PyTorch's *_like); values go to an i32 tensor without rounding
// through f32 (a fraction there is an error, as rand_like of an int
// tensor is in PyTorch).
func (env *Env) like(name string, value func(env *Env, L *lua.LState) func(int) float64) lua.LGFunction {
	fn := "tensor." + name
	return func(L *lua.LState) int {
		o, _ := trailingOpts(L, fn)
		x := checkTensor(L, fn, 1)
		if !o.dtypeGiven {
			o.dtype = x.Dtype()
		}
		return env.finishExact(L, fn, x.Shape(), o, value(env, L))
	}
}

func constant(v float64) func(*Env, *lua.LState) func(int) float64 {
	return func(*Env, *lua.LState) func(int) float64 { return func(int) float64 { return v } }
}

func fullLike(_ *Env, L *lua.LState) func(int) float64 {
	v := float64(L.CheckNumber(2))
	return func(int) float64 { return v }
}

func randLike(env *Env, _ *lua.LState) func(int) float64 {
	rng := env.Engine.Rand()
	return func(int) float64 { return float64(float32(rng.Float64())) }
}

func randnLike(env *Env, _ *lua.LState) func(int) float64 {
	rng := env.Engine.Rand()
	return func(int) float64 { return float64(float32(rng.NormFloat64())) }
}
