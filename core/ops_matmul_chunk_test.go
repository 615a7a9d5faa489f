package core

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withChunking lowers the bounds past which products are built in blocks
// of rows, for the test.
func withChunking(t *testing.T, above, work int64) {
	oldAbove, oldWork := chunkMatmulAbove, chunkMatmulWork
	chunkMatmulAbove, chunkMatmulWork = above, work
	t.Cleanup(func() { chunkMatmulAbove, chunkMatmulWork = oldAbove, oldWork })
}

// TestChunkedMatmulIsIdentical: a product built in blocks of rows has the
// same bits as the one node, for shapes that take ggml's tiled kernel (k a
// multiple of 8, n of 4) and those that do not, through Matmul and Linear,
// with the gradients unchanged.
func TestChunkedMatmulIsIdentical(t *testing.T) {
	e := newEngine(t)
	e.useBLAS = false
	rnd := func(n int, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*7+seed))*0.5 + math.Cos(float64(i*i%97+seed)))
		}
		return v
	}
	for _, s := range [][3]int{{64, 96, 128}, {37, 53, 29}, {8, 16, 8}, {5, 7, 9}, {130, 12, 40}} {
		m, k, n := s[0], s[1], s[2]
		xv, wv, gv := rnd(m*k, 1), rnd(n*k, 2), rnd(m*n, 3)
		run := func(linear bool) (y, gx, gw []float32) {
			x, w := host(t, []int{m, k}, xv...), host(t, []int{n, k}, wv...)
			require.NoError(t, x.SetRequiresGrad(true))
			require.NoError(t, w.SetRequiresGrad(true))
			var loss, yt *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				if linear {
					yt, err = e.Linear(x, w)
				} else {
					var wt *Tensor
					if wt, err = e.Transpose(w, 0, 1); err == nil {
						var c *Tensor
						if c, err = e.Contiguous(wt); err == nil {
							yt, err = e.Matmul(x, c)
						}
					}
				}
				if err == nil {
					loss, err = sumOf(e)(e.Mul(yt, host(t, []int{m, n}, gv...)))
				}
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			return values(t, yt), values(t, x.Grad()), values(t, w.Grad())
		}
		for _, linear := range []bool{true, false} {
			y1, gx1, gw1 := run(linear)
			func() {
				withChunking(t, 0, 1) // every product in blocks of two rows
				y2, gx2, gw2 := run(linear)
				assert.Equal(t, y1, y2, "%v linear=%v: values", s, linear)
				assert.Equal(t, gx1, gx2, "%v linear=%v: dx", s, linear)
				assert.Equal(t, gw1, gw2, "%v linear=%v: dw", s, linear)
			}()
			func() {
				withChunking(t, 0, int64(n*k*5)) // blocks of five rows
				y3, _, _ := run(linear)
				assert.Equal(t, y1, y3, "%v linear=%v: values in blocks of 5", s, linear)
			}()
		}
	}
}

// TestSmallProductsAreOneNode: below the bound a product is one node, as
// before; above it, one per block (plus the writes).
func TestSmallProductsAreOneNode(t *testing.T) {
	e := newEngine(t)
	e.useBLAS = false
	x, w := host(t, []int{16, 8}, make([]float32, 128)...), host(t, []int{4, 8}, make([]float32, 32)...)
	nodes := func() int64 {
		before := e.Stats().NodesComputed
		y, err := e.Linear(x, w)
		require.NoError(t, err)
		values(t, y)
		return e.Stats().NodesComputed - before
	}
	one := nodes()
	withChunking(t, 0, 4*8*2) // blocks of two rows: 8 blocks
	assert.Greater(t, nodes(), one+8)
	withChunking(t, 16*8*4, 1) // the bound is exclusive: 16*8*4 is not above it
	assert.Equal(t, one, nodes())
}

// TestLargeProductIsCancellable: a product of about 2^34 multiply-adds,
// cancelled 300 ms in, stops within a second (as one node it ran on for
// tens of seconds on two cores).
func TestLargeProductIsCancellable(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4096x1024 by 1024x4096 product")
	}
	e := newEngine(t)
	e.useBLAS = false
	ones := make([]float32, 4096*1024)
	for i := range ones {
		ones[i] = 1
	}
	x, w := host(t, []int{4096, 1024}, ones...), host(t, []int{4096, 1024}, ones...)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e.SetContext(ctx)
	defer e.SetContext(nil)
	start := time.Now()
	y, err := e.Linear(x, w)
	require.NoError(t, err)
	_, err = y.Float32s()
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 1300*time.Millisecond)
}
