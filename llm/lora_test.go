package llm

import (
	"math"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
)

// lossOf is the mean cross-entropy of predicting each next token of ids.
func lossOf(t *testing.T, m *Model, ids []int) *core.Tensor {
	y, err := m.Logits(ids[:len(ids)-1])
	require.NoError(t, err)
	loss, err := m.e.CrossEntropyLabels(y, ids[1:])
	require.NoError(t, err)
	return loss
}

// train runs steps of AdamW (lr) on params, returning the first and last
// losses.
func train(t *testing.T, m *Model, params []*core.Tensor, lr float32, ids []int, steps int) (first, last float32) {
	opt, err := core.NewAdam(m.e, params, core.AdamOptions{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decoupled: true})
	require.NoError(t, err)
	for s := 0; s < steps; s++ {
		var loss *core.Tensor
		require.NoError(t, m.e.WithGradTape(func() error {
			loss = lossOf(t, m, ids)
			return nil
		}))
		_, err := m.e.Backward(loss)
		require.NoError(t, err)
		require.NoError(t, opt.Step())
		v, err := loss.Item()
		require.NoError(t, err)
		if s == 0 {
			first = v
		}
		last = v
	}
	return first, last
}

// Adapters trained by gglua over an f32 and a quantized base, saved as
// llama.cpp's adapter GGUF, give, applied by llama.cpp, the logits gglua
// computes with them; the base's own logits are unchanged by a new
// adapter (B is zero).
func TestLoRAAsLlamaCpp(t *testing.T) {
	ref, f32, q4 := quantizedPair(t, 5, "q4_0")
	ids := []int{1, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270}
	for _, path := range []string{f32, q4} {
		m, err := Load(newEngine(t), path)
		require.NoError(t, err)
		before, err := m.Logits(ids)
		require.NoError(t, err)
		base, err := before.Float32s()
		require.NoError(t, err)
		l, err := m.AddLoRA(LoRAOptions{R: 4, Alpha: 8, Targets: []string{"attn_q", "attn_v", "attn_output", "ffn_down"}})
		require.NoError(t, err)
		fresh, err := m.Logits(ids)
		require.NoError(t, err)
		same, err := fresh.Float32s()
		require.NoError(t, err)
		assert.Equal(t, base, same, "a new adapter changes nothing")
		first, last := train(t, m, l.Parameters(), 0.01, ids, 12)
		t.Logf("%s: loss %.4f -> %.4f over 12 steps", filepath.Base(path), first, last)
		assert.Less(t, last, first-0.5, "training lowers the loss")
		adapter := filepath.Join(t.TempDir(), "adapter.gguf")
		require.NoError(t, l.Save(adapter))
		y, err := m.Logits(ids)
		require.NoError(t, err)
		got, err := y.Float32s()
		require.NoError(t, err)
		want := ref.logits(t, path, ids, "--lora", adapter)
		worst, changed := 0.0, 0.0
		for i, row := range want {
			for j, v := range row {
				worst = math.Max(worst, math.Abs(v-float64(got[i*m.Vocab+j])))
				changed = math.Max(changed, math.Abs(v-float64(base[i*m.Vocab+j])))
			}
		}
		t.Logf("%s: with the adapter, largest difference from llama.cpp %.3g (the adapter moved logits by up to %.3g)", filepath.Base(path), worst, changed)
		assert.Less(t, worst, 1e-4, "logits with the adapter differ from llama.cpp's")
		assert.Greater(t, changed, 0.1, "the trained adapter changes the logits")
	}
}

