package llm

import (
	"fmt"
	"math"
	"math/rand"
	"strings"

	"github.com/gglua/gglua/ggmlcgo"
)

// TestShape is a small llama model's shape, for tests: two layers,
// grouped-query attention (8 query heads on 4 key/value heads), widths
// that llama.cpp's K-quants take (rows of 256), a vocabulary of 275.
var TestShape = Config{Layers: 2, Context: 128, Embd: 256, FFN: 512, Heads: 8, HeadsKV: 4, HeadDim: 32, RopeDims: 32,
	RopeBase: 10000, RopeScale: 1, NormEps: 1e-5, Vocab: 275}

// randomVocab is a SentencePiece vocabulary as llama.cpp's llama tokenizer
// reads it, of n tokens (n >= 275): <unk>, <s>, </s>, the 256 byte
// tokens, a few words, then made-up pieces.
func randomVocab(n int) (tokens []string, scores []float32, types []int32) {
	tokens, scores, types = []string{"<unk>", "<s>", "</s>"}, []float32{0, 0, 0}, []int32{typeUnknown, typeControl, typeControl}
	for b := 0; b < 256; b++ {
		tokens, scores, types = append(tokens, fmt.Sprintf("<0x%02X>", b)), append(scores, 0), append(types, typeByte)
	}
	for i, w := range strings.Fields("▁the ▁a ▁cat ▁sat ▁on ▁mat ▁and ▁dog e t h s n ▁ at og") {
		tokens, scores, types = append(tokens, w), append(scores, -float32(i)), append(types, typeNormal)
	}
	for i := 0; len(tokens) < n; i++ {
		tokens, scores, types = append(tokens, fmt.Sprintf("▁w%d", i)), append(scores, -float32(len(tokens))), append(types, typeNormal)
	}
	return tokens[:n], scores[:n], types[:n]
}

// WriteRandom writes a llama model of shape c (c.Vocab >= 275 tokens)
// with random weights (seeded; norms near 1), in f32, as a GGUF file
// llama.cpp loads: for tests and benchmarks, where no model can be
// downloaded.
func WriteRandom(path string, c Config, seed int64) error {
	if c.Vocab < 275 || c.Embd != c.Heads*c.HeadDim || c.Heads%c.HeadsKV != 0 {
		return fmt.Errorf("llm: a random model needs a vocabulary of at least 275 and whole heads (%+v)", c)
	}
	tokens, scores, types := randomVocab(c.Vocab)
	w := ggmlcgo.NewGGUFWriter()
	defer w.Free()
	w.SetString("general.architecture", "llama")
	w.SetString("general.name", "gglua-test")
	w.SetU32("llama.block_count", uint32(c.Layers))
	w.SetU32("llama.context_length", uint32(c.Context))
	w.SetU32("llama.embedding_length", uint32(c.Embd))
	w.SetU32("llama.feed_forward_length", uint32(c.FFN))
	w.SetU32("llama.attention.head_count", uint32(c.Heads))
	w.SetU32("llama.attention.head_count_kv", uint32(c.HeadsKV))
	w.SetU32("llama.rope.dimension_count", uint32(c.RopeDims))
	w.SetF32("llama.rope.freq_base", c.RopeBase)
	w.SetF32("llama.attention.layer_norm_rms_epsilon", c.NormEps)
	w.SetU32("general.file_type", 0)
	w.SetString("tokenizer.ggml.model", "llama")
	w.SetString("tokenizer.ggml.pre", "default")
	w.SetStrings("tokenizer.ggml.tokens", tokens)
	w.SetF32s("tokenizer.ggml.scores", scores)
	w.SetI32s("tokenizer.ggml.token_type", types)
	w.SetU32("tokenizer.ggml.bos_token_id", 1)
	w.SetU32("tokenizer.ggml.eos_token_id", 2)
	w.SetU32("tokenizer.ggml.unknown_token_id", 0)
	w.SetBool("tokenizer.ggml.add_bos_token", true)
	w.SetBool("tokenizer.ggml.add_eos_token", false)
	rng := rand.New(rand.NewSource(seed))
	var err error
	add := func(name string, mean, scale float64, shape ...int) {
		n := 1
		ne := make([]int64, len(shape))
		for i, d := range shape {
			n *= d
			ne[len(shape)-1-i] = int64(d)
		}
		raw := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			u := math.Float32bits(float32(mean + scale*rng.NormFloat64()))
			raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		if err == nil {
			err = w.AddTensor(name, ggmlcgo.F32, ne, raw)
		}
	}
	kv := c.HeadsKV * c.HeadDim
	add("token_embd.weight", 0, 1, c.Vocab, c.Embd)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", 1, 0.1, c.Embd)
		add(p+"attn_q.weight", 0, 0.08, c.Embd, c.Embd)
		add(p+"attn_k.weight", 0, 0.08, kv, c.Embd)
		add(p+"attn_v.weight", 0, 0.08, kv, c.Embd)
		add(p+"attn_output.weight", 0, 0.06, c.Embd, c.Embd)
		add(p+"ffn_norm.weight", 1, 0.1, c.Embd)
		add(p+"ffn_gate.weight", 0, 0.06, c.FFN, c.Embd)
		add(p+"ffn_up.weight", 0, 0.06, c.FFN, c.Embd)
		add(p+"ffn_down.weight", 0, 0.05, c.Embd, c.FFN)
	}
	add("output_norm.weight", 1, 0.1, c.Embd)
	if !c.Tied {
		add("output.weight", 0, 0.06, c.Vocab, c.Embd)
	}
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}
