package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lossGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	m34 := func(v ...float64) *Tensor {
		f := make([]float32, len(v))
		for i, a := range v {
			f[i] = float32(a)
		}
		return host(t, []int{3, 4}, f...)
	}
	ceCot := []float32{0.5, -1.5, 2}
	ceOpts := func(red string) CrossEntropyOptions {
		ig := 3
		return CrossEntropyOptions{Reduction: red, LabelSmoothing: 0.3, IgnoreIndex: &ig, Weight: x(1, 2, 0.5, 3)}
	}
	return []gradCase{
		{"mse", []*Tensor{x(1, 2, 3), x(1, 0, 5)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.MSELoss(in[0], in[1]) },
			8. / 3, [][]float64{{0, 4. / 3, -4. / 3}, {0, -4. / 3, 4. / 3}}},
		{"cross_entropy", []*Tensor{m23(1, 2, 3, 1, 1, 1), m23(0, 0, 1, 1, 0, 0)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.CrossEntropy(in[0], in[1]) },
			(-math.Log(softmax([]float64{1, 2, 3})[2]) - math.Log(1./3)) / 2,
			[][]float64{ceGrad([]float64{1, 2, 3, 1, 1, 1}, []float64{0, 0, 1, 1, 0, 0}, 3), ceTargetGrad([]float64{1, 2, 3, 1, 1, 1}, 3)}},
		{"cross_entropy labels weight smoothing ignore mean", []*Tensor{m34(ceX...)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return e.CrossEntropyLabels(in[0], ceLabels, ceOpts("mean"))
			},
			ceLabelsRef(ceX, "mean", nil), [][]float64{refGrad(func(v []float64) float64 { return ceLabelsRef(v, "mean", nil) }, ceX)}},
		{"cross_entropy labels weight smoothing ignore sum", []*Tensor{m34(ceX...)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return e.CrossEntropyLabels(in[0], ceLabels, ceOpts("sum"))
			},
			ceLabelsRef(ceX, "sum", nil), [][]float64{refGrad(func(v []float64) float64 { return ceLabelsRef(v, "sum", nil) }, ceX)}},
		{"cross_entropy labels weight smoothing ignore none", []*Tensor{m34(ceX...)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.CrossEntropyLabels(in[0], ceLabels, ceOpts("none"))), x(ceCot...)))
			},
			ceLabelsRef(ceX, "none", ceCot64), [][]float64{refGrad(func(v []float64) float64 { return ceLabelsRef(v, "none", ceCot64) }, ceX)}},
		{"cross_entropy probabilities not summing to 1", []*Tensor{m23(1, 2, 3, 1, -1, 0.5), m23(0.5, 0.7, 0.1, 0, 0.2, 0.3)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return e.CrossEntropy(in[0], in[1], CrossEntropyOptions{LabelSmoothing: 0.1, Weight: x(1, 2, 0.5)})
			},
			ceProbsRef(ceP), [][]float64{refGrad(func(v []float64) float64 { return ceProbsRef(append(v, ceP[6:]...)) }, ceP[:6]),
				refGrad(func(v []float64) float64 { return ceProbsRef(append(append([]float64(nil), ceP[:6]...), v...)) }, ceP[6:])}},
		{"bce", []*Tensor{x(0.2, 0.7), x(0, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.BCELoss(in[0], in[1]) },
			-(math.Log(0.8) + math.Log(0.7)) / 2, [][]float64{{1 / 0.8 / 2, -1 / 0.7 / 2}, {math.Log(0.8/0.2) / 2, math.Log(0.3/0.7) / 2}}},
	}
}

// ceGrad is (softmax(row) - target) / rows.
func ceGrad(logits, target []float64, classes int) []float64 {
	rows := len(logits) / classes
	out := make([]float64, len(logits))
	for r := 0; r < rows; r++ {
		p := softmax(logits[r*classes : (r+1)*classes])
		for c := range p {
			out[r*classes+c] = (p[c] - target[r*classes+c]) / float64(rows)
		}
	}
	return out
}

// ceTargetGrad is -log(softmax(row)) / rows.
func ceTargetGrad(logits []float64, classes int) []float64 {
	rows := len(logits) / classes
	out := make([]float64, len(logits))
	for r := 0; r < rows; r++ {
		for c, p := range softmax(logits[r*classes : (r+1)*classes]) {
			out[r*classes+c] = -math.Log(p) / float64(rows)
		}
	}
	return out
}

func TestLossGradients(t *testing.T) {
	runGradCases(t, lossGradCases(t), gradChecks{})
}

var lossTorchOps = map[string]torchOp{
	"cross_entropy": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var o CrossEntropyOptions
		c.arg(t, "reduction", &o.Reduction)
		c.arg(t, "label_smoothing", &o.LabelSmoothing)
		var w []float32
		if c.arg(t, "weight", &w) {
			o.Weight = host(t, []int{len(w)}, w...)
		}
		var ig int
		if c.arg(t, "ignore_index", &ig) {
			o.IgnoreIndex = &ig
		}
		var labels []int
		if c.arg(t, "labels", &labels) {
			return e.CrossEntropyLabels(in[0], labels, o)
		}
		return e.CrossEntropy(in[0], in[1], o)
	},
	"bce_loss": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.BCELoss(in[0], in[1])
	},
}

// TestLossesMatchTorch: cross_entropy with every reduction, class weights,
// ignore_index (in and out of the class range, every row ignored), label
// smoothing and their combinations, for labels and for probabilities (also
// not summing to 1), with -inf logits; bce_loss at p = 0 and 1.
func TestLossesMatchTorch(t *testing.T) { runTorchCases(t, lossTorchOps) }

