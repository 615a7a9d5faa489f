package ggmlcgo

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesf32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func cpu(t *testing.T, threads int) *Backend {
	t.Helper()
	b, err := NewCPU(threads)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

// place makes the tensors of ne in one buffer and uploads their data.
func place(t *testing.T, b *Backend, ctx *Context, data [][]float32, ne ...[]int64) []Tensor {
	t.Helper()
	var ts []Tensor
	var total int64
	for _, n := range ne {
		x, err := ctx.NewTensor(F32, n)
		require.NoError(t, err)
		ts = append(ts, x)
		total += b.BufferType().AllocSize(x) + b.BufferType().Alignment()
	}
	buf, err := b.BufferType().Alloc(total)
	require.NoError(t, err)
	t.Cleanup(buf.Free)
	ta := NewTallocr(buf)
	for i, x := range ts {
		require.NoError(t, ta.Alloc(x))
		require.NoError(t, x.Set(f32bytes(data[i]...)))
	}
	return ts
}

func TestComputeOnCPUBackend(t *testing.T) {
	for _, threads := range []int{1, 2} {
		b := cpu(t, threads)
		ctx, err := NewContext(16, 16)
		require.NoError(t, err)
		defer ctx.Free()
		// a is 2x3 (ne 3,2), b is 2x3: mul_mat(a, b) = b * a^T, a 2x2 matrix.
		in := place(t, b, ctx, [][]float32{{1, 2, 3, 4, 5, 6}, {1, 0, 1, 0, 1, 0}, {10, 20, 30, 40}},
			[]int64{3, 2}, []int64{3, 2}, []int64{2, 2})
		mm, err := ctx.MulMat(in[0], in[1])
		require.NoError(t, err)
		sum, err := ctx.Add(mm, in[2])
		require.NoError(t, err)
		g, err := ctx.NewGraph(16)
		require.NoError(t, err)
		require.NoError(t, g.Expand(sum))
		assert.Equal(t, 2, g.NNodes())
		ga := NewGallocr(b.BufferType())
		defer ga.Free()
		require.NoError(t, ga.AllocGraph(g))
		assert.Positive(t, ga.BufferSize())
		require.NoError(t, b.Compute(g))
		out := make([]byte, sum.Nbytes())
		require.NoError(t, sum.Get(out))
		// rows of b·aᵀ: b0=(1,0,1): a0·b0=1+3=4, a1·b0=4+6=10 -> (4,10); b1=(0,1,0): (2,5)
		assert.Equal(t, []float32{4 + 10, 10 + 20, 2 + 30, 5 + 40}, bytesf32(out), "threads=%d", threads)
	}
}

func TestBadShapesAreErrors(t *testing.T) {
	ctx, err := NewContext(2, 0)
	require.NoError(t, err)
	defer ctx.Free()
	for name, ne := range map[string][]int64{
		"no dims":   {},
		"five dims": {1, 1, 1, 1, 1},
		"negative":  {3, -1},
		"zero":      {0},
		"huge":      {1 << 40, 1 << 40},
		"overflow":  {math.MaxInt64, 2},
	} {
		_, err := ctx.NewTensor(F32, ne)
		assert.Error(t, err, name)
	}
	_, err = ctx.NewTensor(Type(99), []int64{2})
	assert.ErrorContains(t, err, "unsupported dtype")
	_, err = ParseType("f64")
	assert.ErrorContains(t, err, "unknown dtype")

	// A context refuses the tensor it has no room for instead of aborting.
	for i := 0; i < 2; i++ {
		_, err := ctx.NewTensor(F32, []int64{4})
		require.NoError(t, err)
	}
	_, err = ctx.NewTensor(F32, []int64{4})
	assert.ErrorContains(t, err, "no room")
}

func TestOpsRefuseWhatGGMLWouldAssert(t *testing.T) {
	ctx, err := NewContext(16, 0)
	require.NoError(t, err)
	defer ctx.Free()
	a, _ := ctx.NewTensor(F32, []int64{3, 2})
	b, _ := ctx.NewTensor(F32, []int64{4, 2})
	_, err = ctx.MulMat(a, b)
	assert.ErrorContains(t, err, "mul_mat")
	_, err = ctx.Add(a, b)
	assert.ErrorContains(t, err, "cannot broadcast")
	_, err = ctx.Add(a, Tensor{})
	assert.ErrorContains(t, err, "nil operand")

	// soft_max_ext's mask: ne0 equal, ne1 at least a's, outer dims dividing.
	scores, _ := ctx.NewTensor(F32, []int64{4, 3, 2})
	for name, ne := range map[string][]int64{"ne0": {3, 3}, "ne1": {4, 2}, "ne2": {4, 3, 3}} {
		m, _ := ctx.NewTensor(F32, ne)
		_, err = ctx.SoftMaxExt(scores, m, 1)
		assert.ErrorContains(t, err, "soft_max_ext: mask", name)
	}
	fits, _ := ctx.NewTensor(F32, []int64{4, 3})
	_, err = ctx.SoftMaxExt(scores, fits, 0.5)
	assert.NoError(t, err)
	// set_rows: rows of b's width, one i32 index per row of b.
	dst, _ := ctx.NewTensor(F32, []int64{3, 5})
	idx2, _ := ctx.NewTensor(I32, []int64{2})
	idxF, _ := ctx.NewTensor(F32, []int64{2})
	idx3, _ := ctx.NewTensor(I32, []int64{3})
	for name, c := range map[string][3]Tensor{"width": {dst, b, idx2}, "f32 indices": {dst, a, idxF}, "count": {dst, a, idx3}} {
		_, err = ctx.SetRows(c[0], c[1], c[2])
		assert.ErrorContains(t, err, "set_rows", name)
	}
	_, err = ctx.SetRows(dst, a, idx2)
	assert.NoError(t, err)
}

func TestGraphAndBufferLimits(t *testing.T) {
	b := cpu(t, 1)
	ctx, err := NewContext(16, 16)
	require.NoError(t, err)
	defer ctx.Free()
	x := place(t, b, ctx, [][]float32{{1, 2}, {3, 4}}, []int64{2}, []int64{2})
	s1, _ := ctx.Add(x[0], x[1])
	s2, _ := ctx.Add(s1, x[1])
	g, err := ctx.NewGraph(2)
	require.NoError(t, err)
	assert.ErrorContains(t, g.Expand(s2), "do not fit")

	// Compute refuses a graph whose tensors have no memory.
	g2, err := ctx.NewGraph(4)
	require.NoError(t, err)
	require.NoError(t, g2.Expand(s1))
	assert.ErrorContains(t, b.Compute(g2), "no memory")
	// Or whose inputs have none (the node's own memory placed).
	loose, _ := ctx.NewTensor(F32, []int64{2})
	loose.SetName("loose")
	s3, _ := ctx.Add(x[0], loose)
	tail := place(t, b, ctx, [][]float32{{0, 0}}, []int64{2})[0]
	s3.p.buffer, s3.p.data = tail.p.buffer, tail.p.data
	g3, err := ctx.NewGraph(4)
	require.NoError(t, err)
	require.NoError(t, g3.Expand(s3))
	assert.ErrorContains(t, b.Compute(g3), `tensor "loose" has no memory`)

	// A full linear allocator refuses instead of aborting.
	buf, err := b.BufferType().Alloc(64)
	require.NoError(t, err)
	defer buf.Free()
	ta := NewTallocr(buf)
	big, _ := ctx.NewTensor(F32, []int64{1000})
	assert.False(t, ta.Fits(big))
	assert.ErrorContains(t, ta.Alloc(big), "do not fit")
	assert.ErrorContains(t, big.Set(make([]byte, 4000)), "no device memory")
	assert.ErrorContains(t, x[0].Set(make([]byte, 4)), "holds 8 bytes")
}

func TestDevicesListTheCPU(t *testing.T) {
	devs := Devices()
	require.NotEmpty(t, devs)
	found := false
	for _, d := range devs {
		if d.Type == "cpu" {
			found = true
			assert.NotEmpty(t, d.Name)
		}
	}
	assert.True(t, found, "%+v", devs)
	b, err := NewForDevice(devs[0].Name, 1)
	require.NoError(t, err)
	b.Close()
	b.Close()
	_, err = NewForDevice("NoSuchDevice", 1)
	assert.ErrorContains(t, err, "no ggml device")
	_, err = LoadBackend(filepath.Join(t.TempDir(), "libggml-nothing.so"))
	assert.Error(t, err)
	notLib := filepath.Join(t.TempDir(), "fake.so")
	require.NoError(t, os.WriteFile(notLib, []byte("not an elf"), 0o644))
	_, err = LoadBackend(notLib)
	assert.ErrorContains(t, err, "not a ggml backend")
}

func TestHalfConversionsRoundTrip(t *testing.T) {
	src := []float32{0, 1, -2.5, 65504, 1e-3}
	for _, typ := range []Type{F16, BF16} {
		half := make([]uint16, len(src))
		F32ToHalf(typ, src, half)
		back := make([]float32, len(src))
		HalfToF32(typ, half, back)
		for i := range src {
			assert.InEpsilon(t, float64(src[i])+1, float64(back[i])+1, 1e-2, "%v %v", typ, src[i])
		}
	}
	h := make([]uint16, 1)
	F32ToHalf(F16, []float32{1}, h)
	assert.Equal(t, uint16(0x3c00), h[0]) // IEEE half 1.0
	F32ToHalf(BF16, []float32{1}, h)
	assert.Equal(t, uint16(0x3f80), h[0]) // bfloat16 1.0
}

func TestGGUFRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.gguf")
	w := NewGGUFWriter()
	w.SetString("general.name", "test")
	w.SetU32("gglua.version", 7)
	require.NoError(t, w.AddTensor("w", F32, []int64{3, 2}, f32bytes(1, 2, 3, 4, 5, 6)))
	require.NoError(t, w.AddTensor("b", F32, []int64{2}, f32bytes(-1, 1)))
	assert.ErrorContains(t, w.AddTensor("b", F32, []int64{2}, f32bytes(0, 0)), "duplicate")
	assert.ErrorContains(t, w.AddTensor("c", F32, []int64{2}, f32bytes(0)), "bytes given")
	require.NoError(t, w.WriteFile(path))
	w.Free()

	g, err := OpenGGUF(path)
	require.NoError(t, err)
	defer g.Close()
	name, ok := g.String("general.name")
	assert.True(t, ok)
	assert.Equal(t, "test", name)
	v, ok := g.U32("gglua.version")
	assert.True(t, ok)
	assert.Equal(t, uint32(7), v)
	ts := g.Tensors()
	require.Len(t, ts, 2)
	assert.Equal(t, "w", ts[0].Name)
	assert.Equal(t, [4]int64{3, 2, 1, 1}, ts[0].Ne)
	data, err := g.ReadTensor(ts[0])
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, bytesf32(data))

	// A truncated copy is an error, not a crash.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lastByte := int(ts[1].Offset + ts[1].Size) // the file may be padded past it
	for _, n := range []int{0, 10, len(raw) / 2, lastByte - 1} {
		cut := filepath.Join(t.TempDir(), "cut.gguf")
		require.NoError(t, os.WriteFile(cut, raw[:n], 0o644))
		_, err := OpenGGUF(cut)
		assert.Error(t, err, "truncated at %d", n)
	}
}

