package core

import (
	"testing"

	"github.com/gglua/gglua/ggmlcgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each case: loss = sum(op(x) * w) for a fixed w, so x's gradient is w
// carried back to where each element came from, worked out by hand.
func shapeGradCases(t *testing.T) []gradCase {
	m23 := func() *Tensor { return host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6) }
	vec := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	weighted := func(e *Engine, y *Tensor, w *Tensor) (*Tensor, error) { return sumOf(e)(e.Mul(y, w)) }
	return []gradCase{
		{"select row", []*Tensor{m23()}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Select(in[0], 0, 1)), vec(1, 2, 3))
		}, 32, [][]float64{{0, 0, 0, 1, 2, 3}}},
		{"select column", []*Tensor{m23()}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Select(in[0], -1, 2)), vec(1, 2))
		}, 15, [][]float64{{0, 0, 1, 0, 0, 2}}},
		{"unsqueeze", []*Tensor{m23()}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Unsqueeze(in[0], 1)), host(t, []int{2, 1, 3}, 1, 2, 3, 4, 5, 6))
		}, 91, [][]float64{{1, 2, 3, 4, 5, 6}}},
		{"squeeze", []*Tensor{host(t, []int{2, 1, 3}, 1, 2, 3, 4, 5, 6)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Squeeze(in[0])), m23())
		}, 91, [][]float64{{1, 2, 3, 4, 5, 6}}},
		{"flip", []*Tensor{m23()}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Flip(in[0], 1)), m23())
		}, 83, [][]float64{{3, 2, 1, 6, 5, 4}}},
		{"index_select columns", []*Tensor{m23()}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.IndexSelect(in[0], 1, []int{2, 0, 2})), m23())
		}, 94, [][]float64{{2, 0, 4, 5, 0, 10}}},
		{"index_select 3-d last dim", []*Tensor{host(t, []int{2, 2, 2}, 1, 2, 3, 4, 5, 6, 7, 8)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.IndexSelect(in[0], -1, []int{1})), host(t, []int{2, 2, 1}, 1, 2, 3, 4))
		}, 60, [][]float64{{0, 1, 0, 2, 0, 3, 0, 4}}},
		{"stack", []*Tensor{vec(1, 2), vec(3, 4)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Stack(in, 1)), host(t, []int{2, 2}, 1, 2, 3, 4))
		}, 29, [][]float64{{1, 3}, {2, 4}}},
		{"expand", []*Tensor{host(t, []int{3, 1}, 1, 2, 3)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Expand(in[0], []int{-1, 2})), host(t, []int{3, 2}, 1, 2, 3, 4, 5, 6))
		}, 50, [][]float64{{3, 7, 11}}},
		{"tile", []*Tensor{vec(1, 2)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Tile(in[0], []int{2})), vec(1, 2, 3, 4))
		}, 16, [][]float64{{4, 6}}},
		{"chunk", []*Tensor{vec(1, 2, 3, 4, 5)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			parts := e.must2(e.Chunk(in[0], 2, 0))
			a := e.must(weighted(e, parts[0], vec(1, 1, 1)))
			return e.Add(a, e.must(weighted(e, parts[1], vec(2, 2))))
		}, 24, [][]float64{{1, 1, 1, 2, 2}}},
		// Narrow views' gradients: joined by cat where they tile a dim
		// (joinSlices), padded and added where they do not.
		{"chunk of columns, one used twice", []*Tensor{host(t, []int{2, 6}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			p := e.must2(e.Chunk(in[0], 3, 1))
			loss := e.must(weighted(e, p[2], host(t, []int{2, 2}, 9, 10, 11, 12)))
			loss = e.must(e.Add(loss, e.must(weighted(e, p[0], host(t, []int{2, 2}, 1, 2, 3, 4)))))
			loss = e.must(e.Add(loss, e.must(weighted(e, p[1], host(t, []int{2, 2}, 5, 6, 7, 8)))))
			return e.Add(loss, e.must(weighted(e, p[1], host(t, []int{2, 2}, 3, 3, 3, 3))))
		}, 688, [][]float64{{1, 2, 8, 9, 9, 10, 3, 4, 10, 11, 11, 12}}},
		{"split with a piece unused", []*Tensor{vec(1, 2, 3, 4, 5, 6)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			p := e.must2(e.SplitSizes(in[0], []int{2, 3, 1}, 0))
			return e.Add(e.must(weighted(e, p[0], vec(1, 2))), e.must(weighted(e, p[2], vec(5))))
		}, 35, [][]float64{{1, 2, 0, 0, 0, 5}}},
		{"overlapping narrows", []*Tensor{vec(1, 2, 3, 4, 5)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			a := e.must(weighted(e, e.must(e.Narrow(in[0], 0, 0, 3)), vec(1, 1, 1)))
			return e.Add(a, e.must(weighted(e, e.must(e.Narrow(in[0], 0, 2, 3)), vec(2, 2, 2))))
		}, 30, [][]float64{{1, 1, 3, 2, 2}}},
		{"chunks and their base", []*Tensor{vec(1, 2, 3, 4)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			p := e.must2(e.Chunk(in[0], 2, 0))
			loss := e.must(e.Add(e.must(weighted(e, p[0], vec(1, 2))), e.must(weighted(e, p[1], vec(3, 4)))))
			return e.Add(loss, e.must(weighted(e, in[0], vec(10, 10, 10, 10))))
		}, 130, [][]float64{{11, 12, 13, 14}}},
		{"flatten", []*Tensor{host(t, []int{2, 1, 3}, 1, 2, 3, 4, 5, 6)}, func(e *Engine, in []*Tensor) (*Tensor, error) {
			return weighted(e, e.must(e.Flatten(in[0], 1, 2)), m23())
		}, 91, [][]float64{{1, 2, 3, 4, 5, 6}}},
	}
}

