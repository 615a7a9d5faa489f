package core

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/gglua/gglua/ggmlcgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conv, pooling and norm families are checked against PyTorch's values
// in testdata/torch_conv.json (scripts/reference/conv.py): each case's
// output and the gradients of sum(output * cotangent), then by Gradcheck.

func loadConvCases(t *testing.T) []torchCase {
	t.Helper()
	return loadTorchFile(t, "testdata/torch_conv.json")
}

// assertConvClose compares with PyTorch to 1e-5 absolute plus 1e-5
// relative: sums of a few dozen float32 products, ordered differently.
func assertConvClose(t require.TestingT, want []torchNum, got []float32, msg string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Len(t, got, len(want), msg)
	for i, w := range want {
		wf := float64(w)
		assert.InDelta(t, wf, float64(got[i]), 1e-5+1e-5*math.Abs(wf), "%s: element %d", msg, i+1)
	}
}

// runConvTorchCases runs the reference cases of ops in torch_conv.json
// (forward, then the backward of sum(output * cotangent)), then Gradcheck
// of each case but those named in kinks.
func runConvTorchCases(t *testing.T, ops map[string]torchOp, kinks map[string]bool) {
	runConvTorchFile(t, "testdata/torch_conv.json", ops, kinks)
}

// runConvTorchFile is runConvTorchCases for the reference file path.
func runConvTorchFile(t *testing.T, path string, ops map[string]torchOp, kinks map[string]bool) {
	t.Run("reference", func(t *testing.T) {
		runTorchFileWith(t, path, ops, assertConvClose)
	})
	cases := loadTorchFile(t, path)
	t.Run("gradcheck", func(t *testing.T) {
		e := newEngine(t)
		for _, c := range cases {
			f, ok := ops[c.Op]
			if !ok || kinks[c.Name] {
				continue
			}
			t.Run(c.Name, func(t *testing.T) {
				in := make([]*Tensor, len(c.Inputs))
				for i, x := range c.Inputs {
					in[i] = x.host(t)
				}
				cot := c.Cotangent.host(t)
				loss := func(xs []*Tensor) (*Tensor, error) {
					return sumOf(e)(e.Mul(e.must(f(t, e, c, xs)), cot))
				}
				require.NoError(t, Gradcheck(e, loss, in, 1e-2, 2e-3, 2e-2))
			})
		}
	})
}

func (c torchCase) ints(t *testing.T, key string) [2]int {
	var v [2]int
	require.True(t, c.arg(t, key, &v), "%s: argument %s", c.Name, key)
	return v
}

func (c torchCase) int1(t *testing.T, key string) int {
	var v int
	require.True(t, c.arg(t, key, &v), "%s: argument %s", c.Name, key)
	return v
}

// bias is the case's third input, or nil.
func bias(in []*Tensor) *Tensor {
	if len(in) > 2 {
		return in[2]
	}
	return nil
}

var convTorchOps = map[string]torchOp{
	"conv2d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.Conv2d(in[0], in[1], bias(in), ConvOptions{Stride: c.ints(t, "stride"), Padding: c.ints(t, "padding"),
			Dilation: c.ints(t, "dilation"), Groups: c.int1(t, "groups")})
	},
	"conv1d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.Conv1d(in[0], in[1], bias(in), ConvOptions{Stride: [2]int{1, c.int1(t, "stride")}, Padding: [2]int{0, c.int1(t, "padding")},
			Dilation: [2]int{1, c.int1(t, "dilation")}, Groups: c.int1(t, "groups")})
	},
	"max_pool2d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.MaxPool2d(in[0], c.poolOptions(t))
	},
	"avg_pool2d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.AvgPool2d(in[0], c.poolOptions(t))
	},
	"adaptive_avg_pool2d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.AdaptiveAvgPool2d(in[0], c.ints(t, "output"))
	},
}

// poolOptions reads a pooling case's arguments: kernel, stride and padding
// pairs (integers for a 1-d op), and where given dilation, ceil_mode,
// count_include_pad and divisor_override (0 for none).
func (c torchCase) poolOptions(t *testing.T) PoolOptions {
	var o PoolOptions
	if strings.HasSuffix(c.Op, "1d") {
		o.Kernel[1], o.Stride[1], o.Padding[1] = c.int1(t, "kernel"), c.int1(t, "stride"), c.int1(t, "padding")
		c.arg(t, "dilation", &o.Dilation[1])
	} else {
		o.Kernel, o.Stride, o.Padding = c.ints(t, "kernel"), c.ints(t, "stride"), c.ints(t, "padding")
		c.arg(t, "dilation", &o.Dilation)
	}
	c.arg(t, "ceil_mode", &o.CeilMode)
	include := true
	c.arg(t, "count_include_pad", &include)
	o.ExcludePadding = !include
	c.arg(t, "divisor_override", &o.DivisorOverride)
	return o
}