// TestLogIsRoutedToGoLogger checks that ggml's own messages arrive, whole
// lines at a time, at the logger SetLogger installed.
func TestLogIsRoutedToGoLogger(t *testing.T) {
	var buf bytes.Buffer
	SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer SetLogger(nil)
	// ggml logs an error for a library that is not a backend.
	bad := filepath.Join(t.TempDir(), "bad.so")
	require.NoError(t, os.WriteFile(bad, []byte("definitely not a library"), 0o644))
	_, err := LoadBackend(bad)
	require.Error(t, err)
	assert.Contains(t, buf.String(), "ggml: ")
	assert.True(t, slog.Default().Enabled(context.Background(), slog.LevelInfo))
}

// computeBoth computes x and y in one graph on b and reads them: a fast
// kernel's node and the ggml node it must equal.
func computeBoth(t *testing.T, b *Backend, ctx *Context, x, y Tensor) ([]float32, []float32) {
	t.Helper()
	g, err := ctx.NewGraph(32)
	require.NoError(t, err)
	// Both are read after the compute: ggml's allocator must not place
	// later nodes over them (it did, over a result whose source was a
	// freed half-precision tensor).
	x.SetOutput()
	y.SetOutput()
	require.NoError(t, g.Expand(x))
	require.NoError(t, g.Expand(y))
	ga := NewGallocr(b.BufferType())
	defer ga.Free()
	require.NoError(t, ga.AllocGraph(g))
	require.NoError(t, b.Compute(g))
	xv, yv := make([]byte, x.Nbytes()), make([]byte, y.Nbytes())
	require.NoError(t, x.Get(xv))
	require.NoError(t, y.Get(yv))
	return bytesf32(xv), bytesf32(yv)
}

