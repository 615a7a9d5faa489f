package llm

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// testShape is the llama-architecture test model's: two layers, grouped
// query attention (8 query heads on 4 key/value heads), widths that
// K-quants take (rows of 256).
var testShape = Config{Layers: 2, Context: 128, Embd: 256, FFN: 512, Heads: 8, HeadsKV: 4, HeadDim: 32, RopeDims: 32,
	RopeBase: 10000, RopeScale: 1, NormEps: 1e-5}

// testVocab is a small SentencePiece vocabulary as llama.cpp's llama
// tokenizer reads it: <unk>, <s>, </s>, the 256 byte tokens, then words.
func testVocab() (tokens []string, scores []float32, types []int32) {
	tokens, scores, types = []string{"<unk>", "<s>", "</s>"}, []float32{0, 0, 0}, []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens, scores, types = append(tokens, fmt.Sprintf("<0x%02X>", b)), append(scores, 0), append(types, 6)
	}
	for i, w := range strings.Fields("▁the ▁a ▁cat ▁sat ▁on ▁mat ▁and ▁dog e t h s n ▁ at og") {
		tokens, scores, types = append(tokens, w), append(scores, -float32(i)), append(types, 1)
	}
	return tokens, scores, types
}

// writeTestModel writes a llama model of testShape with random weights
// (seeded; norms near 1) in f32 to path, and returns its vocabulary size.
func writeTestModel(t *testing.T, path string, seed int64) int {
	c := testShape
	tokens, scores, types := testVocab()
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
	add := func(name string, mean, scale float64, shape ...int) {
		n := 1
		ne := make([]int64, len(shape))
		for i, d := range shape {
			n *= d
			ne[len(shape)-1-i] = int64(d)
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + scale*rng.NormFloat64())
		}
		raw := make([]byte, 4*n)
		for i, f := range v {
			u := math.Float32bits(f)
			raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		require.NoError(t, w.AddTensor(name, ggmlcgo.F32, ne, raw))
	}
	vocab, kv := len(tokens), c.HeadsKV*c.HeadDim
	add("token_embd.weight", 0, 1, vocab, c.Embd)
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
	add("output.weight", 0, 0.06, vocab, c.Embd)
	require.NoError(t, w.WriteFile(path))
	return vocab
}

// llamaRef is the reference: llama.cpp's prebuilt library through
// scripts/reference/llama_logits.c, set up by scripts/reference/llama_ref.sh
// in .llama-ref (or GGLUA_LLAMA_REF). Absent, the test is skipped, unless
// GGLUA_REQUIRE_LLAMA_REF is set (CI sets it: there it must run).
type llamaRef struct{ bin, backends, src string }

func findLlamaRef(t *testing.T) llamaRef {
	t.Helper()
	dir := os.Getenv("GGLUA_LLAMA_REF")
	if dir == "" {
		dir = filepath.Join("..", ".llama-ref")
	}
	r := llamaRef{bin: filepath.Join(dir, "llama_logits"), backends: filepath.Join(dir, "npm", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64"),
		src: filepath.Join(dir, "llama.cpp")}
	if _, err := os.Stat(r.bin); err != nil {
		if os.Getenv("GGLUA_REQUIRE_LLAMA_REF") != "" {
			t.Fatalf("llama.cpp's reference is missing (%v): run scripts/reference/llama_ref.sh", err)
		}
		t.Skip("llama.cpp's reference is not set up: scripts/reference/llama_ref.sh")
	}
	return r
}

// run runs the reference with args and returns its output.
func (r llamaRef) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.bin, append([]string{r.backends}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "llama_logits %v:\n%s", args, stderr.String())
	return string(out)
}

// logits is llama.cpp's logits for ids on the model at path, [T][vocab].
func (r llamaRef) logits(t *testing.T, path string, ids []int) [][]float64 {
	args := []string{path}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	var rows [][]float64
	for _, line := range strings.Split(strings.TrimSpace(r.run(t, args...)), "\n") {
		var row []float64
		for _, f := range strings.Fields(line) {
			v, err := strconv.ParseFloat(f, 64)
			require.NoError(t, err)
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	require.Len(t, rows, len(ids))
	return rows
}