// poolTorchOps run the cases of torch_pool.json (scripts/reference/pool.py).
var poolTorchOps = map[string]torchOp{
	"max_pool2d": convTorchOps["max_pool2d"],
	"avg_pool2d": convTorchOps["avg_pool2d"],
	"max_pool1d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.MaxPool1d(in[0], c.poolOptions(t))
	},
	"avg_pool1d": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		return e.AvgPool1d(in[0], c.poolOptions(t))
	},
}

// TestPoolOptionsMatchTorch: dilation, ceil_mode (PyTorch's output size,
// its rule dropping a last window that starts past the input and the left
// padding), count_include_pad, divisor_override and the 1-d forms.
func TestPoolOptionsMatchTorch(t *testing.T) {
	runConvTorchFile(t, "testdata/torch_pool.json", poolTorchOps, nil)
	for _, c := range loadTorchFile(t, "testdata/torch_pool.json") {
		_, ok := poolTorchOps[c.Op]
		assert.True(t, ok, "case %q: op %q is run by no test", c.Name, c.Op)
	}
}

func TestConvMatchesTorch(t *testing.T) {
	runConvTorchCases(t, convTorchOps, map[string]bool{"max_pool2d ties go to the first": true})
}

// TestConvCasesAreAllRun: every op of torch_conv.json belongs to the conv
// or the norm family's test.
func TestConvCasesAreAllRun(t *testing.T) {
	for _, c := range loadConvCases(t) {
		_, conv := convTorchOps[c.Op]
		_, norm := normTorchOps[c.Op]
		assert.True(t, conv || norm, "case %q: op %q is run by no test", c.Name, c.Op)
	}
}

// A wrong im2col gradient (the padding offset forgotten) is caught by the
// reference values: the check can fail.
func TestConvReferenceCatchesAWrongGradient(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{1, 1, 3, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	require.NoError(t, x.SetRequiresGrad(true))
	w := host(t, []int{1, 1, 2, 2}, 1, -1, 2, 0.5)
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		loss, err = sumOf(e)(e.Conv2d(x, w, nil, ConvOptions{Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}))
		return err
	}))
	_, err := e.Backward(loss)
	require.NoError(t, err)
	// Every pixel is covered by all four kernel elements: its gradient is
	// the kernel's sum, 2.5; a shifted scatter would give other values.
	got := values(t, x.Grad())
	for i, v := range got {
		assert.InDelta(t, 2.5, v, 1e-6, "element %d", i+1)
	}
	// assertConvClose objects to a value off by 1e-4.
	want := make([]torchNum, len(got))
	for i := range want {
		want[i] = 2.5
	}
	want[4] = 2.5001
	var rec failures
	assertConvClose(&rec, want, got, "gradient")
	assert.Equal(t, 1, rec.n, "one element differs")
}

// failures counts the failures of an assertion, in place of a *testing.T.
type failures struct{ n int }

func (f *failures) Errorf(string, ...any) { f.n++ }
func (f *failures) FailNow()              { f.n++ }

