package core

import (
	"errors"
	"math/rand"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// mlpSteps trains a fresh MLP for n steps (host weights: their gradients
// live in the pass pool and are kept across steps) and returns its losses,
// the bytes Realize placed in the pass pool and the pool's last peak.
func mlpSteps(t *testing.T, n int) (losses []float32, placed, peak int64) {
	e := newEngine(t)
	rng := rand.New(rand.NewSource(3))
	m := newMLP(t, e, 64, 512, 8, 0.01, rng)
	xv := make([]float32, 256*64)
	for i := range xv {
		xv[i] = float32(rng.NormFloat64())
	}
	x, labels := host(t, []int{256, 64}, xv...), make([]int, 256)
	for i := range labels {
		labels[i] = i % 8
	}
	before := e.Stats().PassBytes
	for range n {
		losses = append(losses, m.step(t, x, labels))
	}
	return losses, e.Stats().PassBytes - before, e.Residency().Ledger().PeakBytes
}

// A step keeps memory of its own only for what can be read after it: the
// activations and their gradients share scratch memory planned by liveness,
// and the step computes exactly what it computed with every node placed.
func TestAStepKeepsMemoryOnlyForWhatCanBeRead(t *testing.T) {
	old := reachCheckBytes
	reachCheckBytes = 0 // this small step looks for unreachable results too
	defer func() { reachCheckBytes = old }()
	planned, placedPlanned, peakPlanned := mlpSteps(t, 4)

	planSteps = false
	every, placedEvery, peakEvery := mlpSteps(t, 4)
	planSteps = true

	assert.Equal(t, every, planned, "the same losses, bit for bit")
	// Placed: the losses and the weights' gradients (host weights: kept in
	// the pass pool), against every node of every step.
	assert.Less(t, placedPlanned*8, placedEvery, "planned %d bytes, every node %d", placedPlanned, placedEvery)
	// The peak: both hold the pass pool in one buffer of what a step used
	// (residency's recycle), the plan its scratch besides.
	assert.Less(t, peakPlanned*3, peakEvery*2, "peak planned %d, every node %d", peakPlanned, peakEvery)
}

// A result the caller still holds after the step (an activation kept in a
// Go variable) keeps its memory: it reads the same after the compute as
// it does when every node is placed.
func TestAHeldActivationStaysReadable(t *testing.T) {
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	run := func() []float32 {
		e := newEngine(t)
		m := newMLP(t, e, 4, 16, 3, 0.1, rand.New(rand.NewSource(5)))
		x := host(t, []int{2, 4}, 1, 2, 3, 4, -1, 0.5, 2, -3)
		var hidden *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			h, err := e.Linear(x, m.w1)
			if err == nil {
				hidden, err = e.Tanh(h)
			}
			if err != nil {
				return err
			}
			logits, err := e.Linear(hidden, m.w2)
			if err != nil {
				return err
			}
			loss, err := e.CrossEntropyLabels(logits, []int{0, 2})
			if err == nil {
				_, err = e.Backward(loss)
			}
			return err
		}))
		require.NoError(t, m.opt.Step())
		require.NoError(t, e.Realize())
		runtime.GC() // nothing but hidden is held
		return values(t, hidden)
	}
	planned := run()
	planSteps = false
	every := run()
	planSteps = true
	assert.Equal(t, every, planned)
}

