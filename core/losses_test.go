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
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.MSELoss(in[0], in[1], "") },
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
		{"mse sum", []*Tensor{x(1, 2, 3), x(1, 0, 5)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.MSELoss(in[0], in[1], "sum") },
			8, [][]float64{{0, 4, -4}, {0, -4, 4}}},
		{"mse none", []*Tensor{x(1, 2, 3), x(1, 0, 5)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.MSELoss(in[0], in[1], "none")), x(1, -2, 3)))
			},
			0 - 2*4 + 3*4, [][]float64{{0, -8, -12}, {0, 8, 12}}},
		{"bce sum weight", []*Tensor{x(0.2, 0.7), x(0, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return e.BCELoss(in[0], in[1], BCELossOptions{Reduction: "sum", Weight: x(2, 0.5)})
			},
			-(2*math.Log(0.8) + 0.5*math.Log(0.7)), [][]float64{{2 / 0.8, -0.5 / 0.7}, {2 * math.Log(0.8/0.2), 0.5 * math.Log(0.3/0.7)}}},
		{"bce none", []*Tensor{x(0.2, 0.7), x(0, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.BCELoss(in[0], in[1], BCELossOptions{Reduction: "none"})), x(3, -1)))
			},
			-(3*math.Log(0.8) - math.Log(0.7)), [][]float64{{3 / 0.8, 1 / 0.7}, {3 * math.Log(0.8/0.2), -math.Log(0.3 / 0.7)}}},
		{"bce", []*Tensor{x(0.2, 0.7), x(0, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.BCELoss(in[0], in[1], BCELossOptions{}) },
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

// labelArgs reads the arguments the losses over class labels share:
// reduction, weight (nil if absent) and ignore_index (nil if absent).
func labelArgs(t *testing.T, c torchCase) (reduction string, weight *Tensor, ignore *int) {
	c.arg(t, "reduction", &reduction)
	var w []float32
	if c.arg(t, "weight", &w) {
		weight = host(t, []int{len(w)}, w...)
	}
	var ig int
	if c.arg(t, "ignore_index", &ig) {
		ignore = &ig
	}
	return reduction, weight, ignore
}

var lossTorchOps = map[string]torchOp{
	"cross_entropy": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var o CrossEntropyOptions
		o.Reduction, o.Weight, o.IgnoreIndex = labelArgs(t, c)
		c.arg(t, "label_smoothing", &o.LabelSmoothing)
		var labels []int
		if c.arg(t, "labels", &labels) {
			return e.CrossEntropyLabels(in[0], labels, o)
		}
		return e.CrossEntropy(in[0], in[1], o)
	},
	"bce_loss": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.BCELoss(in[0], in[1], BCELossOptions{})
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

// newLossGradCases: the losses of issue 12 against float64 references
// (written out here from PyTorch's definitions), then by gradcheck; the
// inputs keep away from the kinks, which the PyTorch cases cover.
func newLossGradCases(t *testing.T) []gradCase {
	v := func(shape []int, x []float64) *Tensor {
		f := make([]float32, len(x))
		for i, a := range x {
			f[i] = float32(a)
		}
		return host(t, shape, f...)
	}
	s24 := []int{2, 4}
	bx := []float64{-3, -0.5, 0.2, 2, 1, -1.5, 4, 0.7}
	by := []float64{0, 1, 0.3, 0.9, 0.5, 0.2, 1, 0}
	pw := []float64{2, 0.5, 1, 3}
	bce := func(v []float64) float64 { // v: x then y, mean
		total := 0.0
		for i := 0; i < 8; i++ {
			x, y, p := v[i], v[8+i], pw[i%4]
			total += -(p*y*math.Log(1/(1+math.Exp(-x))) + (1-y)*math.Log(1-1/(1+math.Exp(-x))))
		}
		return total / 8
	}
	hx := []float64{0.1, 2, -1.7, 0.4, 3, -0.2, 1.2, -4}
	hy := []float64{0.5, 0.3, 0.2, -0.35, 0.1, 0.25, 0.5, -1}
	huber := func(delta float64, smooth bool) func([]float64) float64 { // sum
		return func(v []float64) float64 {
			total := 0.0
			for i := 0; i < 8; i++ {
				a := math.Abs(v[i] - v[8+i])
				l := delta * (a - 0.5*delta)
				if a < delta {
					l = 0.5 * a * a
				}
				if smooth {
					l /= delta
				}
				total += l
			}
			return total
		}
	}
	kx := logSoftmaxRef([]float64{0.5, -1, 2, 0.3})
	kx = append(kx, logSoftmaxRef([]float64{1, 1.5, -0.5, 0})...)
	ky := []float64{0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.4, 0.1}
	kl := func(v []float64) float64 { // batchmean
		total := 0.0
		for i := 0; i < 8; i++ {
			total += v[8+i] * (math.Log(v[8+i]) - v[i])
		}
		return total / 2
	}
	nllX := kx
	nll := func(v []float64) float64 { // labels {3, 1} (0-based 2, 0), weight {1, 2, 0.5, 1}: mean
		return -(0.5*v[2] + 1*v[4]) / 1.5
	}
	split := func(f func([]float64) float64, x, y []float64) [][]float64 {
		xy := append(append([]float64(nil), x...), y...)
		g := refGrad(f, xy)
		return [][]float64{g[:len(x)], g[len(x):]}
	}
	cat := func(x, y []float64) []float64 { return append(append([]float64(nil), x...), y...) }
	return []gradCase{
		{"binary_cross_entropy_with_logits pos_weight", []*Tensor{v(s24, bx), v(s24, by)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return e.BCEWithLogits(in[0], in[1], BCEWithLogitsOptions{PosWeight: v([]int{4}, pw)})
			}, bce(cat(bx, by)), split(bce, bx, by)},
		{"huber_loss", []*Tensor{v(s24, hx), v(s24, hy)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.HuberLoss(in[0], in[1], "sum", 1.5) },
			huber(1.5, false)(cat(hx, hy)), split(huber(1.5, false), hx, hy)},
		{"smooth_l1_loss", []*Tensor{v(s24, hx), v(s24, hy)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.SmoothL1Loss(in[0], in[1], "sum", 0.8) },
			huber(0.8, true)(cat(hx, hy)), split(huber(0.8, true), hx, hy)},
		{"kl_div batchmean", []*Tensor{v(s24, kx), v(s24, ky)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.KLDiv(in[0], in[1], "batchmean", false) },
			kl(cat(kx, ky)), split(kl, kx, ky)},
		{"nll_loss weight", []*Tensor{v(s24, nllX)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return e.NLLLoss(in[0], []int{2, 0}, NLLLossOptions{Weight: v([]int{4}, []float64{1, 2, 0.5, 1})})
			}, nll(nllX), [][]float64{refGrad(nll, nllX)}},
	}
}

func TestNewLossGradients(t *testing.T) {
	runGradCases(t, newLossGradCases(t), gradChecks{})
}

var newLossTorchOps = map[string]torchOp{
	"nll_loss": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var o NLLLossOptions
		o.Reduction, o.Weight, o.IgnoreIndex = labelArgs(t, c)
		var labels []int
		require.True(t, c.arg(t, "labels", &labels))
		return e.NLLLoss(in[0], labels, o)
	},
	"binary_cross_entropy_with_logits": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var o BCEWithLogitsOptions
		c.arg(t, "reduction", &o.Reduction)
		var pw []float32
		if c.arg(t, "pos_weight", &pw) {
			o.PosWeight = host(t, []int{len(pw)}, pw...)
		}
		var w [][]float32
		if c.arg(t, "weight", &w) {
			var flat []float32
			for _, r := range w {
				flat = append(flat, r...)
			}
			o.Weight = host(t, []int{len(w), len(w[0])}, flat...)
		}
		return e.BCEWithLogits(in[0], in[1], o)
	},
	"l1_loss": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var red string
		c.arg(t, "reduction", &red)
		return e.L1Loss(in[0], in[1], red)
	},
	"smooth_l1_loss": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var red string
		c.arg(t, "reduction", &red)
		beta := 1.0
		c.arg(t, "beta", &beta)
		return e.SmoothL1Loss(in[0], in[1], red, beta)
	},
	"huber_loss": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var red string
		c.arg(t, "reduction", &red)
		delta := 1.0
		c.arg(t, "delta", &delta)
		return e.HuberLoss(in[0], in[1], red, delta)
	},
	"kl_div": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var red string
		c.arg(t, "reduction", &red)
		var logTarget bool
		c.arg(t, "log_target", &logTarget)
		return e.KLDiv(in[0], in[1], red, logTarget)
	},
}