func TestConvShapeErrors(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{1, 4, 5, 5}, make([]float32, 100)...)
	opts := func(g int) ConvOptions {
		return ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: g}
	}
	for _, c := range []struct {
		name string
		f    func() (*Tensor, error)
		want []string
	}{
		{"channels", func() (*Tensor, error) {
			return e.Conv2d(x, host(t, []int{2, 3, 3, 3}, make([]float32, 54)...), nil, opts(1))
		},
			[]string{"conv2d", "3 input channels", "input 1x4x5x5", "weight 2x3x3x3"}},
		{"groups do not divide", func() (*Tensor, error) {
			return e.Conv2d(x, host(t, []int{3, 2, 3, 3}, make([]float32, 54)...), nil, opts(2))
		},
			[]string{"conv2d", "groups 2", "output channels 3"}},
		{"kernel too large", func() (*Tensor, error) {
			return e.Conv2d(x, host(t, []int{1, 4, 6, 3}, make([]float32, 72)...), nil, opts(1))
		},
			[]string{"conv2d", "kernel 6x3", "larger than the input 5x5"}},
		{"bias", func() (*Tensor, error) {
			return e.Conv2d(x, host(t, []int{2, 4, 3, 3}, make([]float32, 72)...), host(t, []int{3}, 0, 0, 0), opts(1))
		}, []string{"conv2d", "bias of shape 3,"}},
		{"stride 0", func() (*Tensor, error) {
			return e.Conv2d(x, host(t, []int{2, 4, 3, 3}, make([]float32, 72)...), nil, ConvOptions{Dilation: [2]int{1, 1}, Groups: 1})
		}, []string{"conv2d", "stride"}},
		{"conv1d rank", func() (*Tensor, error) {
			return e.Conv1d(x, host(t, []int{2, 4, 3}, make([]float32, 24)...), nil, opts(1))
		},
			[]string{"conv1d", "(N, C, L)", "1x4x5x5"}},
		{"pool padding", func() (*Tensor, error) {
			return e.MaxPool2d(x, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, Padding: [2]int{2, 0}})
		}, []string{"max_pool2d", "padding", "half"}},
		{"pool kernel", func() (*Tensor, error) {
			return e.AvgPool2d(x, PoolOptions{Kernel: [2]int{6, 2}, Stride: [2]int{1, 1}})
		}, []string{"avg_pool2d", "larger than the input 5x5"}},
		{"adaptive not divisible", func() (*Tensor, error) { return e.AdaptiveAvgPool2d(x, [2]int{2, 5}) },
			[]string{"adaptive_avg_pool2d", "5x5", "2x5", "not a multiple"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.f()
			require.Error(t, err)
			for _, s := range c.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// Unbatched inputs are accepted, as PyTorch's.
func TestConvUnbatched(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{1, 2, 2}, 1, 2, 3, 4)
	y, err := e.Conv2d(x, host(t, []int{1, 1, 1, 1}, 2), nil, ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 2}, y.Shape())
	assert.Equal(t, []float32{2, 4, 6, 8}, values(t, y))
	p, err := e.MaxPool2d(x, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1, 1}, p.Shape())
	assert.Equal(t, []float32{4}, values(t, p))
}

// TestWindowsComposedPath runs the pooling and convolution cases on the
// path a GPU takes (ggml's ops composed), which the CPU's kernels replace.
func TestWindowsComposedPath(t *testing.T) {
	runForced(t, &forceComposedWindows, TestPoolOptionsMatchTorch, TestConvMatchesTorch, TestConvTransposeMatchesTorch)
}

// TestMaxPoolTwoNaNs: with two NaNs in a window PyTorch's kernels (CPU and
// CUDA: val > max || isnan(val)) send the gradient to the last; ties to
// the first (torch 1.13: [[7, nan], [nan, 6]] -> grad [[0, 0], [1, 0]];
// [[5, 5], [1, 5]] -> [[1, 0], [0, 0]]). The CPU kernel does both.
func TestMaxPoolTwoNaNs(t *testing.T) {
	e := newEngine(t)
	nan := float32(math.NaN())
	for _, c := range []struct {
		x, want []float32
	}{
		{[]float32{7, nan, nan, 6}, []float32{0, 0, 1, 0}},
		{[]float32{5, 5, 1, 5}, []float32{1, 0, 0, 0}},
	} {
		x := host(t, []int{1, 1, 2, 2}, c.x...)
		require.NoError(t, x.SetRequiresGrad(true))
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			y, err := e.MaxPool2d(x, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}})
			if err == nil {
				loss, err = e.Sum(y)
			}
			return err
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
		assert.Equal(t, c.want, values(t, x.Grad()))
	}
}

// TestMaxPoolWindowInThePadding: a dilation can step a window over the
// whole plane, into the padding only (torch 1.13 gives -inf, then its
// backward corrupts the heap). gglua gives -inf and no gradient, on the
// CPU's kernel and on the composed path.
func TestMaxPoolWindowInThePadding(t *testing.T) {
	e := newEngine(t)
	for _, composed := range []bool{false, true} {
		forceComposedWindows = composed
		x := host(t, []int{1, 1, 2, 2}, 1, 2, 3, 4)
		require.NoError(t, x.SetRequiresGrad(true))
		var y, loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			y, err = e.MaxPool2d(x, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{3, 3}})
			if err == nil {
				loss, err = e.Sum(y)
			}
			return err
		}))
		assert.Equal(t, []float32{float32(math.Inf(-1))}, values(t, y), "composed %v", composed)
		_, err := e.Backward(loss)
		require.NoError(t, err)
		assert.Equal(t, []float32{0, 0, 0, 0}, values(t, x.Grad()), "composed %v", composed)
	}
	forceComposedWindows = false
}