// As in PyTorch, a backward frees what its graph saved: a second backward
// through it is refused, also through a value two losses share, where
// going on would silently give the first loss's parameters no gradient.
func TestASecondBackwardIsRefusedWhereItNeedsFreedValues(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{2}, 1, 2)
	require.NoError(t, w.SetRequiresGrad(true))
	var l1, l2 *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		h, err := e.Mul(w, w)
		if err != nil {
			return err
		}
		if l1, err = e.Sum(h); err != nil {
			return err
		}
		h3, err := e.Scale(h, 3)
		if err == nil {
			l2, err = e.Sum(h3)
		}
		return err
	}))
	_, err := e.Backward(l1)
	require.NoError(t, err)
	_, err = e.Backward(l1)
	assert.True(t, errors.Is(err, errReleased), "%v", err)
	_, err = e.Backward(l2)
	assert.True(t, errors.Is(err, errReleased), "%v", err)
	assert.Equal(t, []float32{2, 4}, values(t, w.Grad()), "the first backward's gradient stands")

	// Through ops that save nothing (add, scale, sum), a second backward
	// goes on, as in PyTorch: the gradients add up.
	v := host(t, []int{2}, 1, 2)
	require.NoError(t, v.SetRequiresGrad(true))
	require.NoError(t, e.WithGradTape(func() error {
		h, err := e.AddScalar(v, 1)
		if err == nil {
			l1, err = e.Sum(h)
		}
		if err != nil {
			return err
		}
		h3, err := e.Scale(h, 3)
		if err == nil {
			l2, err = e.Sum(h3)
		}
		return err
	}))
	_, err = e.Backward(l1)
	require.NoError(t, err)
	_, err = e.Backward(l2)
	require.NoError(t, err)
	_, err = e.Backward(l1)
	require.NoError(t, err)
	assert.Equal(t, []float32{5, 5}, values(t, v.Grad()), "1 + 3 + 1")
}

// A graph whose scratch memory the budget does not allow is refused with
// ErrBudget, and the engine goes on once the budget allows it.
func TestScratchMemoryIsWithinTheBudget(t *testing.T) {
	old := reachCheckBytes
	reachCheckBytes = 0 // exp(x), read by nothing but the sum, is scratch
	defer func() { reachCheckBytes = old }()
	e := newEngine(t)
	x := host(t, []int{512, 512}, make([]float32, 512*512)...)
	sum := func() (float32, error) {
		d, err := x.ToDevice(e, residency.Pass, ggmlcgo.F32)
		if err != nil {
			return 0, err
		}
		pass := e.Residency().Ledger().BufferBytes
		y, err := e.Exp(d)
		if err == nil {
			y, err = e.Sum(y)
		}
		if err != nil {
			return 0, err
		}
		v, err := y.Item()
		if err == nil {
			assert.Less(t, e.Residency().Ledger().BufferBytes-pass, int64(1<<20), "the exp (1 MiB) has no pass memory of its own")
		}
		return v, err
	}
	_, err := sum()
	require.NoError(t, err)
	l := e.Residency().Ledger()
	require.Greater(t, l.ScratchBytes, int64(512*512*4-1))
	assert.Equal(t, l.BufferBytes+l.PBufferBytes+l.CachedBytes+l.ScratchBytes, l.TotalBufferBytes)

	require.NoError(t, e.Reset()) // frees the scratch too
	assert.Zero(t, e.Residency().Ledger().TotalBufferBytes)
	_, err = e.Residency().SetLimit(2 << 20) // the upload fits, not the exp as well
	require.NoError(t, err)
	_, err = sum()
	require.Error(t, err)
	assert.True(t, errors.Is(err, residency.ErrBudget), "%v", err)
	_, err = e.Residency().SetLimit(0)
	require.NoError(t, err)
	v, err := sum()
	require.NoError(t, err)
	assert.Equal(t, float32(512*512), v)
}

// A transient result (read by nothing but the ops built from it) gets no
// pass memory of its own, the ops that read it see its value, and a read
// after its graph is refused, never answered from reused memory.
func TestATransientResultHasNoMemoryOfItsOwn(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{256, 1024}, make([]float32, 256*1024)...)
	run := func(transient bool) (*Tensor, *Tensor, int64) {
		before := e.Stats().PassBytes
		doubled, err := e.Scale(x, 2)
		require.NoError(t, err)
		y, err := e.AddScalar(doubled, 1)
		require.NoError(t, err)
		if transient {
			e.Transient(doubled)
		}
		require.NoError(t, e.Realize())
		return doubled, y, e.Stats().PassBytes - before
	}
	_, y, placedAll := run(false)
	doubled, yt, placed := run(true)
	assert.Equal(t, values(t, y), values(t, yt))
	assert.Equal(t, placedAll-int64(256*1024*4), placed, "only y is placed")
	_, err := doubled.Float32s()
	assert.True(t, errors.Is(err, residency.ErrStale), "%v", err)
}