// TestNewLossesMatchTorch (testdata/torch_losses.json): nll_loss with
// weights, ignore_index (a class, and -100) and a -inf log-probability;
// binary_cross_entropy_with_logits at ±100, ±88 and 0, with pos_weight and
// weight; l1, smooth_l1 (beta 0, 0.5, 1, 2.5) and huber (delta 0.5, 1,
// 2.5) at d = 0 and |d| = beta; kl_div with zero targets (its target
// gradient NaN there, as torch 1.13's), log_target, batchmean; every
// reduction, both operands' gradients.
func TestNewLossesMatchTorch(t *testing.T) {
	runTorchFile(t, "testdata/torch_losses.json", newLossTorchOps)
}

// TestTorchLossCasesAreAllRun: every op of torch_losses.json is run.
func TestTorchLossCasesAreAllRun(t *testing.T) {
	for _, c := range loadTorchFile(t, "testdata/torch_losses.json") {
		assert.Contains(t, newLossTorchOps, c.Op, "case %q", c.Name)
	}
}

func TestNewLossMistakesAreErrors(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3}, 1, 2, 3, 0, 1, 0)
	y := host(t, []int{2, 3}, 1, 0, 0, 0, 1, 0)
	y2 := host(t, []int{3, 2}, 1, 0, 0, 0, 1, 0)
	wGrad := host(t, []int{3}, 1, 2, 3)
	require.NoError(t, wGrad.SetRequiresGrad(true))
	for _, c := range []struct {
		name string
		run  func() (*Tensor, error)
		want string
		kind error
	}{
		{"nll label out of range", func() (*Tensor, error) { return e.NLLLoss(x, []int{0, 3}, NLLLossOptions{}) },
			"nll_loss: label 4 at row 2 is out of range 1..3", ErrArgument},
		{"nll labels count", func() (*Tensor, error) { return e.NLLLoss(x, []int{0}, NLLLossOptions{}) },
			"nll_loss: 1 labels for input of shape", ErrShape},
		{"nll weight shape", func() (*Tensor, error) {
			return e.NLLLoss(x, []int{0, 1}, NLLLossOptions{Weight: host(t, []int{2}, 1, 2)})
		}, "nll_loss: weight of shape 2 for 3 classes", ErrShape},
		{"nll batchmean", func() (*Tensor, error) { return e.NLLLoss(x, []int{0, 1}, NLLLossOptions{Reduction: "batchmean"}) },
			`nll_loss: reduction must be "mean", "sum" or "none", got "batchmean"`, ErrArgument},
		{"bce shapes", func() (*Tensor, error) { return e.BCEWithLogits(x, y2, BCEWithLogitsOptions{}) },
			"binary_cross_entropy_with_logits: input shape 2x3 and target shape 3x2 differ", ErrShape},
		{"bce pos_weight shape", func() (*Tensor, error) {
			return e.BCEWithLogits(x, y, BCEWithLogitsOptions{PosWeight: host(t, []int{2}, 1, 2)})
		}, "do not broadcast", ErrShape},
		{"bce pos_weight too big", func() (*Tensor, error) {
			return e.BCEWithLogits(x, y, BCEWithLogitsOptions{PosWeight: host(t, []int{2, 2, 3}, make([]float32, 12)...)})
		}, "does not broadcast to the input's shape", ErrShape},
		{"bce weight requires grad", func() (*Tensor, error) {
			return e.BCEWithLogits(x, y, BCEWithLogitsOptions{Weight: wGrad})
		}, "weight requires grad", ErrArgument},
		{"l1 reduction", func() (*Tensor, error) { return e.L1Loss(x, y, "avg") }, `l1_loss: reduction must be`, ErrArgument},
		{"smooth_l1 negative beta", func() (*Tensor, error) { return e.SmoothL1Loss(x, y, "", -1) },
			"smooth_l1_loss: beta must be >= 0, got -1", ErrArgument},
		{"smooth_l1 beta 0 shapes", func() (*Tensor, error) { return e.SmoothL1Loss(x, y2, "", 0) },
			"smooth_l1_loss: input shape", ErrShape},
		{"huber zero delta", func() (*Tensor, error) { return e.HuberLoss(x, y, "", 0) },
			"huber_loss: delta must be > 0", ErrArgument},
		{"huber NaN delta", func() (*Tensor, error) { return e.HuberLoss(x, y, "", math.NaN()) },
			"huber_loss: delta must be a finite number", ErrArgument},
		{"kl_div reduction", func() (*Tensor, error) { return e.KLDiv(x, y, "avg", false) },
			`kl_div: reduction must be "mean", "sum", "none" or "batchmean", got "avg"`, ErrArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.run()
			require.Error(t, err)
			assert.ErrorContains(t, err, c.want)
			assert.ErrorIs(t, err, c.kind)
		})
	}
}
