package llm

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// A model with trained adapters, saved with them merged, is a file
// llama.cpp loads and whose logits are those gglua computed with the
// adapters (f32); saved as q8_0, llama.cpp's logits for it are gglua's
// for it, and near the f32 ones; a model saved unchanged in the types it
// was read in keeps every tensor's bytes.
func TestSaveAsLlamaCpp(t *testing.T) {
	ref, f32, q4 := quantizedPair(t, 7, "q4_0")
	dir := t.TempDir()
	ids := []int{1, 260, 261, 262, 263, 264, 265, 266, 267, 268}
	m, err := Load(newEngine(t), f32)
	require.NoError(t, err)
	l, err := m.AddLoRA(LoRAOptions{R: 4, Alpha: 8, Targets: []string{"attn_q", "attn_v", "ffn_up", "ffn_down"}})
	require.NoError(t, err)
	train(t, m, l.Parameters(), 0.01, ids, 8)
	y, err := m.Logits(ids)
	require.NoError(t, err)
	want, err := y.Float32s()
	require.NoError(t, err)
	largest := func(rows [][]float64, got []float32) (diff, scale float64) {
		for i, row := range rows {
			for j, v := range row {
				diff = math.Max(diff, math.Abs(v-float64(got[i*m.Vocab+j])))
				scale = math.Max(scale, math.Abs(v))
			}
		}
		return diff, scale
	}
	merged := filepath.Join(dir, "merged.gguf")
	require.NoError(t, m.Save(merged, 0))
	diff, scale := largest(ref.logits(t, merged, ids), want)
	t.Logf("merged f32: llama.cpp within %.3g of gglua with adapters (largest logit %.3g)", diff, scale)
	assert.Less(t, diff, 1e-4*scale)

	q8 := filepath.Join(dir, "merged-q8_0.gguf")
	require.NoError(t, m.Save(q8, ggmlcgo.Q8_0))
	m8, err := Load(newEngine(t), q8)
	require.NoError(t, err)
	y8, err := m8.Logits(ids)
	require.NoError(t, err)
	got8, err := y8.Float32s()
	require.NoError(t, err)
	rows8 := ref.logits(t, q8, ids)
	diff, scale = largest(rows8, got8)
	t.Logf("merged q8_0: gglua within %.3g of llama.cpp on the file", diff)
	assert.Less(t, diff, 2e-2*scale)
	diff, _ = largest(rows8, want)
	t.Logf("merged q8_0 against merged f32: %.3g", diff)
	assert.Less(t, diff, 5e-2*scale)

	mq, err := Load(newEngine(t), q4)
	require.NoError(t, err)
	same := filepath.Join(dir, "same.gguf")
	require.NoError(t, mq.Save(same, 0))
	a, err := ggmlcgo.OpenGGUF(q4)
	require.NoError(t, err)
	defer a.Close()
	b, err := ggmlcgo.OpenGGUF(same)
	require.NoError(t, err)
	defer b.Close()
	written := map[string]ggmlcgo.GGUFTensorInfo{}
	for _, info := range b.Tensors() {
		written[info.Name] = info
	}
	require.Len(t, written, len(a.Tensors()))
	for _, info := range a.Tensors() {
		w, ok := written[info.Name]
		require.True(t, ok, info.Name)
		assert.Equal(t, info.Type, w.Type, info.Name)
		assert.Equal(t, info.Ne, w.Ne, info.Name)
		x, err := a.ReadTensor(info)
		require.NoError(t, err)
		z, err := b.ReadTensor(w)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(x, z), "%s: the bytes read are the bytes written", info.Name)
	}
	tokens, _ := a.Strings("tokenizer.ggml.tokens")
	again, _ := b.Strings("tokenizer.ggml.tokens")
	assert.Equal(t, tokens, again)
	types, _ := a.Ints("tokenizer.ggml.token_type")
	typesAgain, _ := b.Ints("tokenizer.ggml.token_type")
	assert.Equal(t, types, typesAgain)
	assert.NotEmpty(t, types)
	_, err = ParseSaveType("q3_K")
	assert.ErrorContains(t, err, `dtype "q3_K" is not one gglua writes`)
}