func TestCPUFeaturesAreReported(t *testing.T) {
	f := CPUFeatures()
	// Whatever the flags, the answer must agree with SlowKernels.
	hasAVX2 := false
	for _, x := range f {
		hasAVX2 = hasAVX2 || x == "avx2"
	}
	if hasAVX2 {
		assert.False(t, SlowKernels())
	}
}

func TestTransposeCPUMatchesGGML(t *testing.T) {
	b := cpu(t, 2)
	ctx, err := NewContext(16, 16)
	require.NoError(t, err)
	defer ctx.Free()
	vals := make([]float32, 70*45*3)
	for i := range vals {
		vals[i] = float32(i)
	}
	x := place(t, b, ctx, [][]float32{vals}, []int64{70, 45, 3})[0]
	fast, err := ctx.TransposeCPU(x)
	require.NoError(t, err)
	slow, err := ctx.Transpose(x)
	require.NoError(t, err)
	assert.Equal(t, [4]int64{45, 70, 3, 1}, fast.Ne())
	fv, sv := computeBoth(t, b, ctx, fast, slow)
	assert.Equal(t, sv, fv)
	// element (r=2, c=5) of batch 1 moves to (c=5, r=2)
	assert.Equal(t, vals[1*70*45+2*70+5], fv[1*70*45+5*45+2])
}