// TestIm2colKernelIsGGMLs: the CPU's im2col kernel (patches.c) gives ggml's
// im2col element for element, over strides, paddings wider than the
// kernel, dilations, kernels wider than the input, and a strided input.
func TestIm2colKernelIsGGMLs(t *testing.T) {
	e := newEngine(t)
	defer func() { forceComposedWindows = false }()
	for _, c := range []struct {
		shape []int
		wd    window
	}{
		{[]int{2, 3, 7, 6}, window{k: [2]int{3, 3}, s: [2]int{1, 1}, d: [2]int{1, 1}}},
		{[]int{2, 3, 7, 6}, window{k: [2]int{3, 2}, s: [2]int{2, 3}, p: [2]int{1, 2}, d: [2]int{1, 1}}},
		{[]int{1, 2, 9, 8}, window{k: [2]int{2, 3}, s: [2]int{1, 2}, p: [2]int{3, 4}, d: [2]int{2, 3}}},
		{[]int{3, 1, 2, 3}, window{k: [2]int{5, 4}, s: [2]int{2, 1}, p: [2]int{2, 2}, d: [2]int{1, 1}}},
		{[]int{1, 4, 5, 11}, window{k: [2]int{1, 1}, s: [2]int{3, 4}, d: [2]int{1, 1}}},
		{[]int{2, 2, 6, 13}, window{k: [2]int{2, 6}, s: [2]int{1, 1}, p: [2]int{1, 3}, d: [2]int{1, 2}}},
	} {
		n := 1
		for _, d := range c.shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%13) - 6.5 + float32(i)/1000
		}
		x := host(t, c.shape, v...)
		require.NoError(t, c.wd.check("im2col", x))
		xt, err := e.Transpose(x, 2, 3) // a view: the kernel packs it
		require.NoError(t, err)
		var got [2][][]float32
		for k, in := range []*Tensor{x, xt} {
			for _, composed := range []bool{false, true} {
				forceComposedWindows = composed
				y, err := e.im2col("im2col", in, c.wd)
				require.NoError(t, err)
				got[k] = append(got[k], values(t, y))
			}
			assert.Equal(t, got[k][1], got[k][0], "input %v window %+v transposed %v", c.shape, c.wd, k == 1)
		}
	}
}

// maxPoolLoop is PyTorch's CPU max_pool2d loop (cpu_max_pool) over one
// [H, W] plane: each window's maximum (val > max || isnan(val): the first
// of ties, the last NaN; -inf for a window wholly in the padding) and the
// plane's gradient from gy, each window's sent to its maximum.
func maxPoolLoop(x []float32, h, w, oh, ow int, o PoolOptions, gy []float32) (y, gx []float32) {
	y, gx = make([]float32, oh*ow), make([]float32, h*w)
	for oy := range oh {
		for ox := range ow {
			m, at := float32(math.Inf(-1)), -1
			for i := range o.Kernel[0] {
				for j := range o.Kernel[1] {
					r, c := oy*o.Stride[0]-o.Padding[0]+i*o.Dilation[0], ox*o.Stride[1]-o.Padding[1]+j*o.Dilation[1]
					if r < 0 || r >= h || c < 0 || c >= w {
						continue
					}
					if at < 0 { // PyTorch starts at the window's first element
						at = r*w + c
					}
					if v := x[r*w+c]; v > m || v != v {
						m, at = v, r*w+c
					}
				}
			}
			y[oy*ow+ox] = m
			if at >= 0 {
				gx[at] += gy[oy*ow+ox]
			}
		}
	}
	return y, gx
}

