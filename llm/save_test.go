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
	require.NoError(t, m.Save(merged, SaveType{}))
	diff, scale := largest(ref.logits(t, merged, ids), want)
	t.Logf("merged f32: llama.cpp within %.3g of gglua with adapters (largest logit %.3g)", diff, scale)
	assert.Less(t, diff, 1e-4*scale)

	q8 := filepath.Join(dir, "merged-q8_0.gguf")
	require.NoError(t, m.Save(q8, SaveAs(ggmlcgo.Q8_0)))
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
	require.NoError(t, mq.Save(same, SaveType{}))
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
	// dtype f32 (ggml's type 0) writes f32, not the types read.
	wide := filepath.Join(dir, "f32-again.gguf")
	require.NoError(t, mq.Save(wide, SaveAs(ggmlcgo.F32)))
	c, err := ggmlcgo.OpenGGUF(wide)
	require.NoError(t, err)
	defer c.Close()
	for _, info := range c.Tensors() {
		assert.Equal(t, ggmlcgo.F32, info.Type, info.Name)
	}
	tokens, _ := a.Strings("tokenizer.ggml.tokens")
	again, _ := b.Strings("tokenizer.ggml.tokens")
	assert.Equal(t, tokens, again)
	types, _ := a.Ints("tokenizer.ggml.token_type")
	typesAgain, _ := b.Ints("tokenizer.ggml.token_type")
	assert.Equal(t, types, typesAgain)
	assert.NotEmpty(t, types)
	_, err = ParseSaveType("q3_K_m")
	assert.ErrorContains(t, err, `dtype "q3_K_m" is not one gglua writes`)
}

// Saved as q4_k_m, a model is llama.cpp's own q4_k_m file of it: each
// tensor in the type llama_model_quantize gives it (q6_K for the output
// and for the value and down projections of the layers it gives more
// bits, q4_K for the rest, its fallbacks where rows are not whole K-quant
// blocks), quantized as llama.cpp quantizes it, and the same file type.
// (The bytes are llama.cpp's where ggml is compiled as its prebuilt
// library is; with the Makefile's -march=x86-64-v3 the K-quants' scale
// search rounds differently in some blocks, so the check is the values:
// as near the f32 weights as llama.cpp's, and as near llama.cpp's.)
func TestSaveQ4KMAsLlamaCpp(t *testing.T) {
	ref := findLlamaRef(t)
	narrow := TestShape // rows of 160 and 320: q4_K and q6_K fall back to q5_0 and q8_0
	narrow.Embd, narrow.Heads, narrow.HeadsKV, narrow.FFN = 160, 5, 5, 320
	wide := TestShape
	wide.Layers = 9 // use_more_bits picks layers 0, 3, 6, 7 and 8 of 9
	tied := TestShape
	tied.Tied = true // the embedding is the output: q6_K
	odd := TestShape // rows of 100 and 200: no K-quant or q8_0 block fits, f16
	odd.Embd, odd.Heads, odd.HeadsKV, odd.HeadDim, odd.RopeDims, odd.FFN = 100, 5, 5, 20, 20, 200
	seventy := TestShape // llama.cpp's 70B: 80 grouped-query layers, value projections q5_K (here q5_1)
	seventy.Layers, seventy.Embd, seventy.Heads, seventy.HeadsKV, seventy.HeadDim, seventy.RopeDims, seventy.FFN = 80, 32, 2, 1, 16, 16, 64
	for name, shape := range map[string]Config{"test shape": TestShape, "narrow rows": narrow, "nine layers": wide, "tied": tied,
		"odd rows": odd, "a 70B's layers": seventy} {
		dir := t.TempDir()
		f32, theirs, ours := filepath.Join(dir, "f32.gguf"), filepath.Join(dir, "theirs.gguf"), filepath.Join(dir, "ours.gguf")
		require.NoError(t, WriteRandom(f32, shape, 3), name)
		ref.run(t, "--quantize", f32, theirs, "q4_k_m")
		m, err := Load(newEngine(t), f32)
		require.NoError(t, err, name)
		st, err := ParseSaveType("q4_k_m")
		require.NoError(t, err)
		require.NoError(t, m.Save(ours, st), name)
		files := make([]*ggmlcgo.GGUFFile, 3)
		for i, path := range []string{f32, theirs, ours} {
			files[i], err = ggmlcgo.OpenGGUF(path)
			require.NoError(t, err)
			defer files[i].Close()
		}
		infos := make([]map[string]ggmlcgo.GGUFTensorInfo, 3)
		for i, f := range files {
			infos[i] = map[string]ggmlcgo.GGUFTensorInfo{}
			for _, info := range f.Tensors() {
				infos[i][info.Name] = info
			}
		}
		require.Len(t, infos[2], len(infos[1]), name)
		types, sameBytes := map[ggmlcgo.Type]int{}, 0
		for _, info := range files[1].Tensors() {
			w, ok := infos[2][info.Name]
			require.True(t, ok, "%s: %s", name, info.Name)
			require.Equal(t, info.Type, w.Type, "%s: %s", name, info.Name)
			types[info.Type]++
			values := make([][]float32, 3)
			var raws [3][]byte
			for i, in := range []ggmlcgo.GGUFTensorInfo{infos[0][info.Name], info, w} {
				raws[i], err = files[i].ReadTensor(in)
				require.NoError(t, err)
				n := int64(1)
				for _, d := range in.Ne {
					n *= d
				}
				values[i], err = ggmlcgo.Decode(in.Type, raws[i], n)
				require.NoError(t, err)
			}
			if bytes.Equal(raws[1], raws[2]) {
				sameBytes++
				continue
			}
			rms := func(a, b []float32) float64 {
				sum := 0.0
				for j := range a {
					d := float64(a[j]) - float64(b[j])
					sum += d * d
				}
				return math.Sqrt(sum / float64(len(a)))
			}
			theirErr, ourErr, apart := rms(values[1], values[0]), rms(values[2], values[0]), rms(values[1], values[2])
			assert.LessOrEqual(t, ourErr, 1.02*theirErr, "%s: %s: as near the f32 weights as llama.cpp's", name, info.Name)
			assert.LessOrEqual(t, apart, 0.5*theirErr, "%s: %s: near llama.cpp's values", name, info.Name)
		}
		t.Logf("%s: types %v; %d of %d tensors byte for byte llama.cpp's", name, types, sameBytes, len(infos[1]))
		ft, ok := files[1].U32("general.file_type")
		require.True(t, ok, name)
		ft2, _ := files[2].U32("general.file_type")
		assert.Equal(t, ft, ft2, name)
	}
}