// A graph refused for its memory is left pending as it was: once the
// budget allows it, the same results compute (the nodes placed before the
// refusal are placed again, not read from a place no longer theirs).
func TestAGraphRefusedForItsMemoryComputesLater(t *testing.T) {
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	e := newEngine(t)
	x := host(t, []int{512, 512}, make([]float32, 512*512)...)
	d, err := x.ToDevice(e, residency.Pass, ggmlcgo.F32)
	require.NoError(t, err)
	y, err := e.Exp(d)
	require.NoError(t, err)
	s, err := e.Sum(y)
	require.NoError(t, err)
	_, err = e.Residency().SetLimit(e.Residency().Ledger().TotalBufferBytes + 4096)
	require.NoError(t, err)
	require.ErrorIs(t, e.Realize(), residency.ErrBudget)
	_, err = e.Residency().SetLimit(0)
	require.NoError(t, err)
	v, err := s.Item()
	require.NoError(t, err)
	assert.Equal(t, float32(512*512), v)
}

// On a device a step's forward is a graph of its own (startForward), and
// its results get memory only where something can read them afterwards: a
// gradient that saved them, or a caller's variable. The tape itself holds
// no values: here the sum a + a (add saves nothing) and the product's
// output are dropped, and holding the sum keeps it.
// forwardPlaced is the pass memory that the forward's graph gets on e (a
// CPU computing as a device) for the loss forward makes inside a tape,
// under autocast to prec; then the loss's backward runs and it is read.
func forwardPlaced(t *testing.T, e *Engine, prec ggmlcgo.Type, forward func() (*Tensor, error)) int64 {
	require.NoError(t, e.backend.ComputeAsDevice())
	var loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		return e.Autocast(prec, func() (err error) {
			loss, err = forward()
			return err
		})
	}))
	before := e.Stats().PassBytes
	require.NoError(t, e.startForward())
	bytes := e.Stats().PassBytes - before
	_, err := e.Backward(loss)
	require.NoError(t, err)
	_, err = loss.Item()
	require.NoError(t, err)
	return bytes
}

func TestAForwardGraphKeepsOnlyWhatIsSaved(t *testing.T) {
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	forwardBytes := func(hold bool) int64 {
		e := newEngine(t)
		const n = 1 << 16
		w := host(t, []int{n}, make([]float32, n)...)
		require.NoError(t, w.SetRequiresGrad(true))
		c := host(t, []int{n}, make([]float32, n)...)
		var held *Tensor
		placed := forwardPlaced(t, e, ggmlcgo.F32, func() (*Tensor, error) {
			a := e.must(e.Mul(w, c))                         // saves c (w's gradient reads it)
			s := e.must(e.Add(a, a))                         // saves nothing
			g := e.must(e.Gelu(e.must(e.Add(s, w)), "none")) // saves its input
			if hold {
				held = s
			}
			return e.Sum(g)
		})
		if hold {
			_, err := held.Float32s() // still readable
			require.NoError(t, err)
		}
		return placed
	}
	const plane = 4 << 16
	// gelu's input, the loss and c's upload (a host operand: one copy a pass)
	kept := forwardBytes(false)
	assert.Less(t, kept, int64(3*plane), "the forward placed %d bytes", kept)
	assert.Equal(t, kept+plane, forwardBytes(true), "holding the sum keeps it")
}

