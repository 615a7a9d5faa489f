package llm

import (
	"fmt"
	"math"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Logits is the model's forward pass over the token ids (0-based, at
// positions 0..len(ids)-1): a [T, Vocab] f32 tensor, as llama.cpp's
// llama_get_logits_ith gives each position's.
func (m *Model) Logits(ids []int) (*core.Tensor, error) {
	return m.forward([][]int{ids}, nil)
}

// LogitsBatch is Logits of B sequences of one length T at once (a batch's
// rows, as Hugging Face's input_ids [B, T]): a [B, T, Vocab] tensor whose
// row b is Logits(batch[b]). One pass's products then take B·T rows.
func (m *Model) LogitsBatch(batch [][]int) (*core.Tensor, error) {
	y, err := m.forward(batch, nil)
	if err != nil || len(batch) > 1 {
		return y, err
	}
	return m.e.Reshape(y, 1, len(batch[0]), m.Vocab)
}

// forward runs a batch of sequences of one length at the positions after
// those cache holds (0 without a cache; a cache takes one sequence),
// adding their keys and values to it: [T, Vocab] logits for one sequence,
// [B, T, Vocab] for more.
func (m *Model) forward(batch [][]int, cache *kvCache) (*core.Tensor, error) {
	if len(batch) == 0 || len(batch[0]) == 0 {
		return nil, fmt.Errorf("logits: no tokens")
	}
	if cache != nil && len(batch) > 1 {
		return nil, fmt.Errorf("logits: a key/value cache takes one sequence, not %d", len(batch))
	}
	T := len(batch[0])
	ids := make([]int, 0, len(batch)*T)
	for b, seq := range batch {
		if len(seq) != T {
			return nil, fmt.Errorf("logits: sequence %d has %d token(s) where the first has %d (a batch's sequences have one length)", b+1, len(seq), T)
		}
		for i, id := range seq {
			if id < 0 || id >= m.Vocab {
				where := fmt.Sprintf("token %d", i+1)
				if len(batch) > 1 {
					where += fmt.Sprintf(" of sequence %d", b+1)
				}
				return nil, fmt.Errorf("logits: %s (id %d) is outside the vocabulary of %d", where, id, m.Vocab)
			}
		}
		ids = append(ids, seq...)
	}
	start := 0
	if cache != nil {
		start = cache.n
		if start+T > cache.size {
			return nil, fmt.Errorf("logits: %d positions past the %d the cache holds", start+T, cache.size)
		}
	}
	pos := make([]int, T)
	for i := range pos {
		pos[i] = start + i
	}
	f := forward{m: m, e: m.e, batch: len(batch), pos: pos, cache: cache}
	x := f.do(func() (*core.Tensor, error) { return f.e.IndexSelect(m.tokens, 0, ids) })
	for i := range m.layers {
		x = f.block(i, x)
	}
	x = f.norm(x, m.outNorm)
	y := f.do(func() (*core.Tensor, error) { return f.e.Linear(x, m.output) })
	if f.batch > 1 {
		y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, f.batch, T, m.Vocab) })
	}
	if f.err == nil && cache != nil {
		cache.n += T
	}
	return y, f.err
}

// forward is one pass's state: the first error stops the rest.
type forward struct {
	m     *Model
	e     *core.Engine
	batch int   // sequences, each of len(pos) rows of x
	pos   []int // a sequence's positions
	cache *kvCache
	err   error
	made  []*core.Tensor // the results of the current layer's ops
}

func (f *forward) do(op func() (*core.Tensor, error)) *core.Tensor {
	if f.err != nil {
		return nil
	}
	t, err := op()
	f.err = err
	if t != nil {
		f.made = append(f.made, t)
	}
	return t
}

// norm is llama's RMS norm of each row times w.
func (f *forward) norm(x, w *core.Tensor) *core.Tensor {
	eps := float64(f.m.NormEps)
	return f.do(func() (*core.Tensor, error) { return f.e.RMSNorm(x, []int{f.m.Embd}, w, &eps) })
}

