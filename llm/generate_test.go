package llm

import (
	"math"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Greedy generation with the key/value cache gives llama.cpp's tokens,
// one decode a token, on the f32 model and a quantized one; a second
// generation reuses the cache and gives the same.
func TestGenerateAsLlamaCpp(t *testing.T) {
	ref, f32, q4 := quantizedPair(t, 4, "q4_0")
	for _, path := range []string{f32, q4} {
		e := newEngine(t)
		m, err := Load(e, path)
		require.NoError(t, err)
		prompt, err := m.Tokenize("the cat sat on", true, false)
		require.NoError(t, err)
		args := []string{path, "--generate", "40"}
		for _, id := range prompt {
			args = append(args, strconv.Itoa(id))
		}
		want := strings.TrimSpace(ref.run(t, args...))
		for range 2 {
			got, err := m.Generate(prompt, GenerateOptions{MaxTokens: 40, TopP: 1})
			require.NoError(t, err)
			assert.Equal(t, want, joinIDs(got), filepath.Base(path))
		}
		t.Logf("%s: %q + %s", filepath.Base(path), "the cat sat on", want)
	}
}

// Positions computed in parts through the cache (a prompt, then more than
// one token at once, whose causal mask starts past the diagonal) give the
// logits of the whole sequence at once.
func TestCachedPartsAsOneForward(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	writeTestModel(t, path, 3)
	m, err := Load(newEngine(t), path)
	require.NoError(t, err)
	ids := []int{1, 260, 261, 262, 40, 263, 264, 100, 265}
	whole, err := m.Logits(ids)
	require.NoError(t, err)
	want, err := whole.Float32s()
	require.NoError(t, err)
	cache, err := m.cacheFor(len(ids))
	require.NoError(t, err)
	var got []float32
	for _, part := range [][]int{ids[:4], ids[4:7], ids[7:8], ids[8:]} {
		y, err := m.forward([][]int{part}, cache)
		require.NoError(t, err)
		v, err := y.Float32s()
		require.NoError(t, err)
		got = append(got, v...)
	}
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-4, "logit %d (position %d)", i, i/m.Vocab)
	}
	_, err = m.forward([][]int{{5}}, cache)
	assert.ErrorContains(t, err, "past the 9 the cache holds")
}

// Sampling keeps the top_k most likely tokens, then the fewest whose
// probabilities reach top_p, and draws by the tempered softmax of what is
// left; temperature 0 is the argmax, the first of equal logits.
func TestSample(t *testing.T) {
	logits := []float32{1, 3, 3, 0.5, 2, -1}
	assert.Equal(t, 1, sample(logits, GenerateOptions{}, nil))
	rng := rand.New(rand.NewSource(1))
	count := func(o GenerateOptions) []float64 {
		n := make([]float64, len(logits))
		for i := 0; i < 20000; i++ {
			n[sample(logits, o, rng)]++
		}
		for i := range n {
			n[i] /= 20000
		}
		return n
	}
	softmax := func(ids []int, temp float64) []float64 {
		p, sum := make([]float64, len(logits)), 0.0
		for _, i := range ids {
			p[i] = math.Exp(float64(logits[i]) / temp)
			sum += p[i]
		}
		for i := range p {
			p[i] /= sum
		}
		return p
	}
	near := func(want, got []float64, what string) {
		for i := range want {
			assert.InDelta(t, want[i], got[i], 0.015, "%s: token %d", what, i)
		}
	}
	near(softmax([]int{0, 1, 2, 3, 4, 5}, 1), count(GenerateOptions{Temperature: 1, TopP: 1}), "all")
	near(softmax([]int{1, 2, 4}, 0.7), count(GenerateOptions{Temperature: 0.7, TopK: 3, TopP: 1}), "top_k 3")
	// Untempered probabilities of 3, 3, 2, 1: .38 .38 .14 .05: top_p 0.8 keeps three.
	near(softmax([]int{1, 2, 4}, 2), count(GenerateOptions{Temperature: 2, TopP: 0.8}), "top_p 0.8")
}