// Until its backward, the tape keeps only what each op's gradient reads,
// as PyTorch's saved tensors: an op whose gradient needs its input's shape
// alone keeps neither its input nor its result (a closure that read
// x.shape kept x), exp and relu their result, log and GELU their input,
// LayerNorm its input (and a copy of its statistics), not its result, a
// product its input only where its weight is trained (as PyTorch). As
// the forward's graph sees it: dropUnreachable's collection drops what
// nothing reaches, and what is left gets memory of its own.
func TestTheTapeKeepsOnlyWhatGradientsRead(t *testing.T) {
	weight := func(t *testing.T, trained bool) *Tensor {
		w := host(t, []int{3, 8}, make([]float32, 24)...)
		require.NoError(t, w.SetRequiresGrad(trained))
		return w
	}
	type kept struct{ x, y bool }
	cases := []struct {
		name string
		op   func(e *Engine, x *Tensor) (*Tensor, error)
		want kept
	}{
		{"sum", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Sum(x) }, kept{}},
		{"sum_dim", func(e *Engine, x *Tensor) (*Tensor, error) { return e.SumDim(x, 1, false) }, kept{}},
		{"mean", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Mean(x) }, kept{}},
		{"reshape", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Reshape(x, 8, 4) }, kept{}},
		{"transpose", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Transpose(x, 0, 1) }, kept{}},
		{"unsqueeze", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Unsqueeze(x, 0) }, kept{}},
		{"narrow, expand", func(e *Engine, x *Tensor) (*Tensor, error) {
			return e.Expand(e.must(e.Narrow(x, 0, 1, 1)), []int{3, 8})
		}, kept{}},
		{"cat", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Cat([]*Tensor{x, x}, 0) }, kept{}},
		{"index_select", func(e *Engine, x *Tensor) (*Tensor, error) { return e.IndexSelect(x, 0, []int{1, 3}) }, kept{}},
		{"scale", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Scale(x, 3) }, kept{}},
		{"add a number", func(e *Engine, x *Tensor) (*Tensor, error) { return e.AddScalar(x, 3) }, kept{}},
		{"round", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Round(x) }, kept{}},
		{"exp", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Exp(x) }, kept{y: true}},
		{"tanh", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Tanh(x) }, kept{y: true}},
		{"relu", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Relu(x) }, kept{y: true}},
		{"softmax", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Softmax(x, 1) }, kept{y: true}},
		{"log", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Log(x) }, kept{x: true}},
		{"square", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Square(x) }, kept{x: true}},
		{"gelu", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Gelu(x, "none") }, kept{x: true}},
		{"layer_norm", func(e *Engine, x *Tensor) (*Tensor, error) { return e.LayerNorm(x, nil, nil, 1e-5) }, kept{x: true}},
		{"linear, the weight trained", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Linear(x, weight(t, true)) }, kept{x: true}},
		{"linear, the weight frozen", func(e *Engine, x *Tensor) (*Tensor, error) { return e.Linear(x, weight(t, false)) }, kept{}},
	}
	for _, c := range cases {
		e := newEngine(t)
		leaf := host(t, []int{4, 8}, make([]float32, 32)...)
		require.NoError(t, leaf.SetRequiresGrad(true))
		var loss *Tensor
		var wx, wy weak.Pointer[Tensor]
		require.NoError(t, e.WithGradTape(func() error {
			x := e.must(e.Scale(leaf, 2)) // an activation
			y := e.must(c.op(e, x))
			wx, wy = weak.Make(x), weak.Make(y)
			var err error
			loss, err = e.Sum(y)
			return err
		}), c.name)
		e.dropUnreachable()
		assert.Equal(t, c.want, kept{x: wx.Value() != nil, y: wy.Value() != nil}, "%s: what the tape keeps", c.name)
		_, err := e.Backward(loss)
		require.NoError(t, err, c.name)
	}
}