// q4KMType's rules one by one, without llama.cpp (llama-quant.cpp's
// llama_tensor_get_type_impl and tensor_type_fallback give these).
func TestQ4KMTypes(t *testing.T) {
	c := TestShape
	c.Layers = 16 // use_more_bits: 0, 1, 4, 7, 10, 14, 15
	seventy := c
	seventy.Layers = 80
	tied := c
	tied.Tied = true
	for _, tc := range []struct {
		c    Config
		name string
		ne0  int64
		want ggmlcgo.Type
	}{
		{c, "output.weight", 256, ggmlcgo.Q6_K},
		{c, "output.weight", 160, ggmlcgo.Q8_0},
		{c, "output.weight", 100, ggmlcgo.F16},
		{c, "token_embd.weight", 256, ggmlcgo.Q4_K},
		{tied, "token_embd.weight", 256, ggmlcgo.Q6_K},
		{c, "blk.0.attn_v.weight", 256, ggmlcgo.Q6_K},
		{c, "blk.2.attn_v.weight", 256, ggmlcgo.Q4_K},
		{c, "blk.4.attn_v.weight", 256, ggmlcgo.Q6_K},
		{c, "blk.15.ffn_down.weight", 512, ggmlcgo.Q6_K},
		{c, "blk.5.ffn_down.weight", 512, ggmlcgo.Q4_K},
		{c, "blk.5.ffn_down.weight", 320, ggmlcgo.Q5_0},
		{c, "blk.4.ffn_down.weight", 320, ggmlcgo.Q8_0},
		{c, "blk.4.attn_q.weight", 256, ggmlcgo.Q4_K},
		{c, "blk.4.ffn_up.weight", 100, ggmlcgo.F16},
		{seventy, "blk.10.attn_v.weight", 256, ggmlcgo.Q5_K},
		{seventy, "blk.2.attn_v.weight", 256, ggmlcgo.Q6_K},
		{seventy, "blk.10.attn_v.weight", 160, ggmlcgo.Q5_1},
		{seventy, "blk.10.attn_k.weight", 256, ggmlcgo.Q4_K},
	} {
		assert.Equal(t, tc.want, q4KMType(tc.c, tc.name, tc.ne0), "%s of %d columns, %d layers, tied %v", tc.name, tc.ne0, tc.c.Layers, tc.c.Tied)
	}
	_, err := ParseSaveType("q4_k_m")
	require.NoError(t, err)
	m := &Model{}
	err = m.Save(filepath.Join(t.TempDir(), "x.gguf"), SaveType{Type: ggmlcgo.Q8_0, Set: true, Q4KM: true})
	assert.ErrorContains(t, err, "beside q4_k_m")
}