// TestMaxPoolKernelIsPyTorchsLoop: the CPU's max_pool2d kernel (pool.c,
// whose 2x2 windows take a branch-free path) gives PyTorch's loop's values
// and gradients bit for bit, on data full of ties, NaNs and -inf, over odd
// sizes, ceil_mode's partial windows, padding, dilation and rows longer
// than the kernel's 64-column blocks.
func TestMaxPoolKernelIsPyTorchsLoop(t *testing.T) {
	e := newEngine(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	bits := func(v []float32) []uint32 {
		b := make([]uint32, len(v))
		for i, f := range v {
			b[i] = math.Float32bits(f)
		}
		return b
	}
	for _, c := range []struct {
		shape []int
		o     PoolOptions
	}{
		{[]int{2, 3, 6, 8}, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}}},
		{[]int{1, 2, 7, 9}, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}}},
		{[]int{1, 2, 7, 9}, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, CeilMode: true}},
		{[]int{1, 1, 4, 300}, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}}},
		{[]int{1, 2, 7, 9}, PoolOptions{Kernel: [2]int{3, 2}, Stride: [2]int{2, 1}, Padding: [2]int{1, 1}}},
		{[]int{1, 1, 9, 8}, PoolOptions{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, Padding: [2]int{1, 0}, Dilation: [2]int{2, 1}}},
	} {
		o := c.o
		if o.Dilation == [2]int{} {
			o.Dilation = [2]int{1, 1}
		}
		n, h, w := c.shape[0]*c.shape[1], c.shape[2], c.shape[3]
		v := make([]float32, n*h*w)
		for i := range v {
			switch r := (i * 7919) % 23; {
			case r == 0:
				v[i] = nan
			case r == 1:
				v[i] = inf
			default:
				v[i] = float32(r % 5) // ties everywhere
			}
		}
		x := host(t, c.shape, v...)
		require.NoError(t, x.SetRequiresGrad(true))
		var y, gy, loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			var err error
			if y, err = e.MaxPool2d(x, o); err != nil {
				return err
			}
			g := make([]float32, y.Numel())
			for i := range g {
				g[i] = float32(i%7) + 1
			}
			gy = host(t, y.shape, g...)
			loss, err = sumOf(e)(e.Mul(y, gy))
			return err
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
		oh, ow := y.shape[2], y.shape[3]
		var wantY, wantG []float32
		for p := range n {
			py, pg := maxPoolLoop(v[p*h*w:(p+1)*h*w], h, w, oh, ow, o, values(t, gy)[p*oh*ow:(p+1)*oh*ow])
			wantY, wantG = append(wantY, py...), append(wantG, pg...)
		}
		assert.Equal(t, bits(wantY), bits(values(t, y)), "input %v options %+v", c.shape, c.o)
		assert.Equal(t, bits(wantG), bits(values(t, x.Grad())), "input %v options %+v", c.shape, c.o)
	}
}

// TestConvBLASIsTheComposedPath: the CPU's OpenBLAS convolution (image by
// image, conv_blas.c) gives the composed path's values and gradients, over
// more images than threads, fewer input channels than threads (the weight
// gradient splits channels), stride, padding and dilation, with and
// without a bias, and with the input or the weight frozen.
func TestConvBLASIsTheComposedPath(t *testing.T) {
	if !ggmlcgo.BLASAvailable() {
		t.Skip("this build has no OpenBLAS: both paths are the composed one")
	}
	defer func() { forceComposedWindows = false }()
	e, err := NewEngine(EngineOptions{Threads: 2})
	require.NoError(t, err)
	defer e.Close()
	rng := rand.New(rand.NewSource(5))
	random := func(shape ...int) *Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return host(t, shape, v...)
	}
	for _, c := range []struct {
		x, w         []int
		o            ConvOptions
		bias         bool
		gradX, gradW bool
	}{
		{[]int{5, 3, 9, 8}, []int{4, 3, 3, 2}, ConvOptions{Stride: [2]int{2, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 2}, Groups: 1}, true, true, true},
		{[]int{3, 1, 6, 6}, []int{2, 1, 3, 3}, ConvOptions{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}, false, true, true},
		{[]int{4, 5, 7, 7}, []int{3, 5, 5, 5}, ConvOptions{Stride: [2]int{1, 1}, Padding: [2]int{2, 2}, Dilation: [2]int{1, 1}, Groups: 1}, true, false, true},
		{[]int{4, 5, 7, 7}, []int{3, 5, 1, 1}, ConvOptions{Stride: [2]int{3, 2}, Dilation: [2]int{1, 1}, Groups: 1}, true, true, false},
	} {
		x, w, b := random(c.x...), random(c.w...), random(c.w[0])
		if !c.bias {
			b = nil
		}
		require.NoError(t, x.SetRequiresGrad(c.gradX))
		require.NoError(t, w.SetRequiresGrad(c.gradW))
		var got [2][][]float32
		for k, composed := range []bool{false, true} {
			forceComposedWindows = composed
			x.grad, w.grad = nil, nil
			var y, loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				if y, err = e.Conv2d(x, w, b, c.o); err != nil {
					return err
				}
				loss, err = sumOf(e)(e.Mul(y, y))
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			got[k] = append(got[k], values(t, y))
			for _, p := range []*Tensor{x, w} {
				if p.requiresGrad {
					got[k] = append(got[k], values(t, p.Grad()))
				}
			}
		}
		require.Len(t, got[0], len(got[1]))
		for i := range got[0] {
			for j, want := range got[1][i] { // sums of products in other orders: a relative bound
				if d := math.Abs(float64(got[0][i][j] - want)); d > 1e-5*(1+math.Abs(float64(want))) {
					t.Errorf("input %v weight %v: result %d element %d is %g, the composed path's %g", c.x, c.w, i, j, got[0][i][j], want)
					break
				}
			}
		}
	}
}