// A backward's graph holds a weight's gradient only until it is added into
// .grad, where the gradient became final, not to the graph's end with
// every other weight's; clip_grad_norm's scaling of the .grad buffers,
// queued after, keeps them so too, and its terms (g·g, one a weight) take
// scratch memory. Eight persistent 512x512 weights (1 MiB each) through a
// batch of 4 rows: the step's scratch holds a few of their gradients at
// once, not eight.
func TestABackwardFreesEachWeightsGradientWhereItIsFinal(t *testing.T) {
	const n, layers, mib = 512, 8, 1 << 20
	for _, clip := range []bool{false, true} {
		e := newEngine(t)
		rng := rand.New(rand.NewSource(1))
		ws := make([]*Tensor, layers)
		for i := range ws {
			v := make([]float32, n*n)
			for j := range v {
				v[j] = float32(rng.NormFloat64() / 32)
			}
			ws[i] = host(t, []int{n, n}, v...)
			require.NoError(t, ws[i].SetRequiresGrad(true))
			require.NoError(t, ws[i].MoveToDeviceAs(e, residency.Persistent, ggmlcgo.F32))
		}
		x := host(t, []int{4, n}, make([]float32, 4*n)...)
		for step := 0; step < 2; step++ {
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				h := x
				for _, w := range ws {
					h = e.must(e.Tanh(e.must(e.Linear(h, w))))
				}
				var err error
				loss, err = e.Sum(h)
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			if clip {
				_, err = e.ClipGradNorm(ws, 1)
				require.NoError(t, err)
			}
			_, err = loss.Item()
			require.NoError(t, err)
		}
		l := e.Residency().Ledger()
		assert.Less(t, l.ScratchBytes, int64(3*mib), "clip %v: scratch %d bytes for eight 1 MiB gradients", clip, l.ScratchBytes)
		assert.LessOrEqual(t, l.BufferBytes, int64(mib), "clip %v: pass memory %d bytes: the gradients and clip's terms are scratch", clip, l.BufferBytes)
	}
}

// gptBlock is one GPT layer under a device's autocast paths (the bf16
// gemm, the fused attention and MLP), pre-norm as nanoGPT's, over
// resident weights; copyAttention makes attention's output a tensor of its
// own before the projection reads it.
type gptBlock struct {
	ln, qkv, qkvBias, proj, projBias, w1, b1, w2, b2 *Tensor
	heads                                            int
}

func newGPTBlock(t *testing.T, e *Engine, d, heads int) *gptBlock {
	rng := rand.New(rand.NewSource(5))
	param := func(shape ...int) *Tensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.1)
		}
		p, err := host(t, shape, v...).ToDevice(e, residency.Persistent, ggmlcgo.F32)
		require.NoError(t, err)
		require.NoError(t, p.SetRequiresGrad(true))
		return p
	}
	return &gptBlock{ln: param(d), qkv: param(3*d, d), qkvBias: param(3 * d), proj: param(d, d), projBias: param(d),
		w1: param(4*d, d), b1: param(4 * d), w2: param(d, 4*d), b2: param(d), heads: heads}
}

func (m *gptBlock) forward(e *Engine, x *Tensor, copyAttention bool) (*Tensor, error) {
	b, tt, d := x.shape[0], x.shape[1], x.shape[2]
	var c chain
	h := c.do(func() (*Tensor, error) { return e.LayerNorm(x, m.ln, nil, 1e-5) })
	qkv := c.do(func() (*Tensor, error) { return e.LinearBias(h, m.qkv, m.qkvBias) })
	if c.err != nil {
		return nil, c.err
	}
	parts, err := e.Chunk(qkv, 3, 2)
	if err != nil {
		return nil, err
	}
	heads := func(z *Tensor) *Tensor {
		return c.do(func() (*Tensor, error) {
			return e.Transpose(c.do(func() (*Tensor, error) { return e.Reshape(z, b, tt, m.heads, d/m.heads) }), 1, 2)
		})
	}
	q, k, v := heads(parts[0]), heads(parts[1]), heads(parts[2])
	y := c.do(func() (*Tensor, error) { return e.ScaledDotProductAttention(q, k, v, AttentionOptions{Causal: true}) })
	y = c.do(func() (*Tensor, error) {
		return e.Reshape(c.do(func() (*Tensor, error) { return e.Transpose(y, 1, 2) }), b, tt, d)
	})
	if copyAttention {
		y = c.do(func() (*Tensor, error) { return e.Contiguous(y) })
	}
	x = c.do(func() (*Tensor, error) {
		return e.Add(x, c.do(func() (*Tensor, error) { return e.LinearBias(y, m.proj, m.projBias) }))
	})
	h = c.do(func() (*Tensor, error) { return e.LayerNorm(x, m.ln, nil, 1e-5) })
	return c.do(func() (*Tensor, error) {
		return e.Add(x, c.do(func() (*Tensor, error) { return e.MLP(h, m.w1, m.b1, m.w2, m.b2) }))
	}), c.err
}

