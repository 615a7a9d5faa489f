package llm

import (
	"fmt"
	"math"
	"math/rand"
	"sort"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// kvCache holds each layer's keys and values of the positions computed so
// far ([size, HeadsKV, HeadDim] each, f32), in the persistent pool: a
// generation computes each new token's alone, reading the rest from here.
// A model keeps one and reuses it: the persistent pool frees nothing
// before its reset, so a generation that needs more positions than it has
// makes one twice as large (at most the model's context).
type kvCache struct {
	k, v    []*core.Tensor
	n, size int
}

// cacheFor is the model's cache, emptied, with room for n positions.
func (m *Model) cacheFor(n int) (*kvCache, error) {
	if n > m.Context {
		return nil, fmt.Errorf("generate: %d positions (prompt and max_tokens) are past the model's context of %d", n, m.Context)
	}
	if m.cache == nil || m.cache.size < n {
		size := n
		if m.cache != nil {
			size = max(n, min(2*m.cache.size, m.Context))
		}
		c, err := m.newCache(size)
		if err != nil {
			return nil, err
		}
		m.cache = c
	}
	m.cache.n = 0
	return m.cache, nil
}

func (m *Model) newCache(size int) (*kvCache, error) {
	c := &kvCache{size: size}
	row := m.HeadsKV * m.HeadDim
	zeros := make([]byte, 4*size*row) // size <= Context <= 2^24 and row <= 2^24: no overflow in int64
	for range m.layers {
		for _, into := range []*[]*core.Tensor{&c.k, &c.v} {
			t, err := m.e.Weight(zeros, ggmlcgo.F32, []int{size, m.HeadsKV, m.HeadDim})
			if err != nil {
				return nil, fmt.Errorf("generate: the key/value cache: %w", err)
			}
			*into = append(*into, t)
		}
	}
	return c, nil
}

// GenerateOptions are a generation's settings, named as llama.cpp's.
type GenerateOptions struct {
	MaxTokens   int     // tokens to generate at most
	Temperature float64 // 0: greedy, the most likely token each time
	TopK        int     // keep the TopK most likely tokens (0: all)
	TopP        float64 // then the fewest whose probabilities reach TopP (1: all)
	Seed        int64   // the sampler's seed
}

// Generate continues prompt (0-based ids) by up to o.MaxTokens tokens and
// returns them, stopping after an end-of-generation token (not returned).
// Sampling follows llama.cpp's order: top-k, top-p (over the untempered
// probabilities), temperature, then a draw; temperature 0 takes the
// argmax (the first of equal logits).
func (m *Model) Generate(prompt []int, o GenerateOptions) ([]int, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("generate: an empty prompt (start with the BOS token, as tokenize gives it)")
	}
	if o.MaxTokens < 1 {
		return nil, fmt.Errorf("generate: max_tokens is %d: expected at least 1", o.MaxTokens)
	}
	if o.Temperature < 0 || math.IsNaN(o.Temperature) || o.TopK < 0 || !(o.TopP > 0 && o.TopP <= 1) {
		return nil, fmt.Errorf("generate: temperature %g, top_k %d, top_p %g: expected temperature >= 0, top_k >= 0, 0 < top_p <= 1",
			o.Temperature, o.TopK, o.TopP)
	}
	if o.MaxTokens > m.Context {
		return nil, fmt.Errorf("generate: max_tokens %d is past the model's context of %d", o.MaxTokens, m.Context)
	}
	cache, err := m.cacheFor(len(prompt) + o.MaxTokens)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(o.Seed))
	var out []int
	next := prompt
	for len(out) < o.MaxTokens {
		if ctx := m.e.Context(); ctx != nil && ctx.Err() != nil {
			return out, fmt.Errorf("generate: %w", ctx.Err())
		}
		logits, err := m.forward([][]int{next}, cache)
		if err != nil {
			return out, err
		}
		if len(next) > 1 {
			if logits, err = m.e.Narrow(logits, 0, len(next)-1, 1); err != nil {
				return out, err
			}
		}
		row, err := logits.Float32s()
		if err != nil {
			return out, err
		}
		id := sample(row, o, rng)
		if m.Tokenizer != nil && m.Tokenizer.IsEnd(id) {
			break
		}
		out = append(out, id)
		next = []int{id}
	}
	return out, nil
}

// sample picks a token from one position's logits.
func sample(logits []float32, o GenerateOptions, rng *rand.Rand) int {
	if o.Temperature == 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return best
	}
	ids := make([]int, len(logits))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
	if o.TopK > 0 && o.TopK < len(ids) {
		ids = ids[:o.TopK]
	}
	probs := func(temp float64) []float64 {
		p, sum := make([]float64, len(ids)), 0.0
		for i, id := range ids {
			p[i] = math.Exp((float64(logits[id]) - float64(logits[ids[0]])) / temp)
			sum += p[i]
		}
		for i := range p {
			p[i] /= sum
		}
		return p
	}
	if o.TopP < 1 {
		cum := 0.0
		for i, p := range probs(1) {
			if cum += p; cum >= o.TopP {
				ids = ids[:i+1]
				break
			}
		}
	}
	r := rng.Float64()
	for i, p := range probs(o.Temperature) {
		if r -= p; r < 0 {
			return ids[i]
		}
	}
	return ids[len(ids)-1]
}
