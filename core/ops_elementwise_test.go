package core

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		{"bias_relu", []*Tensor{m23(0.5, -1.5, 2, 1, -3, 0.25), x(0.25, 1, -1)}, // x + b = [[0.75, -0.5, 1], [1.25, -2, -0.75]]
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.BiasRelu(in[0], in[1])) },
			0.75 + 1 + 1.25, [][]float64{{1, 0, 1, 1, 0, 0}, {2, 0, 1}}},
		{"sigmoid", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Sigmoid(in[0])) },
			sig(0.5) + sig(-1.5) + sig(2), [][]float64{mapf(xs, func(a float64) float64 { return sig(a) * (1 - sig(a)) })}},
		{"tanh", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Tanh(in[0])) },
			math.Tanh(0.5) + math.Tanh(-1.5) + math.Tanh(2), [][]float64{mapf(xs, func(a float64) float64 { return 1 - math.Tanh(a)*math.Tanh(a) })}},
		{"silu", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Silu(in[0])) },
			0.5*sig(0.5) - 1.5*sig(-1.5) + 2*sig(2), [][]float64{mapf(xs, func(a float64) float64 { return sig(a) * (1 + a*(1-sig(a))) })}},
		{"gelu exact", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Gelu(in[0], "none")) },
			geluErfRef(0.5) + geluErfRef(-1.5) + geluErfRef(2), [][]float64{mapf(xs, func(a float64) float64 {
				return 0.5*(1+math.Erf(a/math.Sqrt2)) + a*math.Exp(-a*a/2)/math.Sqrt(2*math.Pi)
			})}},
		// Near 0 Φ(x) = y/x is blended to 1/2 (x = 0 and 5e-19 on either
		// side of the CPU's 1e-18 cut); far out φ underflows (±13.5: e^-z
		// past 88 in the CPU's silu form).
		{"gelu exact near 0 and far out", []*Tensor{x(0, 5e-19, -3e-18, 13.5, -13.5, 4)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Gelu(in[0], "none")) },
			geluErfRef(0) + geluErfRef(5e-19) + geluErfRef(-3e-18) + geluErfRef(13.5) + geluErfRef(-13.5) + geluErfRef(4),
			[][]float64{mapf([]float64{0, 5e-19, -3e-18, 13.5, -13.5, 4}, func(a float64) float64 {
				return 0.5*(1+math.Erf(a/math.Sqrt2)) + a*math.Exp(-a*a/2)/math.Sqrt(2*math.Pi)
			})}},
		// x² overflows f32 past 1.8e19: Φ(x) + x φ(x) is still 1 and 0
		// (central differences cannot see it: no gradcheck).
		{"gelu exact of huge inputs", []*Tensor{x(3e19, -3e19, 1e38)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Gelu(in[0], "none")) },
			3e19 + 1e38, [][]float64{{1, 0, 1}}},
		{"pow 17 of negatives", []*Tensor{x(-1.1, 0.9, -1.05)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Pow(in[0], 17)) },
			math.Pow(-1.1, 17) + math.Pow(0.9, 17) + math.Pow(-1.05, 17),
			[][]float64{mapf([]float64{-1.1, 0.9, -1.05}, func(a float64) float64 { return 17 * math.Pow(a, 16) })}},
		{"pow 0.3", []*Tensor{x(0.25, 1, 4)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Pow(in[0], 0.3)) },
			math.Pow(0.25, 0.3) + 1 + math.Pow(4, 0.3),
			[][]float64{mapf([]float64{0.25, 1, 4}, func(a float64) float64 { return 0.3 * math.Pow(a, -0.7) })}},
		{"pow tensor^tensor", []*Tensor{x(0.5, 1.5, 2), x(2, -1, 0.5)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.PowTensor(in[0], in[1])) },
			0.25 + 1/1.5 + math.Sqrt(2), [][]float64{{2 * 0.5, -1 / (1.5 * 1.5), 0.5 / math.Sqrt(2)},
				{0.25 * math.Log(0.5), math.Log(1.5) / 1.5, math.Sqrt(2) * math.Log(2)}}},
		{"pow tensor^tensor broadcast", []*Tensor{m23(0.5, 1, 2, 3, 0.75, 1.25), x(2, -0.5, 1.5)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.PowTensor(in[0], in[1])) },
			powSum([]float64{0.5, 1, 2, 3, 0.75, 1.25}, []float64{2, -0.5, 1.5}),
			[][]float64{refGrad(func(v []float64) float64 { return powSum(v, []float64{2, -0.5, 1.5}) }, []float64{0.5, 1, 2, 3, 0.75, 1.25}),
				refGrad(func(v []float64) float64 { return powSum([]float64{0.5, 1, 2, 3, 0.75, 1.25}, v) }, []float64{2, -0.5, 1.5})}},
		{"pow number^tensor", []*Tensor{x(0.5, -1, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Arith(OpPow, Operand{N: 2.5}, Operand{T: in[0]}))
			},
			math.Pow(2.5, 0.5) + 1/2.5 + 6.25, [][]float64{mapf([]float64{0.5, -1, 2}, func(a float64) float64 { return math.Pow(2.5, a) * math.Log(2.5) })}},
		{"gelu", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Gelu(in[0], "tanh")) },
			geluRef(0.5) + geluRef(-1.5) + geluRef(2), [][]float64{geluGrad}},
	}
}

