package core

import (
	"math"
	"testing"
)

func elementwiseGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	mapf := func(v []float64, f func(float64) float64) []float64 {
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = f(a)
		}
		return out
	}
	xs := []float64{0.5, -1.5, 2}
	sig := func(a float64) float64 { return 1 / (1 + math.Exp(-a)) }
	geluGrad := refGrad(func(v []float64) float64 { return geluRef(v[0]) + geluRef(v[1]) + geluRef(v[2]) }, xs)
	return []gradCase{
		{"add broadcast", []*Tensor{m23(1, 2, 3, 4, 5, 6), x(10, 20, 30)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Add(in[0], in[1])) },
			21 + 2*60, [][]float64{{1, 1, 1, 1, 1, 1}, {2, 2, 2}}},
		{"sub broadcast first", []*Tensor{x(1, 2, 3), m23(1, 1, 1, 2, 2, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Sub(in[0], in[1])) },
			12 - 9, [][]float64{{2, 2, 2}, {-1, -1, -1, -1, -1, -1}}},
		{"mul", []*Tensor{x(1, 2, 3), x(4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Mul(in[0], in[1])) },
			32, [][]float64{{4, 5, 6}, {1, 2, 3}}},
		{"div", []*Tensor{x(1, 2, 3), x(4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Div(in[0], in[1])) },
			0.25 + 0.4 + 0.5, [][]float64{{1. / 4, 1. / 5, 1. / 6}, {-1. / 16, -2. / 25, -3. / 36}}},
		{"exp", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Exp(in[0])) },
			math.Exp(0.5) + math.Exp(-1.5) + math.Exp(2), [][]float64{mapf(xs, math.Exp)}},
		{"expm1", []*Tensor{x(0.5, -1.5, 1e-4)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Expm1(in[0])) },
			math.Expm1(0.5) + math.Expm1(-1.5) + math.Expm1(1e-4), [][]float64{mapf([]float64{0.5, -1.5, 1e-4}, math.Exp)}},
		{"log", []*Tensor{x(0.5, 1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Log(in[0])) },
			math.Log(0.5 * 1.5 * 2), [][]float64{{2, 1 / 1.5, 0.5}}},
		{"sqrt", []*Tensor{x(0.25, 1, 4)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Sqrt(in[0])) },
			3.5, [][]float64{{1, 0.5, 0.25}}},
		{"pow 3", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Pow(in[0], 3)) },
			0.125 - 3.375 + 8, [][]float64{{0.75, 6.75, 12}}},
		{"pow -1", []*Tensor{x(0.5, -2, 4)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Pow(in[0], -1)) },
			2 - 0.5 + 0.25, [][]float64{{-4, -0.25, -1. / 16}}},
		{"pow 1.5", []*Tensor{x(0.25, 1, 4)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Pow(in[0], 1.5)) },
			0.125 + 1 + 8, [][]float64{{0.75, 1.5, 3}}},
		{"abs", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Abs(in[0])) },
			4, [][]float64{{1, -1, 1}}},
		{"clamp", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Clamp(in[0], -1, 1)) },
			0.5 - 1 + 1, [][]float64{{1, 0, 0}}},
		{"relu", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Relu(in[0])) },
			2.5, [][]float64{{1, 0, 1}}},
		{"sigmoid", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Sigmoid(in[0])) },
			sig(0.5) + sig(-1.5) + sig(2), [][]float64{mapf(xs, func(a float64) float64 { return sig(a) * (1 - sig(a)) })}},
		{"tanh", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Tanh(in[0])) },
			math.Tanh(0.5) + math.Tanh(-1.5) + math.Tanh(2), [][]float64{mapf(xs, func(a float64) float64 { return 1 - math.Tanh(a)*math.Tanh(a) })}},
		{"silu", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Silu(in[0])) },
			0.5*sig(0.5) - 1.5*sig(-1.5) + 2*sig(2), [][]float64{mapf(xs, func(a float64) float64 { return sig(a) * (1 + a*(1-sig(a))) })}},
		{"gelu", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Gelu(in[0])) },
			geluRef(0.5) + geluRef(-1.5) + geluRef(2), [][]float64{geluGrad}},
	}
}

func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func TestElementwiseGradients(t *testing.T) {
	runGradCases(t, elementwiseGradCases(t), gradChecks{
		loose: []string{"gelu"},
		kinks: []string{"abs", "clamp", "relu"},
	})
}
