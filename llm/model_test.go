package llm

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

func newEngine(t *testing.T) *core.Engine {
	t.Helper()
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

// gglua's logits against llama.cpp's for the same file and tokens, over
// the whole vocabulary: within 1e-4 of the largest logit on the f32 model
// (an f32 KV cache, flash attention off), within 2e-2 on the files
// llama.cpp's quantizer writes from it (q8_0, q4_0, q4_k_m: q4_K and q6_K
// mixed with f32).
func TestLogitsAsLlamaCpp(t *testing.T) {
	ref := findLlamaRef(t)
	dir := t.TempDir()
	f32 := filepath.Join(dir, "f32.gguf")
	vocab := writeTestModel(t, f32, 1)
	ids := []int{1, 260, 261, 262, 40, 263, 264, 100, 265, 3, 266}
	for _, c := range []struct {
		name string
		tol  float64
	}{{"f32", 1e-4}, {"q8_0", 2e-2}, {"q4_0", 2e-2}, {"q4_k_m", 2e-2}} {
		path := f32
		if c.name != "f32" {
			path = filepath.Join(dir, c.name+".gguf")
			ref.run(t, "--quantize", f32, path, c.name)
		}
		want := ref.logits(t, path, ids)
		e := newEngine(t)
		m, err := Load(e, path)
		require.NoError(t, err, c.name)
		assert.Equal(t, vocab, m.Vocab)
		y, err := m.Logits(ids)
		require.NoError(t, err, c.name)
		assert.Equal(t, []int{len(ids), vocab}, y.Shape())
		got, err := y.Float32s()
		require.NoError(t, err)
		scale, worst := 0.0, 0.0
		for _, row := range want {
			for _, v := range row {
				scale = math.Max(scale, math.Abs(v))
			}
		}
		for i, row := range want {
			for j, v := range row {
				worst = math.Max(worst, math.Abs(v-float64(got[i*vocab+j])))
			}
		}
		t.Logf("%s: largest difference %.3g (largest logit %.3g)", c.name, worst, scale)
		assert.LessOrEqual(t, worst, c.tol*math.Max(1, scale), "%s: logits differ from llama.cpp's", c.name)
	}
}

// A file that is not a llama model gglua reads is an error naming what is
// wrong, never an abort: an unknown architecture, a missing or bad key, a
// tensor missing, of the wrong shape or type, or one gglua would ignore.
func TestLoadRefusals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	writeTestModel(t, good, 1)
	g, err := ggmlcgo.OpenGGUF(good)
	require.NoError(t, err)
	defer g.Close()
	// rewrite copies good's keys and tensors, changed by edit.
	rewrite := func(name string, edit func(w *ggmlcgo.GGUFWriter, key string) bool, tensor func(w *ggmlcgo.GGUFWriter, info ggmlcgo.GGUFTensorInfo, raw []byte) bool) string {
		w := ggmlcgo.NewGGUFWriter()
		defer w.Free()
		for _, k := range g.Keys() {
			if edit != nil && edit(w, k) {
				continue
			}
			copyKey(t, g, w, k)
		}
		for _, info := range g.Tensors() {
			raw, err := g.ReadTensor(info)
			require.NoError(t, err)
			if tensor != nil && tensor(w, info, raw) {
				continue
			}
			require.NoError(t, w.AddTensor(info.Name, info.Type, ne(info), raw))
		}
		path := filepath.Join(dir, name+".gguf")
		require.NoError(t, w.WriteFile(path))
		return path
	}
	cases := map[string]struct {
		path string
		want string
	}{
		"architecture": {rewrite("arch", func(w *ggmlcgo.GGUFWriter, k string) bool {
			if k == "general.architecture" {
				w.SetString(k, "gpt2")
				return true
			}
			return false
		}, nil), `architecture "gpt2": gglua reads llama-family models`},
		"missing key": {rewrite("nokey", func(w *ggmlcgo.GGUFWriter, k string) bool { return k == "llama.feed_forward_length" }, nil),
			"llama.feed_forward_length is missing"},
		"bad count": {rewrite("count", func(w *ggmlcgo.GGUFWriter, k string) bool {
			if k == "llama.attention.head_count_kv" {
				w.SetU32(k, 3)
				return true
			}
			return false
		}, nil), "not a multiple of llama.attention.head_count_kv 3"},
		"missing tensor": {rewrite("notensor", nil, func(w *ggmlcgo.GGUFWriter, info ggmlcgo.GGUFTensorInfo, raw []byte) bool {
			return info.Name == "blk.1.ffn_up.weight"
		}), "tensor blk.1.ffn_up.weight is missing"},
		"wrong shape": {rewrite("shape", nil, func(w *ggmlcgo.GGUFWriter, info ggmlcgo.GGUFTensorInfo, raw []byte) bool {
			if info.Name != "blk.0.attn_k.weight" {
				return false
			}
			require.NoError(t, w.AddTensor(info.Name, info.Type, []int64{128, 256}, raw))
			return true
		}), "tensor blk.0.attn_k.weight has ne [128 256 1 1], expected [256 128 1 1]"},
		"extra tensor": {rewrite("extra", nil, func(w *ggmlcgo.GGUFWriter, info ggmlcgo.GGUFTensorInfo, raw []byte) bool {
			if info.Name == "output.weight" {
				require.NoError(t, w.AddTensor("rope_freqs.weight", ggmlcgo.F32, []int64{16}, make([]byte, 64)))
			}
			return false
		}), "tensor rope_freqs.weight is not one gglua's llama model uses"},
		"wrong type": {rewrite("type", nil, func(w *ggmlcgo.GGUFWriter, info ggmlcgo.GGUFTensorInfo, raw []byte) bool {
			if info.Name != "blk.1.ffn_norm.weight" {
				return false
			}
			require.NoError(t, w.AddTensor(info.Name, ggmlcgo.I32, ne(info), raw))
			return true
		}), "tensor blk.1.ffn_norm.weight has type i32, which gglua does not read"},
		"vocabulary": {rewrite("vocab", func(w *ggmlcgo.GGUFWriter, k string) bool {
			if k != "tokenizer.ggml.tokens" {
				return false
			}
			tokens, _ := g.Strings(k)
			w.SetStrings(k, tokens[:len(tokens)-1])
			return true
		}, nil), "tokenizer.ggml.tokens has 274 tokens, the embedding 275 rows"},
	}
	// A file cut short (a download that stopped) is refused, not read past.
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	short := filepath.Join(dir, "short.gguf")
	require.NoError(t, os.WriteFile(short, raw[:len(raw)*7/10], 0o644))
	cases["truncated"] = struct {
		path, want string
	}{short, "short.gguf is truncated: tensor"}
	for name, c := range cases {
		_, err := Load(newEngine(t), c.path)
		assert.ErrorContains(t, err, c.want, name)
	}
	_, err = Load(newEngine(t), filepath.Join(dir, "none.gguf"))
	assert.ErrorContains(t, err, "llm.load")
	m, err := Load(newEngine(t), good)
	require.NoError(t, err)
	_, err = m.Logits([]int{1, m.Vocab})
	assert.ErrorContains(t, err, "outside the vocabulary")
}

func ne(info ggmlcgo.GGUFTensorInfo) []int64 {
	n := 4
	for n > 1 && info.Ne[n-1] == 1 {
		n--
	}
	return info.Ne[:n]
}

// copyKey copies key's value from g to w, whatever its type.
func copyKey(t *testing.T, g *ggmlcgo.GGUFFile, w *ggmlcgo.GGUFWriter, key string) {
	if v, ok := g.String(key); ok {
		w.SetString(key, v)
	} else if v, ok := g.U32(key); ok {
		w.SetU32(key, v)
	} else if v, ok := g.Float(key); ok {
		w.SetF32(key, float32(v))
	} else if v, ok := g.Bool(key); ok {
		w.SetBool(key, v)
	} else if v, ok := g.Strings(key); ok {
		w.SetStrings(key, v)
	} else if v, ok := g.Floats(key); ok {
		f := make([]float32, len(v))
		for i := range v {
			f[i] = float32(v[i])
		}
		w.SetF32s(key, f)
	} else if v, ok := g.Ints(key); ok {
		n := make([]int32, len(v))
		for i := range v {
			n[i] = int32(v[i])
		}
		w.SetI32s(key, n)
	} else {
		t.Fatalf("key %s: a type the test does not copy", key)
	}
}
