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
	if len(ids) == 0 {
		return nil, fmt.Errorf("logits: no tokens")
	}
	for i, id := range ids {
		if id < 0 || id >= m.Vocab {
			return nil, fmt.Errorf("logits: token %d (id %d) is outside the vocabulary of %d", i+1, id, m.Vocab)
		}
	}
	pos := make([]int, len(ids))
	for i := range pos {
		pos[i] = i
	}
	f := forward{m: m, e: m.e, pos: pos}
	x := f.do(func() (*core.Tensor, error) { return f.e.IndexSelect(m.tokens, 0, ids) })
	for i := range m.layers {
		x = f.block(&m.layers[i], x)
	}
	x = f.norm(x, m.outNorm)
	y := f.do(func() (*core.Tensor, error) { return f.e.Linear(x, m.output) })
	return y, f.err
}

// forward is one pass's state: the first error stops the rest.
type forward struct {
	m   *Model
	e   *core.Engine
	pos []int
	err error
}

func (f *forward) do(op func() (*core.Tensor, error)) *core.Tensor {
	if f.err != nil {
		return nil
	}
	t, err := op()
	f.err = err
	return t
}

// norm is llama's RMS norm of each row times w.
func (f *forward) norm(x, w *core.Tensor) *core.Tensor {
	eps := float64(f.m.NormEps)
	return f.do(func() (*core.Tensor, error) { return f.e.RMSNorm(x, []int{f.m.Embd}, w, &eps) })
}

// block is one transformer layer: x + attention(norm(x)), then + the
// SwiGLU feed-forward of its norm.
func (f *forward) block(l *layer, x *core.Tensor) *core.Tensor {
	h := f.norm(x, l.attnNorm)
	x = f.do(func() (*core.Tensor, error) { return f.e.Add(x, f.attention(l, h)) })
	h = f.norm(x, l.ffnNorm)
	gate := f.do(func() (*core.Tensor, error) { return f.e.Linear(h, l.gate) })
	gate = f.do(func() (*core.Tensor, error) { return f.e.Silu(gate) })
	up := f.do(func() (*core.Tensor, error) { return f.e.Linear(h, l.up) })
	gated := f.do(func() (*core.Tensor, error) { return f.e.Mul(gate, up) })
	down := f.do(func() (*core.Tensor, error) { return f.e.Linear(gated, l.down) })
	return f.do(func() (*core.Tensor, error) { return f.e.Add(x, down) })
}

// attention is causal self-attention with rotary positions; each of the
// HeadsKV key and value heads serves Heads/HeadsKV query heads in turn
// (grouped-query attention, as llama.cpp groups them).
func (f *forward) attention(l *layer, h *core.Tensor) *core.Tensor {
	c, T := f.m.Config, len(f.pos)
	rope := ggmlcgo.RopeOptions{Dims: c.RopeDims, Base: c.RopeBase, Scale: c.RopeScale}
	heads := func(w *core.Tensor, n int, rotate bool) *core.Tensor {
		y := f.do(func() (*core.Tensor, error) { return f.e.Linear(h, w) })
		y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, T, n, c.HeadDim) })
		if rotate {
			y = f.do(func() (*core.Tensor, error) { return f.e.Rope(y, f.pos, rope) })
		}
		if n < c.Heads { // [T, n, D] -> [T, n, g, D] -> [T, Heads, D]: kv head j serves query heads jg..jg+g-1
			g := c.Heads / n
			y = f.do(func() (*core.Tensor, error) { return f.e.Unsqueeze(y, 2) })
			y = f.do(func() (*core.Tensor, error) { return f.e.Expand(y, []int{T, n, g, c.HeadDim}) })
			y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, T, c.Heads, c.HeadDim) })
		}
		return f.do(func() (*core.Tensor, error) { return f.e.Transpose(y, 0, 1) }) // [Heads, T, D]
	}
	q, k, v := heads(l.q, c.Heads, true), heads(l.k, c.HeadsKV, true), heads(l.v, c.HeadsKV, false)
	o := core.AttentionOptions{Causal: true, Scale: 1 / math.Sqrt(float64(c.HeadDim))}
	y := f.do(func() (*core.Tensor, error) { return f.e.ScaledDotProductAttention(q, k, v, o) })
	y = f.do(func() (*core.Tensor, error) { return f.e.Transpose(y, 0, 1) })
	y = f.do(func() (*core.Tensor, error) { return f.e.Reshape(y, T, c.Embd) })
	return f.do(func() (*core.Tensor, error) { return f.e.Linear(y, l.o) })
}