func (e *Engine) must2(ts []*Tensor, err error) []*Tensor {
	if err != nil {
		panic(err)
	}
	return ts
}

func TestShapeGradients(t *testing.T) {
	runGradCases(t, shapeGradCases(t), gradChecks{loose: []string{"index_select columns", "index_select 3-d last dim", "flip"}})
}

func TestShapeOps(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	cases := []struct {
		name  string
		got   func() (*Tensor, error)
		shape []int
		want  []float32
	}{
		{"select", func() (*Tensor, error) { return e.Select(x, 1, 0) }, []int{2}, []float32{1, 4}},
		{"select 1-d", func() (*Tensor, error) { return e.Select(host(t, []int{3}, 7, 8, 9), 0, 2) }, []int{1}, []float32{9}},
		{"unsqueeze at the end", func() (*Tensor, error) { return e.Unsqueeze(x, -1) }, []int{2, 3, 1}, []float32{1, 2, 3, 4, 5, 6}},
		{"squeeze a dim not of size 1 stays", func() (*Tensor, error) { return e.Squeeze(x, 0) }, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"squeeze all ones", func() (*Tensor, error) { return e.Squeeze(host(t, []int{1, 1}, 5)) }, []int{1}, []float32{5}},
		{"flip both", func() (*Tensor, error) { return e.Flip(x, 0, 1) }, []int{2, 3}, []float32{6, 5, 4, 3, 2, 1}},
		{"stack at front", func() (*Tensor, error) { return e.Stack([]*Tensor{x, x}, 0) }, []int{2, 2, 3}, []float32{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}},
		{"expand leading", func() (*Tensor, error) { return e.Expand(host(t, []int{2}, 1, 2), []int{2, 2}) }, []int{2, 2}, []float32{1, 2, 1, 2}},
		{"tile 2-d", func() (*Tensor, error) { return e.Tile(host(t, []int{1, 2}, 1, 2), []int{2, 2}) }, []int{2, 4}, []float32{1, 2, 1, 2, 1, 2, 1, 2}},
		{"unflatten", func() (*Tensor, error) { return e.Unflatten(host(t, []int{6}, 1, 2, 3, 4, 5, 6), 0, []int{3, -1}) }, []int{3, 2}, []float32{1, 2, 3, 4, 5, 6}},
		{"index_select of a transposed view", func() (*Tensor, error) {
			return e.IndexSelect(e.must(e.Transpose(x, 0, 1)), 0, []int{2, 0})
		}, []int{2, 2}, []float32{3, 6, 1, 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y, err := c.got()
			require.NoError(t, err)
			assert.Equal(t, c.shape, y.Shape())
			assert.Equal(t, c.want, values(t, y))
		})
	}

	parts, err := e.SplitSizes(x, []int{1, 2}, 1)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	assert.Equal(t, []float32{2, 3, 5, 6}, values(t, parts[1]))
	chunks, err := e.Chunk(host(t, []int{4}, 1, 2, 3, 4), 3, 0) // ceil(4/3) = 2: two chunks, as PyTorch
	require.NoError(t, err)
	assert.Len(t, chunks, 2)

	for name, bad := range map[string]func() error{
		"select out of range":  func() error { _, err := e.Select(x, 0, 2); return err },
		"unsqueeze past end":   func() error { _, err := e.Unsqueeze(x, 3); return err },
		"expand a real dim":    func() error { _, err := e.Expand(x, []int{3, 3}); return err },
		"split sizes mismatch": func() error { _, err := e.SplitSizes(x, []int{1, 1}, 1); return err },
		"flip dim twice":       func() error { _, err := e.Flip(x, 1, -1); return err },
		"stack unequal":        func() error { _, err := e.Stack([]*Tensor{x, host(t, []int{3}, 1, 2, 3)}, 0); return err },
		"index out of range":   func() error { _, err := e.IndexSelect(x, 1, []int{3}); return err },
		"fifth dim":            func() error { _, err := e.Unsqueeze(host(t, []int{1, 1, 1, 1}, 1), 0); return err },
		"chunk zero":           func() error { _, err := e.Chunk(x, 0, 0); return err },
		"tile negative":        func() error { _, err := e.Tile(x, []int{-1}); return err },
	} {
		assert.Error(t, bad(), name)
	}
}

