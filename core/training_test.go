package core

import (
	"math"
	"math/rand"
	"testing"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Whole training loops on a small MLP: XOR, a spiral, half-precision
// weights, a flat loop.

// mlp is a 2-layer perceptron trained by the standard step.
type mlp struct {
	e      *Engine
	w1, b1 *Tensor
	w2, b2 *Tensor
	opt    *Adam

	lastLoss *Tensor // the last step's
}

func newMLP(t *testing.T, e *Engine, in, hidden, out int, lr float32, rng *rand.Rand) *mlp {
	init := func(rows, cols int) *Tensor {
		v := make([]float32, rows*cols)
		bound := 1 / math.Sqrt(float64(cols))
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * bound)
		}
		return host(t, []int{rows, cols}, v...)
	}
	m := &mlp{e: e, w1: init(hidden, in), b1: init(1, hidden), w2: init(out, hidden), b2: init(1, out)}
	var err error
	m.opt, err = NewAdam(e, []*Tensor{m.w1, m.b1, m.w2, m.b2}, AdamOptions{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	require.NoError(t, err)
	return m
}

func (m *mlp) forward(x *Tensor) (*Tensor, error) {
	e := m.e
	h, err := e.Linear(x, m.w1)
	if err == nil {
		h, err = e.Add(h, m.b1)
	}
	if err == nil {
		h, err = e.Tanh(h)
	}
	if err == nil {
		h, err = e.Linear(h, m.w2)
	}
	if err == nil {
		h, err = e.Add(h, m.b2)
	}
	return h, err
}

// step is the standard step: zero_grad; forward in a tape; backward; step;
// loss:item().
func (m *mlp) step(t *testing.T, x *Tensor, labels []int) float32 {
	m.opt.ZeroGrad()
	var loss *Tensor
	require.NoError(t, m.e.WithGradTape(func() error {
		logits, err := m.forward(x)
		if err != nil {
			return err
		}
		loss, err = m.e.CrossEntropyLabels(logits, labels)
		return err
	}))
	_, err := m.e.Backward(loss)
	require.NoError(t, err)
	require.NoError(t, m.opt.Step())
	m.lastLoss = loss
	v, err := loss.Item()
	require.NoError(t, err)
	return v
}

func (m *mlp) accuracy(t *testing.T, x *Tensor, labels []int) float64 {
	logits, err := m.forward(x)
	require.NoError(t, err)
	v := values(t, logits)
	classes := logits.Shape()[1]
	right := 0
	for i, l := range labels {
		best := 0
		for c := 1; c < classes; c++ {
			if v[i*classes+c] > v[i*classes+best] {
				best = c
			}
		}
		if best == l {
			right++
		}
	}
	return float64(right) / float64(len(labels))
}

func TestMLPLearnsXOR(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{4, 2}, 0, 0, 0, 1, 1, 0, 1, 1)
	labels := []int{0, 1, 1, 0}
	m := newMLP(t, e, 2, 8, 2, 0.05, rand.New(rand.NewSource(1)))
	for i := 0; i < 300; i++ {
		m.step(t, x, labels)
	}
	assert.Equal(t, 1.0, m.accuracy(t, x, labels))
}

// spiral is the classic 2-D, 3-class spiral (CS231n), n points a class.
func spiral(n int, rng *rand.Rand) ([]float32, []int) {
	var x []float32
	var y []int
	for c := 0; c < 3; c++ {
		for i := 0; i < n; i++ {
			r := float64(i) / float64(n)
			th := float64(c)*4 + 4*r + rng.NormFloat64()*0.2
			x = append(x, float32(r*math.Sin(th)), float32(r*math.Cos(th)))
			y = append(y, c)
		}
	}
	return x, y
}

func TestMLPLearnsSpiralAndKeepsTheLoopFlat(t *testing.T) {
	e := newEngine(t)
	rng := rand.New(rand.NewSource(7))
	xs, labels := spiral(100, rng)
	x := host(t, []int{300, 2}, xs...)
	m := newMLP(t, e, 2, 64, 3, 0.02, rng)

	var first residency.Ledger
	for i := 0; i < 1500; i++ {
		before, stats := e.Residency().Ledger(), e.Stats()
		m.step(t, x, labels)
		after := e.Residency().Ledger()
		assert.LessOrEqual(t, e.Stats().GraphComputes-stats.GraphComputes, int64(2), "graph computes in step %d", i)
		if i == 1 {
			first = after
		}
		if i > 1 && i%100 == 0 {
			// The persistent pool (weights, grads, moments) is allocated by
			// step 2 and never grows; each step uploads its batch and labels,
			// nothing else.
			assert.Equal(t, first.PBufferBytes, after.PBufferBytes, "persistent pool at step %d", i)
			assert.Equal(t, first.PNBuffers, after.PNBuffers)
			assert.Equal(t, int64(300*2*4+300*4), after.H2DBytes-before.H2DBytes, "h2d bytes of step %d (batch, i32 labels)", i)
		}
	}
	assert.GreaterOrEqual(t, m.accuracy(t, x, labels), 0.98)
}

func TestHalfPrecisionWeightsTrainWithF32State(t *testing.T) {
	for _, dtype := range []ggmlcgo.Type{ggmlcgo.F16, ggmlcgo.BF16} {
		e := newEngine(t)
		w := host(t, []int{3}, f32s(w0)...)
		require.NoError(t, w.SetRequiresGrad(true))
		require.NoError(t, w.MoveToDeviceAs(e, residency.Persistent, dtype))
		o := AdamOptions{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
		opt, err := NewAdam(e, []*Tensor{w}, o)
		require.NoError(t, err)
		target := host(t, []int{3}, f32s(tgt)...)
		for i := 0; i < 3; i++ {
			quadStep(t, e, w, target, opt.ZeroGrad, opt.Step)
		}
		assert.Equal(t, dtype, w.Dtype())
		assert.Equal(t, ggmlcgo.F32, w.Grad().Dtype(), "gradients are f32")
		tol := 2e-3
		if dtype == ggmlcgo.BF16 {
			tol = 1e-2
		}
		assertClose(t, refAdam(w0, tgt, o, 3), values(t, w), tol, dtype.String())
	}
}