// The options case: logits [3, 4], labels (0-based) with row 3 ignored.
var (
	ceX      = []float64{1, -2, 0.5, 3, 0, 1, 2, -1, 2, 0.25, -0.5, 1}
	ceLabels = []int{1, 0, 3}
	ceCot64  = []float64{0.5, -1.5, 2}
	// logits [2, 3] then target [2, 3]
	ceP = []float64{1, 2, 3, 1, -1, 0.5, 0.5, 0.7, 0.1, 0, 0.2, 0.3}
)

// ceLabelsRef is torch 1.13's cross_entropy of ceX-like logits [3, 4]
// against ceLabels with weight {1, 2, 0.5, 3}, label_smoothing 0.3 and
// ignore_index 3, in float64: per row (1-e) w[y] nll + e/C * -sum_c w[c]
// logp[c], ignored rows 0; the mean divides by the weights of the labels
// kept. For "none" it is the dot product with cot.
func ceLabelsRef(x []float64, reduction string, cot []float64) float64 {
	w, eps, classes := []float64{1, 2, 0.5, 3}, 0.3, 4
	total, denom := 0.0, 0.0
	for r, y := range ceLabels {
		if y == 3 {
			continue
		}
		lp := logSoftmaxRef(x[r*classes : (r+1)*classes])
		smooth := 0.0
		for c, l := range lp {
			smooth -= w[c] * l
		}
		loss := (1-eps)*-w[y]*lp[y] + eps/float64(classes)*smooth
		if cot != nil {
			loss *= cot[r]
		}
		total += loss
		denom += w[y]
	}
	if reduction == "mean" {
		return total / denom
	}
	return total
}

// ceProbsRef is torch 1.13's cross_entropy of logits v[:6] ([2, 3])
// against probabilities v[6:] with weight {1, 2, 0.5} and label_smoothing
// 0.1, mean over the rows.
func ceProbsRef(v []float64) float64 {
	w, eps, total := []float64{1, 2, 0.5}, 0.1, 0.0
	for r := 0; r < 2; r++ {
		lp := logSoftmaxRef(v[r*3 : r*3+3])
		for c := range lp {
			tgt := v[6+r*3+c]*(1-eps) + eps/3
			total -= lp[c] * tgt * w[c]
		}
	}
	return total / 2
}

func TestCrossEntropyMistakesAreErrors(t *testing.T) {
	e := newEngine(t)
	logits := host(t, []int{2, 3}, 1, 2, 3, 0, 1, 0)
	probs := host(t, []int{2, 3}, 1, 0, 0, 0, 1, 0)
	ig := 1
	w := host(t, []int{3}, 1, 2, 3)
	wGrad := host(t, []int{3}, 1, 2, 3)
	require.NoError(t, wGrad.SetRequiresGrad(true))
	for _, c := range []struct {
		name string
		run  func() (*Tensor, error)
		want string
		kind error
	}{
		{"label out of range", func() (*Tensor, error) { return e.CrossEntropyLabels(logits, []int{0, 3}) },
			"label 4 at row 2 is out of range 1..3", ErrArgument},
		{"negative label", func() (*Tensor, error) { return e.CrossEntropyLabels(logits, []int{-1, 0}) },
			"label 0 at row 1 is out of range 1..3", ErrArgument},
		{"reduction", func() (*Tensor, error) {
			return e.CrossEntropyLabels(logits, []int{0, 1}, CrossEntropyOptions{Reduction: "avg"})
		}, `reduction must be "mean", "sum" or "none", got "avg"`, ErrArgument},
		{"label smoothing", func() (*Tensor, error) {
			return e.CrossEntropyLabels(logits, []int{0, 1}, CrossEntropyOptions{LabelSmoothing: -0.1})
		}, "label_smoothing must be between 0 and 1, got -0.1", ErrArgument},
		{"label smoothing NaN", func() (*Tensor, error) {
			return e.CrossEntropy(logits, probs, CrossEntropyOptions{LabelSmoothing: math.NaN()})
		}, "label_smoothing must be between 0 and 1", ErrArgument},
		{"weight shape", func() (*Tensor, error) {
			return e.CrossEntropyLabels(logits, []int{0, 1}, CrossEntropyOptions{Weight: host(t, []int{2}, 1, 2)})
		}, "weight of shape 2 for 3 classes", ErrShape},
		{"weight requires grad", func() (*Tensor, error) {
			return e.CrossEntropyLabels(logits, []int{0, 1}, CrossEntropyOptions{Weight: wGrad})
		}, "requires grad", ErrArgument},
		{"ignore_index with probabilities", func() (*Tensor, error) {
			return e.CrossEntropy(logits, probs, CrossEntropyOptions{IgnoreIndex: &ig, Weight: w})
		}, "ignore_index is not supported for probability targets", ErrArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.run()
			require.Error(t, err)
			assert.ErrorContains(t, err, c.want)
			assert.ErrorIs(t, err, c.kind)
		})
	}
	// An ignored label need not be a class: PyTorch's -100 is ignored too.
	ig = -100
	l, err := e.CrossEntropyLabels(logits, []int{-100, 2}, CrossEntropyOptions{IgnoreIndex: &ig})
	require.NoError(t, err)
	assert.InDelta(t, -logSoftmaxRef([]float64{0, 1, 0})[2], float64(values(t, l)[0]), 1e-6)
}