// A GPT layer under autocast keeps what PyTorch's autocast keeps, less its
// weights' bf16 copies: the residual stream LayerNorm reads (f32) and its
// statistics, bf16 copies of the LayerNorms' results (the products' inputs),
// the bf16 q, k, v, attention's bf16 output with its log-sum-exp (read in
// place by the projection), and the MLP's bf16 hidden layer. Attention's
// output read in place computes what its copy computes, bit for bit.
func TestAGPTLayerKeepsWhatAutocastKeeps(t *testing.T) {
	defer func(g, f bool) { forceGemmBF16, forceFlashBF16 = g, f }(forceGemmBF16, forceFlashBF16)
	forceGemmBF16, forceFlashBF16 = true, true
	old := reachCheckBytes
	reachCheckBytes = 0
	defer func() { reachCheckBytes = old }()
	const B, T, D, H = 2, 32, 64, 4
	run := func(copyAttention bool) (placed int64, loss float32, grads [][]float32) {
		e := newEngine(t)
		m := newGPTBlock(t, e, D, H)
		xv := make([]float32, B*T*D)
		for i := range xv {
			xv[i] = float32(i%13) / 13
		}
		x, err := host(t, []int{B, T, D}, xv...).ToDevice(e, residency.Persistent, ggmlcgo.F32)
		require.NoError(t, err)
		var out *Tensor
		placed = forwardPlaced(t, e, ggmlcgo.BF16, func() (*Tensor, error) {
			y, err := m.forward(e, x, copyAttention)
			if err != nil {
				return nil, err
			}
			out = y
			return e.Sum(e.must(e.Mul(y, y)))
		})
		loss = values(t, e.must(e.Sum(out)))[0]
		for _, p := range []*Tensor{m.ln, m.qkv, m.qkvBias, m.proj, m.projBias, m.w1, m.b1, m.w2, m.b2} {
			require.NotNil(t, p.Grad())
			grads = append(grads, values(t, p.Grad()))
		}
		return placed, loss, grads
	}
	inPlace, loss, grads := run(false)
	copied, loss2, grads2 := run(true)
	assert.Equal(t, loss, loss2)
	for i := range grads {
		assert.Equal(t, bitsOfFloats(grads[i]), bitsOfFloats(grads2[i]), "gradient %d", i)
	}
	const rows = B * T
	f32, bf16 := int64(4), int64(2)
	want := rows*D*f32 + // the residual stream after attention (the second LayerNorm's input)
		2*2*rows*f32 + // the LayerNorms' statistics
		2*rows*D*bf16 + // their results' bf16 copies
		rows*3*D*bf16 + // q, k, v
		(rows*D+2*B*H*T)*bf16 + // attention's output and log-sum-exp
		rows*4*D*bf16 + // the MLP's hidden layer
		rows*D*f32 + // the layer's output, which the loss's y·y keeps
		f32 // the loss
	assert.Equal(t, want, inPlace, "placed by the forward")
	assert.Equal(t, want+rows*D*bf16, copied, "with attention's output copied (its bf16 copy kept)")
}