// The adapters' gradients match the loss's derivative along random
// directions (central differences) on the f32 model. On a quantized model
// the forward rounds each product's input to 8 bits (as llama.cpp's), a
// step function no difference quotient can follow: there the gradients,
// which flow back through the quantized weights as they are, are compared
// with the f32 model's instead (the same weights but for the rounding).
func TestLoRAGradients(t *testing.T) {
	_, f32, q8 := quantizedPair(t, 6, "q8_0")
	ids := []int{1, 270, 271, 272, 273, 40, 41}
	var grads [2][]float64
	for k, path := range []string{f32, q8} {
		m, err := Load(newEngine(t), path)
		require.NoError(t, err)
		l, err := m.AddLoRA(LoRAOptions{R: 2, Alpha: 4, Targets: []string{"attn_q", "attn_k", "ffn_gate", "ffn_up"}})
		require.NoError(t, err)
		rng := rand.New(rand.NewSource(1)) // the same adapters on both models
		params := l.Parameters()
		values := make([][]float32, len(params))
		for i, p := range params { // B nonzero, so that A has a gradient too
			values[i] = make([]float32, p.Numel())
			for j := range values[i] {
				values[i][j] = float32(rng.NormFloat64() * 0.05)
			}
		}
		set := func(dir [][]float32, eps float32) {
			for i, p := range params {
				v := make([]float32, len(values[i]))
				for j := range v {
					v[j] = values[i][j]
					if dir != nil {
						v[j] += eps * dir[i][j]
					}
				}
				h, err := core.FromFloat32(v, p.Shape()...)
				require.NoError(t, err)
				require.NoError(t, m.e.NoGrad(func() error { return m.e.Assign(p, h) }))
			}
		}
		set(nil, 0)
		var loss *core.Tensor
		require.NoError(t, m.e.WithGradTape(func() error { loss = lossOf(t, m, ids); return nil }))
		_, err = m.e.Backward(loss)
		require.NoError(t, err)
		gs := make([][]float32, len(params))
		for i, p := range params {
			require.NotNil(t, p.Grad(), "parameter %d has a gradient", i)
			gs[i], err = p.Grad().Float32s()
			require.NoError(t, err)
			for _, g := range gs[i] {
				grads[k] = append(grads[k], float64(g))
			}
		}
		if path != f32 {
			continue
		}
		for trial := 0; trial < 3; trial++ {
			d := make([][]float32, len(params))
			analytic := 0.0
			for i := range params {
				d[i] = make([]float32, len(values[i]))
				for j := range d[i] {
					d[i][j] = float32(rng.NormFloat64())
					analytic += float64(d[i][j]) * float64(gs[i][j])
				}
			}
			const eps = 1e-3
			at := func(e float32) float64 {
				set(d, e)
				v, err := lossOf(t, m, ids).Item()
				require.NoError(t, err)
				return float64(v)
			}
			numeric := (at(eps) - at(-eps)) / (2 * eps)
			t.Logf("direction %d: analytic %.6g numeric %.6g", trial, analytic, numeric)
			assert.InDelta(t, numeric, analytic, 2e-3*math.Max(1, math.Abs(numeric)), "direction %d", trial)
		}
	}
	dot, n0, n1 := 0.0, 0.0, 0.0
	for i := range grads[0] {
		dot, n0, n1 = dot+grads[0][i]*grads[1][i], n0+grads[0][i]*grads[0][i], n1+grads[1][i]*grads[1][i]
	}
	cos := dot / math.Sqrt(n0*n1)
	t.Logf("q8_0 against f32 gradients: cosine %.5f, norms %.4g and %.4g", cos, math.Sqrt(n1), math.Sqrt(n0))
	assert.Greater(t, cos, 0.995)
	assert.InDelta(t, 1, math.Sqrt(n1/n0), 0.03)
}

// Bad adapters are refused before anything changes.
func TestLoRARefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	writeTestModel(t, path, 1)
	m, err := Load(newEngine(t), path)
	require.NoError(t, err)
	for _, c := range []struct {
		o   LoRAOptions
		msg string
	}{
		{LoRAOptions{R: 0, Targets: []string{"attn_q"}}, "r is 0"},
		{LoRAOptions{R: 4, Dropout: 1, Targets: []string{"attn_q"}}, "dropout 1"},
		{LoRAOptions{R: 4}, "no targets"},
		{LoRAOptions{R: 4, Targets: []string{"q_proj"}}, `target "q_proj" is not one of`},
	} {
		_, err := m.AddLoRA(c.o)
		assert.ErrorContains(t, err, c.msg)
	}
	assert.Nil(t, m.lora)
}