// TestPadCPUMatchesGGML: gglua's pad kernel gives ggml's pad, along each
// dim, with zeros on either side or one.
func TestPadCPUMatchesGGML(t *testing.T) {
	b := cpu(t, 2)
	for dim := 0; dim < MaxDims; dim++ {
		for _, ba := range [][2]int{{2, 3}, {0, 4}, {5, 0}} {
			ctx, err := NewContext(16, 16)
			require.NoError(t, err)
			vals := make([]float32, 7*5*3*2)
			for i := range vals {
				vals[i] = float32(i + 1)
			}
			x := place(t, b, ctx, [][]float32{vals}, []int64{7, 5, 3, 2})[0]
			fast, err := ctx.PadCPU(x, dim, ba[0], ba[1])
			require.NoError(t, err)
			var pad [MaxDims][2]int
			pad[dim] = ba
			slow, err := ctx.Pad(x, pad)
			require.NoError(t, err)
			require.Equal(t, slow.Ne(), fast.Ne())
			g, err := ctx.NewGraph(16)
			require.NoError(t, err)
			require.NoError(t, g.Expand(fast))
			require.NoError(t, g.Expand(slow))
			ga := NewGallocr(b.BufferType())
			require.NoError(t, ga.AllocGraph(g))
			require.NoError(t, b.Compute(g))
			fv, sv := make([]byte, fast.Nbytes()), make([]byte, slow.Nbytes())
			require.NoError(t, fast.Get(fv))
			require.NoError(t, slow.Get(sv))
			assert.Equal(t, bytesf32(sv), bytesf32(fv), "dim %d, pad %v", dim, ba)
			ga.Free()
			ctx.Free()
		}
	}
	ctx, err := NewContext(4, 0)
	require.NoError(t, err)
	defer ctx.Free()
	x, _ := ctx.NewTensor(F32, []int64{3, 2})
	_, err = ctx.PadCPU(x, 4, 1, 1)
	assert.ErrorContains(t, err, "pad: cannot pad")
	_, err = ctx.PadCPU(x, 1, -1, 1)
	assert.ErrorContains(t, err, "pad: cannot pad")
}

// TestContRowsCPUMatchesGGML: gglua's row copy packs a permuted view and a
// narrowed one as ggml's cont does.
func TestContRowsCPUMatchesGGML(t *testing.T) {
	b := cpu(t, 2)
	ctx, err := NewContext(32, 32)
	require.NoError(t, err)
	defer ctx.Free()
	vals := make([]float32, 6*5*4*3)
	for i := range vals {
		vals[i] = float32(i + 1)
	}
	x := place(t, b, ctx, [][]float32{vals}, []int64{6, 5, 4, 3})[0]
	// dims 1 and 2 swapped, as a strided view (Permute itself copies)
	permuted, err := ctx.View(x, [MaxDims]int64{6, 4, 5, 3}, [MaxDims - 1]int64{4 * 6 * 5, 4 * 6, 4 * 6 * 5 * 4}, 0)
	require.NoError(t, err)
	narrowed, err := ctx.View(x, [MaxDims]int64{6, 2, 4, 3}, [MaxDims - 1]int64{4 * 6, 4 * 6 * 5, 4 * 6 * 5 * 4}, 4*6*2)
	require.NoError(t, err)
	g, err := ctx.NewGraph(32)
	require.NoError(t, err)
	var pairs [][2]Tensor
	for _, v := range []Tensor{permuted, narrowed} {
		fast, err := ctx.ContRowsCPU(v)
		require.NoError(t, err)
		slow, err := ctx.Cont(v)
		require.NoError(t, err)
		require.NoError(t, g.Expand(fast))
		require.NoError(t, g.Expand(slow))
		pairs = append(pairs, [2]Tensor{fast, slow})
	}
	ga := NewGallocr(b.BufferType())
	defer ga.Free()
	require.NoError(t, ga.AllocGraph(g))
	require.NoError(t, b.Compute(g))
	for i, p := range pairs {
		fv, sv := make([]byte, p[0].Nbytes()), make([]byte, p[1].Nbytes())
		require.NoError(t, p[0].Get(fv))
		require.NoError(t, p[1].Get(sv))
		assert.Equal(t, bytesf32(sv), bytesf32(fv), "view %d", i)
	}
	assert.False(t, permuted.IsContiguous())
}
