package core

import (
	"math"
	"testing"
)

func lossGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	return []gradCase{
		{"mse", []*Tensor{x(1, 2, 3), x(1, 0, 5)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.MSELoss(in[0], in[1]) },
			8. / 3, [][]float64{{0, 4. / 3, -4. / 3}, {0, -4. / 3, 4. / 3}}},
		{"cross_entropy", []*Tensor{m23(1, 2, 3, 1, 1, 1), m23(0, 0, 1, 1, 0, 0)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.CrossEntropy(in[0], in[1]) },
			(-math.Log(softmax([]float64{1, 2, 3})[2]) - math.Log(1./3)) / 2,
			[][]float64{ceGrad([]float64{1, 2, 3, 1, 1, 1}, []float64{0, 0, 1, 1, 0, 0}, 3), ceTargetGrad([]float64{1, 2, 3, 1, 1, 1}, 3)}},
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