// Under autocast a resident weight's bf16 copy is made again by the
// backward: a weight written in place between the forward and the
// backward is refused, as PyTorch refuses a changed saved tensor (its
// copy would be the new weight's). The bf16 attention output that the
// projection reads in place is refused when written too.
func TestAutocastRefusesWhatChangedBeforeTheBackward(t *testing.T) {
	defer func(g, f bool) { forceGemmBF16, forceFlashBF16 = g, f }(forceGemmBF16, forceFlashBF16)
	forceGemmBF16, forceFlashBF16 = true, true
	const B, T, D, H = 2, 8, 32, 2
	cases := map[string]func(e *Engine, m *gptBlock) *Tensor{
		"a product's weight": func(e *Engine, m *gptBlock) *Tensor { return m.proj },
		"an MLP's weight":    func(e *Engine, m *gptBlock) *Tensor { return m.w1 },
	}
	for name, changed := range cases {
		e := newEngine(t)
		m := newGPTBlock(t, e, D, H)
		x := host(t, []int{B, T, D}, make([]float32, B*T*D)...)
		err := e.WithGradTape(func() error {
			return e.Autocast(ggmlcgo.BF16, func() error {
				y, err := m.forward(e, x, false)
				if err != nil {
					return err
				}
				loss := e.must(e.Sum(y))
				w := changed(e, m)
				if err := e.NoGrad(func() error { return e.Assign(w, e.must(e.Scale(w, 2))) }); err != nil {
					return err
				}
				_, err = e.Backward(loss)
				return err
			})
		})
		require.ErrorContains(t, err, "changed in place after the forward used it", name)
	}
	e := newEngine(t)
	m := newGPTBlock(t, e, D, H)
	qkv := host(t, []int{B, H, T, D / H}, make([]float32, B*T*D)...)
	require.NoError(t, qkv.SetRequiresGrad(true))
	err := e.WithGradTape(func() error {
		return e.Autocast(ggmlcgo.BF16, func() error {
			a := e.must(e.ScaledDotProductAttention(qkv, qkv, qkv, AttentionOptions{Causal: true}))
			require.Equal(t, ggmlcgo.BF16, a.storage().dtype, "attention's output is bf16 under autocast")
			flat := e.must(e.Reshape(e.must(e.Transpose(a, 1, 2)), B, T, D))
			loss := e.must(e.Sum(e.must(e.LinearBias(flat, m.proj, m.projBias)))) // reads the run in place
			zeros := host(t, a.Shape(), make([]float32, a.Numel())...)
			require.NoError(t, e.Assign(a.Detach(), e.must(e.Add(zeros, zeros))))
			_, err := e.Backward(loss)
			return err
		})
	})
	require.ErrorContains(t, err, "changed in place after the forward used it", "attention's output")
}

// A bf16 view read in place at an offset (rows of a product's result)
// gives what its copy gives, bit for bit; one whose offset is not
// 256-byte aligned is copied (cuBLASLt assumes aligned operands).
func TestABF16ViewIsReadWhereItLies(t *testing.T) {
	defer func(g bool) { forceGemmBF16 = g }(forceGemmBF16)
	forceGemmBF16 = true
	e := newEngine(t)
	m := newGPTBlock(t, e, 64, 2)
	xv := make([]float32, 6*64)
	for i := range xv {
		xv[i] = float32(i%17) / 17
	}
	x := host(t, []int{6, 64}, xv...)
	run := func(start int, copied bool) ([]float32, []float32) {
		var y *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			return e.Autocast(ggmlcgo.BF16, func() error {
				h := e.must(e.LinearBias(x, m.proj, m.projBias)) // bf16, [6, 64]
				rows := e.must(e.Narrow(h, 0, start, 2))
				if copied {
					rows = e.must(e.Contiguous(rows))
				} else {
					require.Equal(t, start%2 == 0, packedBF16View(rows), "rows from %d", start)
				}
				y = e.must(e.Sum(e.must(e.LinearBias(rows, m.proj, m.projBias))))
				return nil
			})
		}))
		m.proj.grad = nil
		_, err := e.Backward(y)
		require.NoError(t, err)
		return values(t, y), values(t, m.proj.Grad())
	}
	for _, start := range []int{2, 3} {
		y, g := run(start, false)
		y2, g2 := run(start, true)
		assert.Equal(t, bitsOfFloats(y2), bitsOfFloats(y), "rows from %d", start)
		assert.Equal(t, bitsOfFloats(g2), bitsOfFloats(g), "rows from %d", start)
	}
}