func geluErfRef(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// powSum is the sum of x[i]^y[i mod len(y)] (y broadcast along rows of x).
func powSum(x, y []float64) float64 {
	s := 0.0
	for i, a := range x {
		s += math.Pow(a, y[i%len(y)])
	}
	return s
}

func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func TestElementwiseGradients(t *testing.T) {
	runGradCases(t, elementwiseGradCases(t), gradChecks{
		loose: []string{"gelu", "gelu exact", "gelu exact near 0 and far out"},
		kinks: []string{"abs", "clamp", "relu", "gelu exact of huge inputs"},
	})
}

// ---- PyTorch's numbers: testdata/torch_numerics.json ----
//
// Written by scripts/reference/numerics.py (run by hand where PyTorch is
// installed): each case is an op with its arguments and float32 inputs,
// PyTorch's output, a fixed cotangent and the gradients of
// sum(output * cotangent). The op families' tests (TestElementwiseMatchesTorch,
// TestNNMatchesTorch, TestLossesMatchTorch) run the cases of their ops.

// torchNum is a number of the reference file, where NaN and the
// infinities are the strings "nan", "inf" and "-inf".
type torchNum float64

func (f *torchNum) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"nan"`:
		*f = torchNum(math.NaN())
	case `"inf"`:
		*f = torchNum(math.Inf(1))
	case `"-inf"`:
		*f = torchNum(math.Inf(-1))
	default:
		var v float64
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*f = torchNum(v)
	}
	return nil
}

type torchTensor struct {
	Shape  []int      `json:"shape"`
	Values []torchNum `json:"values"`
}

func (tt torchTensor) host(t *testing.T) *Tensor {
	shape := tt.Shape
	if len(shape) == 0 {
		shape = []int{1}
	}
	v := make([]float32, len(tt.Values))
	for i, x := range tt.Values {
		v[i] = float32(x)
	}
	return host(t, shape, v...)
}

type torchCase struct {
	Name      string                     `json:"name"`
	Op        string                     `json:"op"`
	Args      map[string]json.RawMessage `json:"args"`
	Inputs    []torchTensor              `json:"inputs"`
	Output    torchTensor                `json:"output"`
	Cotangent torchTensor                `json:"cotangent"`
	Grads     []*torchTensor             `json:"grads"`
	// RequiresGrad (optional) says which inputs require grad in the
	// forward, beyond those with a gradient; OutputRequiresGrad (optional)
	// whether PyTorch's output does.
	RequiresGrad       []bool `json:"requires_grad"`
	OutputRequiresGrad *bool  `json:"output_requires_grad"`
}

// num is the number argument key (nan and inf as strings).
func (c torchCase) num(t *testing.T, key string) float64 {
	var v torchNum
	require.NoError(t, json.Unmarshal(c.Args[key], &v), "%s: argument %s", c.Name, key)
	return float64(v)
}

// arg decodes argument key into v; it reports whether the argument is
// present and not null.
func (c torchCase) arg(t *testing.T, key string, v any) bool {
	raw, ok := c.Args[key]
	if !ok || string(raw) == "null" {
		return false
	}
	require.NoError(t, json.Unmarshal(raw, v), "%s: argument %s", c.Name, key)
	return true
}

func loadTorchCases(t *testing.T) []torchCase {
	t.Helper()
	return loadTorchFile(t, "testdata/torch_numerics.json")
}

// loadTorchFile reads the cases of a reference file in testdata.
func loadTorchFile(t *testing.T, path string) []torchCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var ref struct {
		Cases []torchCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &ref))
	require.NotEmpty(t, ref.Cases)
	return ref.Cases
}

// torchOp computes a case's output from its inputs (the tensors of
// c.Inputs, those with a gradient in c.Grads requiring grad).
type torchOp func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error)

// assertTorchClose compares with PyTorch element by element: NaN and the
// infinities exactly (by position), the rest to 1e-5 relative (1e-6
// absolute near 0).
func assertTorchClose(t require.TestingT, want []torchNum, got []float32, msg string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Len(t, got, len(want), msg)
	for i, w := range want {
		wf, g := float64(w), float64(got[i])
		switch {
		case math.IsNaN(wf):
			assert.True(t, math.IsNaN(g), "%s: element %d is %g, PyTorch NaN", msg, i+1, g)
		case math.IsInf(wf, 0):
			assert.Equal(t, wf, g, "%s: element %d", msg, i+1)
		default:
			assert.InDelta(t, wf, g, 1e-6+1e-5*math.Abs(wf), "%s: element %d", msg, i+1)
		}
	}
}

// runTorchCases runs the reference cases of the given ops: forward, then
// backward of sum(output * cotangent), compared with PyTorch's values.
func runTorchCases(t *testing.T, ops map[string]torchOp) {
	runTorchFile(t, "testdata/torch_numerics.json", ops)
}

// runTorchFile is runTorchCases on the cases of the reference file path;
// a case without gradients (a comparison) runs forward only, and a case
// that says whether the output requires grad is checked for it.
func runTorchFile(t *testing.T, path string, ops map[string]torchOp) {
	runTorchFileWith(t, path, ops, assertTorchClose)
}

// runTorchFileWith is runTorchFile comparing values with closeTo.
func runTorchFileWith(t *testing.T, path string, ops map[string]torchOp, closeTo func(require.TestingT, []torchNum, []float32, string)) {
	e := newEngine(t)
	n := 0
	for _, c := range loadTorchFile(t, path) {
		f, ok := ops[c.Op]
		if !ok {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			require.Len(t, c.Grads, len(c.Inputs))
			in := make([]*Tensor, len(c.Inputs))
			for i, x := range c.Inputs {
				in[i] = x.host(t)
				rg := c.Grads[i] != nil || (i < len(c.RequiresGrad) && c.RequiresGrad[i])
				require.NoError(t, in[i].SetRequiresGrad(rg))
			}
			var out *Tensor
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				if out, err = f(t, e, c, in); err != nil {
					return err
				}
				prod, err := e.Mul(out, c.Cotangent.host(t))
				if err != nil {
					return err
				}
				loss, err = e.Sum(prod)
				return err
			}))
			if len(c.Output.Shape) > 0 {
				assert.Equal(t, c.Output.Shape, out.Shape(), "output shape")
			}
			closeTo(t, c.Output.Values, values(t, out), "output")
			if c.OutputRequiresGrad != nil {
				assert.Equal(t, *c.OutputRequiresGrad, out.RequiresGrad(), "output requires grad")
			}
			if !slices.ContainsFunc(c.Grads, func(g *torchTensor) bool { return g != nil }) {
				return
			}
			_, err := e.Backward(loss)
			require.NoError(t, err)
			for i, g := range c.Grads {
				if g == nil {
					continue
				}
				require.NotNil(t, in[i].Grad(), "input %d has no gradient", i+1)
				closeTo(t, g.Values, values(t, in[i].Grad()), fmt.Sprintf("gradient of input %d", i+1))
			}
		})
	}
	require.Positive(t, n, "no reference case for these ops")
}

// TestTorchCasesAreAllRun: every op of the reference file belongs to one
// family's test.
// TestComposedGeluBack: the GPU's GELU gradient (composed of ggml ops),
// forced on the CPU, passes the gradient cases (0, tiny, far out, huge)
// and the PyTorch references that the CPU's kernel passes.
func TestComposedGeluBack(t *testing.T) {
	runForced(t, &forceComposedGeluBack, TestElementwiseGradients, TestElementwiseMatchesTorch)
}

// TestComposedRelu: relu composed of ggml's ops (a device library without
// gglua's kernels), forced on the CPU, passes the gradient cases and the
// PyTorch references that the kernels pass.
func TestComposedRelu(t *testing.T) {
	runForced(t, &forceComposedRelu, TestElementwiseGradients, TestElementwiseMatchesTorch)
}

func TestTorchCasesAreAllRun(t *testing.T) {
	known := map[string]bool{}
	for _, ops := range []map[string]torchOp{elementwiseTorchOps, nnTorchOps, lossTorchOps} {
		for op := range ops {
			known[op] = true
		}
	}
	for _, c := range loadTorchCases(t) {
		assert.True(t, known[c.Op], "case %q: op %q is run by no test", c.Name, c.Op)
	}
}

var elementwiseTorchOps = map[string]torchOp{
	"pow_scalar": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.Pow(in[0], c.num(t, "exponent"))
	},
	"rpow": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.Arith(OpPow, Operand{N: c.num(t, "base")}, Operand{T: in[0]})
	},
	"pow": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.Arith(OpPow, Operand{T: in[0]}, Operand{T: in[1]})
	},
	"gelu": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var approximate string
		c.arg(t, "approximate", &approximate)
		return e.Gelu(in[0], approximate)
	},
	"clamp": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.Clamp(in[0], float32(c.num(t, "min")), float32(c.num(t, "max")))
	},
	"relu": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) { return e.Relu(in[0]) },
	"abs":  func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) { return e.Abs(in[0]) },
}

// TestElementwiseMatchesTorch: pow in all three forms (integer exponents of
// negative bases, 0^0, x^0 on the tape, the gradient at 0, tensor^tensor),
// exact and tanh GELU, clamp/relu/abs at NaN, 0 and the bounds.
func TestElementwiseMatchesTorch(t *testing.T) { runTorchCases(t, elementwiseTorchOps) }

func TestElementwiseMistakesAreErrors(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2}, 1, 2)
	_, err := e.Gelu(x, "fast")
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorContains(t, err, `gelu: approximate must be "none" or "tanh", got "fast"`)
	_, err = e.Clamp(x, float32(math.NaN()), 1)
	assert.ErrorIs(t, err, ErrArgument)
	assert.ErrorContains(t, err, "clamp: a bound is NaN")
	_, err = e.Arith(OpPow, Operand{N: 2}, Operand{N: 3})
	assert.ErrorContains(t, err, "expected at least one tensor")
	_, err = e.PowTensor(x, host(t, []int{3}, 1, 2, 3))
	assert.ErrorIs(t, err, ErrShape)
}

// TestReluSelectsAsTorch: relu keeps NaN, and its gradient is the incoming
// one where x > 0 or is NaN and 0 elsewhere, selected: PyTorch 1.13 gives
// relu([nan, -1, 2, inf, -inf, 0, -0]) = [nan, 0, 2, inf, 0, 0, -0] (the
// zeros +0 but for relu(-0)) and, for the gradient [nan, inf, 5, 3, -inf,
// 3, 1], [nan, 0, 5, 3, 0, 0, 0] (an infinite gradient at a negative x is
// 0, not inf·0).
func TestReluSelectsAsTorch(t *testing.T) {
	e := newEngine(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x := host(t, []int{7}, nan, -1, 2, inf, -inf, 0, float32(math.Copysign(0, -1)))
	require.NoError(t, x.SetRequiresGrad(true))
	g := host(t, []int{7}, nan, inf, 5, 3, -inf, 3, 1)
	y := backwardOfWeighted(t, e, g, func() (*Tensor, error) { return e.Relu(x) })
	n, i := torchNum(math.NaN()), torchNum(math.Inf(1))
	assertSameFloats(t, []torchNum{n, 0, 2, i, 0, 0, 0}, values(t, y), 0, "relu")
	assertSameFloats(t, []torchNum{n, 0, 5, 3, 0, 0, 0}, values(t, x.Grad()), 0, "gradient")
	v := values(t, y)
	assert.False(t, math.Signbit(float64(v[1])) || math.Signbit(float64(v[5])), "relu(-1) and relu(+0) are +0: %v", v)
	assert.True(t, math.Signbit(float64(v[6])), "relu(-0) is -0, as PyTorch's")
}

// TestBiasReluSelectsAsTorch: relu(x + b) with b a row (a linear layer:
// BiasRelu, one pass where the backend has the kernel, or Add then Relu)
// keeps NaN and selects its gradient, which reaches both operands: for x +
// b = [[nan, -0.5, 0], [inf, -inf, -2]] and the gradient [[1, inf, 3], [4,
// 5, nan]], dx = [[1, 0, 0], [4, 0, 0]] and db = [5, 0, 0] (worked by hand:
// g where relu(x + b) > 0 or is NaN, summed over rows for b); the same
// with x of shape [2, 1, 3].
func TestBiasReluSelectsAsTorch(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	forms := map[string]func(e *Engine, x, b *Tensor) (*Tensor, error){
		"BiasRelu": (*Engine).BiasRelu,
		"Add then Relu": func(e *Engine, x, b *Tensor) (*Tensor, error) {
			s, err := e.Add(x, b)
			if err != nil {
				return nil, err
			}
			return e.Relu(s)
		},
	}
	for name, form := range forms {
		for _, shape := range [][]int{{2, 3}, {2, 1, 3}} {
			e := newEngine(t)
			x := host(t, shape, nan, -1, 2, inf, -inf, -2)
			b := host(t, []int{3}, 1, 0.5, -2)
			require.NoError(t, x.SetRequiresGrad(true))
			require.NoError(t, b.SetRequiresGrad(true))
			g := host(t, shape, 1, inf, 3, 4, 5, nan)
			y := backwardOfWeighted(t, e, g, func() (*Tensor, error) { return form(e, x, b) })
			n, i := torchNum(math.NaN()), torchNum(math.Inf(1))
			assert.Equal(t, shape, y.Shape(), name)
			assertSameFloats(t, []torchNum{n, 0, 0, i, 0, 0}, values(t, y), 0, name+": relu")
			assertSameFloats(t, []torchNum{1, 0, 0, 4, 0, 0}, values(t, x.Grad()), 0, name+": dx")
			assertSameFloats(t, []torchNum{5, 0, 0}, values(t, b.Grad()), 0, name+": db")
		}
	}
}

// backwardOfWeighted runs f on the tape and backward from sum(f() · g),
// so that f's inputs get the gradient g sends back; it returns f's result.
func backwardOfWeighted(t *testing.T, e *Engine, g *Tensor, f func() (*Tensor, error)) *Tensor {
	t.Helper()
	var y *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		if y, err = f(); err != nil {
			return err
		}
		loss, err := e.Mul(y, g)
		if err == nil {
			loss, err = e.Sum(loss)
		}
		if err == nil {
			_, err = e.Backward(loss)
		}
		return err
	}))
	return y
}

// TestReluMaskOfTheResult: the devices' relu gradient mask, from relu's
// result, is 1 at a positive or NaN result and 0 at either zero (relu of a
// negative x, or of -0, which PyTorch's relu keeps), also at the smallest
// and largest positive floats.
func TestReluMaskOfTheResult(t *testing.T) {
	e := newEngine(t)
	inf := float32(math.Inf(1))
	y := host(t, []int{9}, float32(math.NaN()), 0, float32(math.Copysign(0, -1)), 2, inf, 1e-40,
		math.SmallestNonzeroFloat32, math.MaxFloat32, 0x1p-126)
	m, err := e.build("relu_mask", y.shape, []*Tensor{y}, func(b *nodes, in []node) node { return b.reluMask(in[0]) })
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0, 0, 1, 1, 1, 1, 1, 1}, values(t, m))
}

// TestNanOfBothForms: nanOf is 0 at every number (±inf included) and NaN
// at NaN, in its CPU form and in its GPU form (a leading scale by 1 that
// ggml-cuda fuses with the rest), here both computed on the CPU.
func TestNanOfBothForms(t *testing.T) {
	e := newEngine(t)
	inf := float32(math.Inf(1))
	x := host(t, []int{6}, float32(math.NaN()), inf, -inf, 1, 0, -2)
	for _, gpu := range []bool{false, true} {
		y, err := e.build("nan_of", x.shape, []*Tensor{x}, func(b *nodes, in []node) node {
			b.gpu = gpu
			return b.nanOf(in[0])
		})
		require.NoError(t, err)
		v := values(t, y)
		assert.True(t, math.IsNaN(float64(v[0])), "gpu %v: %v", gpu, v)
		for i, z := range v[1:] {
			assert.Zero(t, z, "gpu %v, element %d", gpu, i+1)
		}
	}
}