// block is one transformer layer: x + attention(norm(x)), then + the
// SwiGLU feed-forward of its norm.
//
// Outside a tape, what the layer made and its input are scratch once the
// layer is built (Transient): nothing else reads them, so they do not
// count toward the pass pool's bound, which would otherwise cut a long
// prompt's pass into a graph a layer.
func (f *forward) block(i int, x *core.Tensor) *core.Tensor {
	l := &f.m.layers[i]
	f.made = append(f.made[:0], x)
	h := f.norm(x, l.attnNorm)
	x = f.do(func() (*core.Tensor, error) { return f.e.Add(x, f.attention(i, h)) })
	h = f.norm(x, l.ffnNorm)
	gate, up := f.adapted(i, "ffn_gate", h), f.adapted(i, "ffn_up", h)
	gated := f.do(func() (*core.Tensor, error) { return f.e.SwiGLU(gate, up) })
	down := f.adapted(i, "ffn_down", gated)
	out := f.do(func() (*core.Tensor, error) { return f.e.Add(x, down) })
	if !f.e.Recording() {
		f.e.Transient(f.made[:len(f.made)-1]...)
	}
	return out
}

// attention is causal self-attention with rotary positions; each of the
// HeadsKV key and value heads serves Heads/HeadsKV query heads in turn
// (grouped-query attention, as llama.cpp groups them). With a cache, the
// new keys and values join those of the earlier positions. A batch's
// sequences attend each to its own: heads are [B, n, T, D] then.
func (f *forward) attention(i int, h *core.Tensor) *core.Tensor {
	c, T := f.m.Config, len(f.pos)
	rope := ggmlcgo.RopeOptions{Dims: c.RopeDims, Base: c.RopeBase, Scale: c.RopeScale}
	lead := []int{} // the batch dim, where there is one
	if f.batch > 1 {
		lead = []int{f.batch}
	}
	rows := func(tk, n int) []int { return append(append([]int{}, lead...), tk, n, c.HeadDim) } // [(B,) Tk, n, D]
	project := func(target string, n int, rotate bool) *core.Tensor {
		y := f.adapted(i, target, h)
		y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, rows(T, n)...) })
		if rotate {
			y = f.do(func() (*core.Tensor, error) { return f.e.Rope(y, f.pos, rope) })
		}
		return y
	}
	q, k, v := project("attn_q", c.Heads, true), project("attn_k", c.HeadsKV, true), project("attn_v", c.HeadsKV, false)
	if f.cache != nil {
		k, v = f.remember(f.cache.k[i], k), f.remember(f.cache.v[i], v)
	}
	at := len(lead)                              // the T dim
	heads := func(y *core.Tensor) *core.Tensor { // [(B,) Tk, n, D] -> [(B,) Heads, Tk, D]
		if y == nil {
			return nil
		}
		if tk, n := y.Shape()[at], y.Shape()[at+1]; n < c.Heads { // kv head j serves query heads jg..jg+g-1
			g := c.Heads / n
			if f.batch > 1 { // the batch and positions as one dim: 4 dims at most
				y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, f.batch*tk, n, c.HeadDim) })
			}
			y = f.do(func() (*core.Tensor, error) { return f.e.Unsqueeze(y, 2) })
			y = f.do(func() (*core.Tensor, error) { return f.e.Expand(y, []int{f.batch * tk, n, g, c.HeadDim}) })
			y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, rows(tk, c.Heads)...) })
		}
		return f.do(func() (*core.Tensor, error) { return f.e.Transpose(y, at, at+1) })
	}
	o := core.AttentionOptions{Causal: T > 1, Scale: 1 / math.Sqrt(float64(c.HeadDim))}
	if start := f.pos[0]; start > 0 && T > 1 { // causal below the diagonal that starts at column start
		mask := make([]float32, T*(start+T))
		for r := 0; r < T; r++ {
			for j := 0; j <= start+r; j++ {
				mask[r*(start+T)+j] = 1
			}
		}
		o.Causal = false
		o.Mask = f.do(func() (*core.Tensor, error) { return core.FromFloat32(mask, T, start+T) })
	}
	y := f.do(func() (*core.Tensor, error) {
		return f.e.ScaledDotProductAttention(heads(q), heads(k), heads(v), o)
	})
	y = f.do(func() (*core.Tensor, error) { return f.e.Transpose(y, at, at+1) })
	y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, f.batch*T, c.Embd) })
	return f.adapted(i, "attn_output", y)
}

// remember writes x, the new positions' keys or values, into the cache's
// rows for them and returns every position's so far: one graph with the
// rest of the pass (the write is queued before the reads).
func (f *forward) remember(cache, x *core.Tensor) *core.Tensor {
	start, T := f.pos[0], len(f.pos)
	f.do(func() (*core.Tensor, error) { return nil, f.e.WriteRows(cache, start, x) })
	return f.do(func() (*core.Tensor, error) { return f.e.Narrow(cache, 0, 0, start+T) })
}
