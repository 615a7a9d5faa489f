package llm

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
)

// A batch's logits are each sequence's own (grouped-query attention over
// each sequence alone), and a LoRA step over the batch gets the gradients
// of the sequences' losses summed: one pass where B passes were needed.
func TestLogitsBatchIsEachSequences(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	vocab := writeTestModel(t, path, 9)
	// setup loads the model with the same adapters (B nonzero, so that
	// they matter) each time.
	setup := func() (*Model, *LoRA) {
		m, err := Load(newEngine(t), path)
		require.NoError(t, err)
		l, err := m.AddLoRA(LoRAOptions{R: 2, Alpha: 4, Targets: []string{"attn_q", "attn_v"}})
		require.NoError(t, err)
		rng := rand.New(rand.NewSource(4))
		for _, p := range l.Parameters() {
			v := make([]float32, p.Numel())
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.05)
			}
			h, err := core.FromFloat32(v, p.Shape()...)
			require.NoError(t, err)
			require.NoError(t, m.e.NoGrad(func() error { return m.e.Assign(p, h) }))
		}
		return m, l
	}
	m, _ := setup()
	rng := rand.New(rand.NewSource(5))
	const B, T = 3, 9
	batch := make([][]int, B)
	for b := range batch {
		batch[b] = make([]int, T+1)
		for i := range batch[b] {
			batch[b][i] = rng.Intn(vocab)
		}
	}
	inputs := make([][]int, B)
	for b := range batch {
		inputs[b] = batch[b][:T]
	}
	y, err := m.LogitsBatch(inputs)
	require.NoError(t, err)
	require.Equal(t, []int{B, T, vocab}, y.Shape())
	all, err := y.Float32s()
	require.NoError(t, err)
	for b := range batch {
		one, err := m.Logits(inputs[b])
		require.NoError(t, err)
		want, err := one.Float32s()
		require.NoError(t, err)
		assert.InDeltaSlice(t, toF64(want), toF64(all[b*T*vocab:(b+1)*T*vocab]), 1e-5, "sequence %d", b+1)
	}
	one, err := m.LogitsBatch(inputs[:1])
	require.NoError(t, err)
	assert.Equal(t, []int{1, T, vocab}, one.Shape())

	// Gradients: the batch's summed loss against each sequence's, summed.
	grads := func(loss func(m *Model) (*core.Tensor, error)) [][]float32 {
		m, l := setup()
		var total *core.Tensor
		require.NoError(t, m.e.WithGradTape(func() (err error) { total, err = loss(m); return err }))
		_, err := m.e.Backward(total)
		require.NoError(t, err)
		var out [][]float32
		for _, p := range l.Parameters() {
			g, err := p.Grad().Float32s()
			require.NoError(t, err)
			out = append(out, g)
		}
		return out
	}
	labels := func(bs ...int) []int {
		var out []int
		for _, b := range bs {
			out = append(out, batch[b][1:]...)
		}
		return out
	}
	together := grads(func(m *Model) (*core.Tensor, error) {
		y, err := m.LogitsBatch(inputs)
		if err != nil {
			return nil, err
		}
		flat, err := m.e.Reshape(y, B*T, vocab)
		if err != nil {
			return nil, err
		}
		loss, err := m.e.CrossEntropyLabels(flat, labels(0, 1, 2))
		if err != nil {
			return nil, err
		}
		return m.e.Scale(loss, B) // the mean over B·T rows, times B
	})
	apart := grads(func(m *Model) (*core.Tensor, error) {
		var total *core.Tensor
		for b := range batch {
			y, err := m.Logits(inputs[b])
			if err != nil {
				return nil, err
			}
			loss, err := m.e.CrossEntropyLabels(y, labels(b))
			if err != nil {
				return nil, err
			}
			if total == nil {
				total = loss
			} else if total, err = m.e.Add(total, loss); err != nil {
				return nil, err
			}
		}
		return total, nil
	})
	for i := range together {
		assert.InDeltaSlice(t, toF64(apart[i]), toF64(together[i]), 1e-5, "parameter %d", i)
	}
}

// A batch's sequences have one length, and a cache takes one sequence.
func TestLogitsBatchRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	writeTestModel(t, path, 9)
	m, err := Load(newEngine(t), path)
	require.NoError(t, err)
	_, err = m.LogitsBatch([][]int{{1, 2, 3}, {1, 2}})
	assert.ErrorContains(t, err, "sequence 2 has 2 token(s) where the first has 3")
	_, err = m.LogitsBatch([][]int{{1, 2}, {1, 1 << 20}})
	assert.ErrorContains(t, err, "token 2 of sequence 2")
	_, err = m.LogitsBatch(nil)
	assert.ErrorContains(t, err, "no tokens")
	_, err = m.forward([][]int{{1}, {2}}, &kvCache{size: 8})
	assert.ErrorContains(t, err, "a key/value cache takes one sequence")
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
