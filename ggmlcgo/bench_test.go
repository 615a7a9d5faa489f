package ggmlcgo

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// graphOf builds out = op(a, b) on n x n inputs placed on b's buffer type,
// with its intermediates allocated by a Gallocr.
func graphOf(tb testing.TB, be *Backend, n int64, op func(*Context, Tensor, Tensor) (Tensor, error)) *Graph {
	ctx, err := NewContext(8, 8)
	require.NoError(tb, err)
	tb.Cleanup(ctx.Free)
	x, _ := ctx.NewTensor(F32, []int64{n, n})
	y, _ := ctx.NewTensor(F32, []int64{n, n})
	buf, err := be.BufferType().Alloc(2*x.Nbytes() + 2*be.BufferType().Alignment())
	require.NoError(tb, err)
	tb.Cleanup(buf.Free)
	ta := NewTallocr(buf)
	require.NoError(tb, ta.Alloc(x))
	require.NoError(tb, ta.Alloc(y))
	require.NoError(tb, x.Set(make([]byte, x.Nbytes())))
	require.NoError(tb, y.Set(make([]byte, y.Nbytes())))
	out, err := op(ctx, x, y)
	require.NoError(tb, err)
	g, err := ctx.NewGraph(8)
	require.NoError(tb, err)
	require.NoError(tb, g.Expand(out))
	ga := NewGallocr(be.BufferType())
	tb.Cleanup(ga.Free)
	require.NoError(tb, ga.AllocGraph(g))
	return g
}

// BenchmarkTinyCompute is the fixed cost of one graph compute: a 2x2 add.
// With a persistent threadpool it is about a microsecond; without one, ggml
// creates and joins threads on every compute.
func BenchmarkTinyCompute(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			be, err := NewCPU(threads)
			require.NoError(b, err)
			defer be.Close()
			g := graphOf(b, be, 2, (*Context).Add)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := be.Compute(g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMatMul reports f32 matmul GFLOP/s: it tells a fast build
// (-O3 -march=x86-64-v3) from a plain one.
func BenchmarkMatMul(b *testing.B) {
	const n = 512
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("n=%d/threads=%d", n, threads), func(b *testing.B) {
			be, err := NewCPU(threads)
			require.NoError(b, err)
			defer be.Close()
			g := graphOf(b, be, n, (*Context).MulMat)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := be.Compute(g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
