package core

import (
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// Rope is the rotary position embedding of llama-family models: each head
// of x ([.., T, H, D]: positions, heads, a head's width; T = len(pos))
// turned by its token's position pos[t], pair by pair, as llama.cpp's rope
// turns them (ggml_rope_ext): the pair (2i, 2i + 1) of the first o.Dims
// dims (with o.NeoX: i and i + Dims/2) by the angle
// pos·Scale·Base^(-2i/Dims); the dims past Dims pass unchanged. Its
// gradient turns g back by the same angles.
func (e *Engine) Rope(x *Tensor, pos []int, o ggmlcgo.RopeOptions) (*Tensor, error) {
	n := x.Dim()
	if n < 3 || n > 4 || x.shape[n-3] != len(pos) {
		return nil, shapeErrorf("rope: expected x of [.., T, H, D] with T the %d positions, got shape %s", len(pos), ShapeString(x.shape))
	}
	if d := x.shape[n-1]; o.Dims < 2 || o.Dims%2 != 0 || o.Dims > d {
		return nil, argErrorf("rope: %d rotated dims for heads of %d (an even number from 2 to the head's width)", o.Dims, d)
	}
	for _, v := range []float32{o.Base, o.Scale} {
		if !(v > 0) || math.IsInf(float64(v), 1) {
			return nil, argErrorf("rope: the base (%g) and the position scale (%g) must be positive and finite", o.Base, o.Scale)
		}
	}
	for i, p := range pos {
		if p < math.MinInt32 || p > math.MaxInt32 {
			return nil, argErrorf("rope: position %d (%d) does not fit an int32", i+1, p)
		}
	}
	it, err := e.uploadInts(pos)
	if err != nil {
		return nil, err
	}
	y, err := e.kernelOp("rope", x.shape, []*Tensor{x, it}, func(c ctx, in []node) (node, error) { return c.Rope(in[0], in[1], o) })
	if err != nil {
		return nil, err
	}
	e.record(y, "rope", []*Tensor{x, it}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.kernelOp("rope_back", g.shape, []*Tensor{g, it}, func(c ctx, in []node) (node, error) { return c.RopeBack(in[0], in[1], o) })
		return []*Tensor{gx, nil}, err
	})
	return y, nil
}
