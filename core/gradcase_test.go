package core

import (
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The machinery shared by the op families' gradient tests (ops_*_test.go,
// losses_test.go): host tensors and their values, the gradCase table type,
// float64 references, and the runner that checks a family's cases against
// their reference values and by Gradcheck.

func host(t *testing.T, shape []int, v ...float32) *Tensor {
	t.Helper()
	x, err := FromFloat32(v, shape...)
	require.NoError(t, err)
	return x
}

func values(t *testing.T, x *Tensor) []float32 {
	t.Helper()
	v, err := x.Float32s()
	require.NoError(t, err)
	return v
}

// gradCase: loss = f(inputs); want[i] is the gradient of input i worked out
// by hand (or by a closed form in float64), independently of ggml.
type gradCase struct {
	name   string
	inputs []*Tensor
	f      func(e *Engine, x []*Tensor) (*Tensor, error)
	loss   float64
	want   [][]float64
}

// sumOf(e)(op(...)) is the sum of an op's result, passing its error on.
func sumOf(e *Engine) func(*Tensor, error) (*Tensor, error) {
	return func(y *Tensor, err error) (*Tensor, error) {
		if err != nil {
			return nil, err
		}
		return e.Sum(y)
	}
}

func (e *Engine) must(t *Tensor, err error) *Tensor {
	if err != nil {
		panic(err)
	}
	return t
}

// refGrad is the gradient of f at x by central differences in float64: an
// independent reference for ops whose gradient has no short closed form.
func refGrad(f func([]float64) float64, x []float64) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		h := 1e-6
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		out[i] = (f(xp) - f(xm)) / (2 * h)
	}
	return out
}

func softmax(x []float64) []float64 {
	s, out := 0.0, make([]float64, len(x))
	for _, v := range x {
		s += math.Exp(v)
	}
	for i, v := range x {
		out[i] = math.Exp(v) / s
	}
	return out
}

func assertClose(t *testing.T, want []float64, got []float32, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDelta(t, want[i], float64(got[i]), tol*(1+math.Abs(want[i])), "%s element %d", msg, i+1)
	}
}

// checkReference runs a gradCase's forward and backward and compares the
// loss and every input's gradient with the case's reference values.
func checkReference(t *testing.T, e *Engine, c gradCase, tol float64) {
	t.Helper()
	params := make([]*Tensor, len(c.inputs))
	for i, in := range c.inputs {
		params[i] = host(t, in.Shape(), values(t, in)...)
		require.NoError(t, params[i].SetRequiresGrad(true))
	}
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		loss, err = c.f(e, params)
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	got, err := loss.Item()
	require.NoError(t, err)
	assert.InDelta(t, c.loss, float64(got), 1e-4*(1+math.Abs(c.loss)), "loss")
	for i, p := range params {
		if c.want[i] == nil {
			continue
		}
		require.NotNil(t, p.Grad(), "input %d has no gradient", i+1)
		gv := values(t, p.Grad())
		require.Len(t, gv, len(c.want[i]))
		for j := range gv {
			assert.InDelta(t, c.want[i][j], float64(gv[j]), tol*(1+math.Abs(c.want[i][j])), "input %d element %d", i+1, j+1)
		}
	}
}

// gradChecks says how a family's cases are checked, by case name.
type gradChecks struct {
	// loose: cases whose gradients are compared with their reference values
	// to 2e-4 rather than 1e-4.
	loose []string
	// kinks: cases with a kink at or near their inputs, which central
	// differences straddle only by accident; their reference values cover
	// them, and Gradcheck skips them.
	kinks []string
}

// runGradCases checks every case of a family against its reference values
// (subtest "reference"), then every case but the kinks by Gradcheck
// (subtest "gradcheck").
func runGradCases(t *testing.T, cases []gradCase, how gradChecks) {
	t.Helper()
	for _, n := range slices.Concat(how.loose, how.kinks) {
		require.True(t, slices.ContainsFunc(cases, func(c gradCase) bool { return c.name == n }), "no case named %q", n)
	}
	t.Run("reference", func(t *testing.T) {
		e := newEngine(t)
		for _, c := range cases {
			tol := 1e-4
			if slices.Contains(how.loose, c.name) {
				tol = 2e-4
			}
			t.Run(c.name, func(t *testing.T) { checkReference(t, e, c, tol) })
		}
	})
	t.Run("gradcheck", func(t *testing.T) {
		e := newEngine(t)
		for _, c := range cases {
			if slices.Contains(how.kinks, c.name) {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				f := func(xs []*Tensor) (*Tensor, error) { return c.f(e, xs) }
				require.NoError(t, Gradcheck(e, f, c.inputs, 1e-2, 2e-3, 2e-2))
			})
		}
	})
}

func TestGradcheckCatchesAWrongGradient(t *testing.T) {
	e := newEngine(t)
	// exp's gradient replaced by 2*exp: gradcheck must object.
	wrong := func(xs []*Tensor) (*Tensor, error) {
		y, err := e.unaryOp("bad_exp", xs[0], savesOut, ggmlUnary("exp"), func(g, x, y *Tensor) (*Tensor, error) {
			h, err := e.Mul(g, y)
			if err != nil {
				return nil, err
			}
			return e.Scale(h, 2)
		})
		if err != nil {
			return nil, err
		}
		return e.Sum(y)
	}
	err := Gradcheck(e, wrong, []*Tensor{host(t, []int{2}, 0.1, 0.2)}, 1e-2, 2e-3, 2e-2)
	assert.ErrorContains(t, err, "central differences")
}

// runForced runs tests as subtests with *force set: a path the GPU takes
// (a package variable makes the CPU take it too) checked by the cases of
// the path it replaces.
func runForced(t *testing.T, force *bool, tests ...func(*testing.T)) {
	*force = true
	defer func() { *force = false }()
	for _, test := range tests {
		name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
		t.Run(name[strings.LastIndex(name, ".")+1:], test)
	}
}