// TestSelectIsAView: writing through x[i] reaches x, as in PyTorch.
func TestSelectIsAView(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	row, err := e.Select(x, 0, 1)
	require.NoError(t, err)
	require.NoError(t, e.Assign(row, host(t, []int{3}, 7, 8, 9)))
	assert.Equal(t, []float32{1, 2, 3, 7, 8, 9}, values(t, x))
	col, err := e.Select(x, 1, 0)
	require.NoError(t, err)
	require.NoError(t, e.Assign(col, host(t, []int{2}, 0, 0)))
	assert.Equal(t, []float32{0, 2, 3, 0, 8, 9}, values(t, x))
}

// A chunk's gradients are joined by cat (copies), not padded each to the
// whole shape and added; pieces that leave a gap still are.
func TestChunkGradientsJoinByCat(t *testing.T) {
	e := newEngine(t)
	for _, c := range []struct {
		name     string
		use      []int
		cat, add bool
	}{{"every chunk", []int{2, 0, 1}, true, false}, {"a chunk unused", []int{0, 2}, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			x := host(t, []int{2, 6}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
			require.NoError(t, x.SetRequiresGrad(true))
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				p := e.must2(e.Chunk(x, 3, 1))
				for _, i := range c.use {
					l := e.must(e.Sum(e.must(e.Mul(p[i], host(t, []int{2, 2}, 1, 2, 3, 4)))))
					if loss != nil {
						l = e.must(e.Add(loss, l))
					}
					loss = l
				}
				return nil
			}))
			ops := map[string]bool{}
			e.beforeCompute = func(g *ggmlcgo.Graph) {
				for _, n := range g.Nodes() {
					if n.Ne() == [ggmlcgo.MaxDims]int64{6, 2, 1, 1} { // x's shape
						ops[n.OpName()] = true
					}
				}
			}
			defer func() { e.beforeCompute = nil }()
			_, err := e.Backward(loss)
			require.NoError(t, err)
			want := make([]float32, 12)
			for _, i := range c.use {
				for r := range 2 {
					for k := 2 * i; k < 2*i+2; k++ {
						want[6*r+k] = float32(2*r + k - 2*i + 1)
					}
				}
			}
			assert.Equal(t, want, values(t, x.Grad()))
			assert.Equal(t, c.cat, ops["CONCAT"], "a concat")
			assert.Equal(t, c.add, ops["ADD"], "an add")
		})
	}
}
