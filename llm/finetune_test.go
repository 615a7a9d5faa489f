package llm

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
)

// A model's float weights are parameters, as a PyTorch model's: a full
// fine-tune of a q4_0 model loaded as f32 lowers the loss, and the model
// saved after it gives, in llama.cpp, the logits gglua computes; adapters
// freeze the base; the state dict names every tensor as llama.cpp does.
func TestFullFineTune(t *testing.T) {
	ref, _, q4 := quantizedPair(t, 8, "q4_0")
	mq, err := Load(newEngine(t), q4)
	require.NoError(t, err)
	assert.Len(t, mq.Parameters(), 1+2*TestShape.Layers, "a q4_0 file's trainable tensors are its norms")

	m, err := Load(newEngine(t), q4, LoadOptions{DType: "f32"})
	require.NoError(t, err)
	ps := m.Parameters()
	require.Len(t, ps, 3+9*TestShape.Layers, "every tensor, dequantized to f32")
	for _, p := range ps {
		assert.True(t, p.RequiresGrad())
	}
	ids := []int{1, 260, 261, 262, 263, 264, 265, 266, 267, 268}
	// Dequantized to f32, the products no longer round their inputs to 8
	// bits: the logits stay near the q4_0 model's.
	yq, err := mq.Logits(ids)
	require.NoError(t, err)
	y0, err := m.Logits(ids)
	require.NoError(t, err)
	a, b := floats(t, yq), floats(t, y0)
	worst := 0.0
	for i := range a {
		worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
	}
	assert.Less(t, worst, 0.1, "q4_0 against its f32 dequantization")

	first, last := train(t, m, ps, 1e-3, ids, 6)
	t.Logf("full fine-tune: loss %.4f -> %.4f", first, last)
	assert.Less(t, last, first-0.5)
	path := filepath.Join(t.TempDir(), "tuned.gguf")
	require.NoError(t, m.Save(path, SaveType{}))
	y, err := m.Logits(ids)
	require.NoError(t, err)
	got := floats(t, y)
	diff, scale := 0.0, 0.0
	for i, row := range ref.logits(t, path, ids) {
		for j, v := range row {
			diff, scale = math.Max(diff, math.Abs(v-float64(got[i*m.Vocab+j]))), math.Max(scale, math.Abs(v))
		}
	}
	t.Logf("saved after training: llama.cpp within %.3g of gglua (largest logit %.3g)", diff, scale)
	assert.Less(t, diff, 1e-4*scale)

	_, err = m.AddLoRA(LoRAOptions{R: 2, Alpha: 2, Targets: []string{"attn_q"}})
	require.NoError(t, err)
	for _, p := range ps {
		assert.False(t, p.RequiresGrad(), "adapters freeze the base")
	}
	names := map[string]bool{}
	for _, n := range m.StateDict() {
		names[n.Name] = true
	}
	for _, n := range []string{"token_embd.weight", "output_norm.weight", "output.weight", "blk.1.ffn_down.weight", "blk.0.attn_q.weight.lora_a", "blk.1.attn_q.weight.lora_b"} {
		assert.True(t, names[n], n)
	}
	assert.Len(t, names, 3+9*TestShape.Layers+2*TestShape.Layers)
	_, err = Load(newEngine(t), q4, LoadOptions{DType: "q8_0"})
	assert.ErrorContains(t, err, `dtype "q8_0": expected f32, f16 or bf16`)
}

func floats(t *testing.T, x *core.Tensor) []float32 {
	v, err := x.Float32s()
	require.NoError(t, err)
	return v
}
