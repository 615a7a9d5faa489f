package core

import (
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// Attention: one fused op where gglua has the kernel (flashFor), composed
// of differentiable ops elsewhere (matmul, masked_fill, softmax, dropout).

// AttentionOptions are scaled_dot_product_attention's options.
type AttentionOptions struct {
	// Mask (may be nil) broadcasts to the scores [.., Tq, Tk]: where it is
	// nonzero a query attends to a key, where it is 0 it does not (the
	// meaning of PyTorch's boolean attn_mask for this function).
	Mask *Tensor
	// Bias (may be nil) is added to the scores (PyTorch's float attn_mask).
	Bias *Tensor
	// Causal lets query i attend to keys 0..i only (top-left aligned, as
	// PyTorch's is_causal).
	Causal bool
	// Scale multiplies q·kᵀ; 0 means 1/sqrt(D).
	Scale float64
	// DropoutP drops attention weights while Training.
	DropoutP float64
	Training bool
}

// ScaledDotProductAttention is softmax(q·kᵀ·scale + bias, masked) · v for
// q [.., Tq, D], k [.., Tk, D], v [.., Tk, Dv] (batch dims broadcast). A
// query that may attend to no key gets NaN, as in PyTorch.
func (e *Engine) ScaledDotProductAttention(q, k, v *Tensor, o AttentionOptions) (*Tensor, error) {
	if q.Dim() < 2 || k.Dim() < 2 || v.Dim() < 2 || q.shape[q.Dim()-1] != k.shape[k.Dim()-1] || k.shape[k.Dim()-2] != v.shape[v.Dim()-2] {
		return nil, shapeErrorf("scaled_dot_product_attention: shapes q %s, k %s, v %s do not fit (expected [.., Tq, D], [.., Tk, D], [.., Tk, Dv])", ShapeString(q.shape), ShapeString(k.shape), ShapeString(v.shape))
	}
	if !(o.DropoutP >= 0 && o.DropoutP < 1) {
		return nil, argErrorf("scaled_dot_product_attention: dropout_p %g is outside [0, 1)", o.DropoutP)
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(q.shape[q.Dim()-1]))
	}
	if math.IsNaN(scale) || math.IsInf(scale, 0) {
		return nil, argErrorf("scaled_dot_product_attention: scale %g is not a finite number", scale)
	}
	if fo, ok := e.flashFor(q, k, v, o); ok {
		fo.Scale = float32(scale)
		return e.flashAttention(q, k, v, fo)
	}
	tq, tk := q.shape[q.Dim()-2], k.shape[k.Dim()-2]
	var c chain
	var s *Tensor
	if e.rowsMatmul(q, k) {
		s = c.do(func() (*Tensor, error) { return e.timesTransposed(q, k) })
	} else {
		kt := c.do(func() (*Tensor, error) { return e.Transpose(k, -1, -2) })
		s = c.do(func() (*Tensor, error) { return e.Matmul(q, kt) })
	}
	if o.Bias == nil && o.Mask == nil {
		// The scale and a causal bias ride in ggml's soft_max_ext: one node
		// (and one for its gradient) instead of three over every score
		// (checked against the CPU on an H200: tests/gpu/library.lua).
		var bias *Tensor
		if o.Causal {
			bias = c.do(func() (*Tensor, error) { return e.causalBias(tq, tk) })
		}
		p := c.do(func() (*Tensor, error) { return e.scaledSoftmax(s, float32(scale), bias) })
		if c.err == nil {
			e.Transient(s) // softmax's gradient reads p, not s
		}
		return e.attend(p, v, o, &c)
	}
	s = c.do(func() (*Tensor, error) { return e.arithRight(OpMul, s, scale) })
	if o.Bias != nil {
		s = c.do(func() (*Tensor, error) { return e.Add(s, o.Bias) })
	}
	allowed := o.Mask
	if o.Causal && allowed == nil {
		// Causal alone: the mask added as a [Tq, Tk] bias of 0 and -inf,
		// as PyTorch's reference implementation does (attn_weight +=
		// attn_bias). One broadcast add instead of masked_fill's where over
		// every score (argmax + get_rows of 2*B*H*Tq*Tk elements, a fifth
		// of a small GPT's step on the CPU).
		causal := c.do(func() (*Tensor, error) { return e.causalBias(tq, tk) })
		s = c.do(func() (*Tensor, error) { return e.Add(s, causal) })
	} else if o.Causal {
		tri := make([]float32, tq*tk)
		for i := range tq {
			for j := 0; j <= i && j < tk; j++ {
				tri[i*tk+j] = 1
			}
		}
		causal := c.do(func() (*Tensor, error) { return FromFloat32(tri, tq, tk) })
		m := c.do(func() (*Tensor, error) { return e.truth(allowed) })
		allowed = c.do(func() (*Tensor, error) { return e.Mul(m, causal) })
	}
	if allowed != nil {
		blocked := c.do(func() (*Tensor, error) { return e.LogicalNot(allowed) })
		s = c.do(func() (*Tensor, error) { return e.MaskedFill(s, blocked, math.Inf(-1)) })
	}
	p := c.do(func() (*Tensor, error) { return e.Softmax(s, -1) })
	return e.attend(p, v, o, &c)
}

// attend is the end of attention: the weights p, dropped while training,
// times v.
func (e *Engine) attend(p, v *Tensor, o AttentionOptions, c *chain) (*Tensor, error) {
	if o.DropoutP > 0 && o.Training {
		p = c.do(func() (*Tensor, error) { return e.Dropout(p, o.DropoutP, true) })
	}
	out := c.do(func() (*Tensor, error) {
		if e.rowsMatmul(p, v) {
			return e.weighted(p, v)
		}
		return e.Matmul(p, v)
	})
	return out, c.err
}

// The products of attention read q, k and v where they lie: heads split
// from a projection by reshape and transpose are strided views with packed
// rows, which ggml's mul_mat takes as they are (a batched GEMM over
// pointers on CUDA). Composed of Matmul, each took two or three copies of
// its operands (flattening the batch dims, transposing k and v); now q·kᵀ
// takes none and p·v one, v transposed.

// rowsMatmul reports whether attention's products of a and b ([.., m, k]
// and [.., n, k] or [.., k, n]) read them as strided rows: on devices (the
// CPU packs rows with its own kernel), for 3-d or 4-d operands of one batch
// shape. Not under autocast: there each operand is rounded into a packed
// bf16 copy anyway (ggml-cuda's bf16 GEMM takes packed operands), which
// Matmul's path makes.
func (e *Engine) rowsMatmul(a, b *Tensor) bool {
	if (e.backend.IsCPU() && !forceRowsMatmul) || e.autocast != ggmlcgo.F32 || a.Dim() != b.Dim() || a.Dim() < 3 || a.Dim() > 4 {
		return false
	}
	return sameShape(a.shape[:a.Dim()-2], b.shape[:b.Dim()-2])
}

// forceRowsMatmul makes tests take the devices' attention products on the
// CPU.
var forceRowsMatmul = false

// timesTransposed is q·kᵀ for q [.., tq, d] and k [.., tk, d] (the scores,
// and the weights' gradient g·vᵀ): one mul_mat of their rows. Its
// gradients are Matmul's.
func (e *Engine) timesTransposed(q, k *Tensor) (*Tensor, error) {
	shape := append(append([]int(nil), q.shape[:q.Dim()-1]...), k.shape[k.Dim()-2])
	s, err := e.newOpReading("matmul", shape, []*Tensor{q, k}, e.rowsInput, func(c ctx, in []node) (node, error) {
		return c.MulMat(in[1], in[0])
	})
	if err != nil {
		return nil, err
	}
	e.record(s, "matmul", []*Tensor{q, k}, func(g *Tensor) ([]*Tensor, error) {
		var gq, gk *Tensor
		var ch chain
		if q.requiresGrad { // g·k
			gq = ch.do(func() (*Tensor, error) { return e.Matmul(g, k) })
		}
		if k.requiresGrad { // gᵀ·q
			gt := ch.do(func() (*Tensor, error) { return e.Transpose(g, -1, -2) })
			gk = ch.do(func() (*Tensor, error) { return e.Matmul(gt, q) })
		}
		return []*Tensor{gq, gk}, ch.err
	})
	return s, nil
}

// weighted is p·v for p [.., tq, tk] and v [.., tk, d]: v's transpose packed
// (one copy) times p's rows. The gradient for p, g·vᵀ, reads g's and v's
// rows as they are (timesTransposed); v's is Matmul's.
func (e *Engine) weighted(p, v *Tensor) (*Tensor, error) {
	shape := append(append([]int(nil), p.shape[:p.Dim()-1]...), v.shape[v.Dim()-1])
	out, err := e.newOpReading("matmul", shape, []*Tensor{p, v}, e.rowsInput, func(c ctx, in []node) (node, error) {
		vt, err := c.Transpose(in[1]) // packed
		if err != nil {
			return node{}, err
		}
		return c.MulMat(vt, in[0])
	})
	if err != nil {
		return nil, err
	}
	e.record(out, "matmul", []*Tensor{p, v}, func(g *Tensor) ([]*Tensor, error) {
		var gp, gv *Tensor
		var ch chain
		if p.requiresGrad { // g·vᵀ
			gp = ch.do(func() (*Tensor, error) { return e.timesTransposed(g, v) })
		}
		if v.requiresGrad { // pᵀ·g
			pt := ch.do(func() (*Tensor, error) { return e.Transpose(p, -1, -2) })
			gv = ch.do(func() (*Tensor, error) { return e.Matmul(pt, g) })
		}
		return []*Tensor{gp, gv}, ch.err
	})
	return out, nil
}

// causalBias is [tq, tk]: 0 where query i may attend to key j (j <= i), -inf
// elsewhere. It is made once per shape and kept (a host tensor no one else
// holds, so never changed): a step's attention layers then share one upload
// of it instead of each filling and uploading its own (6 x 256 KB a step
// for a nanoGPT-size model, 0.7 ms of the host's step on the H200's host).
// Only biases of up to causalKeepBytes are kept, at most 8 shapes, so
// that evaluating at many long lengths keeps no gigabytes.
func (e *Engine) causalBias(tq, tk int) (*Tensor, error) {
	key := [2]int{tq, tk}
	if t := e.causal[key]; t != nil {
		return t, nil
	}
	t, err := newCausalBias(tq, tk)
	if err != nil || int64(tq)*int64(tk)*4 > causalKeepBytes {
		return t, err
	}
	if len(e.causal) >= 8 { // many lengths (generation): start again
		clear(e.causal)
	}
	if e.causal == nil {
		e.causal = map[[2]int]*Tensor{}
	}
	e.causal[key] = t
	return t, nil
}

const causalKeepBytes = 4 << 20 // a 1024 x 1024 bias

func newCausalBias(tq, tk int) (*Tensor, error) {
	bias := make([]float32, tq*tk)
	for i := range tq {
		for j := i + 1; j < tk; j++ {
			bias[i*tk+j] = float32(math.Inf(-1))
		}
	}
	return FromFloat32(bias, tq, tk)
}

// scaledSoftmax is softmax(s·scale + bias) along the last dim, one ggml
// soft_max_ext node; bias (may be nil) is a constant [Tq, Tk] broadcast over
// s's batch dims, with no gradient. The gradient is soft_max_ext_back,
// which applies the scale: scale·p·(g - Σ g·p).
func (e *Engine) scaledSoftmax(s *Tensor, scale float32, bias *Tensor) (*Tensor, error) {
	inputs := []*Tensor{s}
	if bias != nil {
		inputs = append(inputs, bias)
	}
	p, err := e.newOp("softmax", s.shape, inputs, func(c ctx, in []node) (node, error) {
		var mask node
		if len(in) > 1 {
			mask = in[1]
		}
		return c.SoftMaxExt(in[0], mask, scale)
	})
	if err != nil {
		return nil, err
	}
	e.record(p, "softmax", []*Tensor{s}, func(g *Tensor) ([]*Tensor, error) {
		gs, err := e.newOp("softmax_back", s.shape, []*Tensor{g, p}, func(c ctx, in []node) (node, error) {
			return c.SoftMaxExtBack(in[0], in[1], scale)
		})
		return []*Tensor{gs}, err
	})
	return p, nil
}

// flashFor reports whether attention of q, k and v with o runs as the
// fused kernel, and in which precision: no mask, bias or dropout, heads
// of one batch shape (no broadcast) and one width for q, k and v. On the
// CPU in f32 (memory O(T) instead of the scores; autocast there composes
// ggml's products); on a device under autocast, bf16 on the tensor cores
// as PyTorch's flash kernel, for the head widths it has. A device in f32
// composes cuBLAS's f32 products (the kernel has no f32 form).
func (e *Engine) flashFor(q, k, v *Tensor, o AttentionOptions) (ggmlcgo.FlashOptions, bool) {
	n := q.Dim()
	if forceComposedAttention || o.Mask != nil || o.Bias != nil || (o.DropoutP > 0 && o.Training) || n < 3 || n > 4 || k.Dim() != n || v.Dim() != n ||
		!sameShape(q.shape[:n-2], k.shape[:n-2]) || !sameShape(k.shape[:n-1], v.shape[:n-1]) || v.shape[n-1] != q.shape[n-1] ||
		q.shape[n-2] == 0 || k.shape[n-2] == 0 || q.shape[n-1] == 0 || q.shape[n-1] > ggmlcgo.FlashMaxHeadDim {
		return ggmlcgo.FlashOptions{}, false
	}
	fo := ggmlcgo.FlashOptions{Causal: o.Causal, BF16: e.autocast == ggmlcgo.BF16}
	// f32 heads, or bf16 ones (a product's result under autocast) that the
	// bf16 kernel reads as they are stored, in place.
	for _, t := range []*Tensor{q, k, v} {
		if t.dtype != ggmlcgo.F32 && !(t.dtype == ggmlcgo.BF16 && fo.BF16 && bf16Heads(q, k, v)) {
			return ggmlcgo.FlashOptions{}, false
		}
	}
	if e.backend.IsCPU() {
		return fo, !fo.BF16 || forceFlashBF16
	}
	return fo, fo.BF16 && ggmlcgo.FlashDeviceHeadDim(q.shape[n-1]) && e.backend.HasKernel(ggmlcgo.KernelFlashAttnBF16)
}

// forceComposedAttention makes tests take the composed attention where the
// fused one would run; forceFlashBF16 makes them run the devices' bf16
// kernel (its CPU reference) under autocast on the CPU.
var forceComposedAttention, forceFlashBF16 = false, false

// flashAttention is attention as one fused node (flash_attn.c,
// gglua-flash-attn.cu). Its result is a view of the node's run, in which
// the heads lie side by side ([.., T, H, D]: the transpose back to
// [.., T, H·D] that a projection reads is free); the log-sum-exp after
// them is what the backward's node reads to remake the weights.
func (e *Engine) flashAttention(q, k, v *Tensor, fo ggmlcgo.FlashOptions) (*Tensor, error) {
	// The kernel's inputs, and what its backward reads: under autocast
	// while the tape records, f32 heads rounded to bf16 first (the values
	// the kernel rounds them to as it loads them), so the tape keeps half
	// the bytes, as PyTorch's autocast keeps its bf16 casts.
	heads := []*Tensor{q, k, v}
	if fo.BF16 && e.recording() && (q.requiresGrad || k.requiresGrad || v.requiresGrad) && !keepF32Heads {
		for i, t := range heads {
			r, err := e.bf16Head(t)
			if err != nil {
				return nil, err
			}
			heads[i] = r
		}
	}
	read := e.rowsInput
	if heads[0].dtype == ggmlcgo.BF16 {
		read = e.storedRowsInput
	}
	runLen := ggmlcgo.FlashRun(q.Numel(), q.Numel()/int64(q.shape[q.Dim()-1]), fo)
	run, err := e.newOpReading("scaled_dot_product_attention", []int{int(runLen)}, heads, read, func(c ctx, in []node) (node, error) {
		return c.FlashAttention(in[0], in[1], in[2], fo)
	})
	if err != nil {
		return nil, err
	}
	run.dtype = ggmlcgo.FlashRunType(fo) // bf16 under autocast, as PyTorch's
	out := headsView(run, q.shape, 0)
	// The backward reads run (the output and its log-sum-exp): recorded
	// as an input, so that a write into it (through out:detach()) is
	// refused at backward as a change of a saved tensor.
	hq, hk, hv := heads[0], heads[1], heads[2] // (the closure reads these alone: it would keep q, k, v)
	e.record(out, "scaled_dot_product_attention", []*Tensor{q, k, v, run}, func(g *Tensor) ([]*Tensor, error) {
		// The run as stored, g in f32 (the kernel's sums read it so).
		readBack := func(t *Tensor) (node, error) {
			switch t {
			case run:
				return e.storedInput(t)
			case g:
				return e.rowsInput(t)
			}
			return read(t)
		}
		grads, err := e.newOpReading("scaled_dot_product_attention_back", []int{int(hq.Numel() + 2*hk.Numel())}, []*Tensor{hq, hk, hv, run, g}, readBack,
			func(c ctx, in []node) (node, error) {
				return c.FlashAttentionBack(in[0], in[1], in[2], in[3], in[4], fo)
			})
		if err != nil {
			return nil, err
		}
		nq := hq.Numel()
		return []*Tensor{headsView(grads, hq.shape, 0), headsView(grads, hk.shape, nq), headsView(grads, hv.shape, nq+hk.Numel()), nil}, nil
	})
	return out, nil
}

// bf16Head is the f32 head t rounded to bf16, read in place as rows: its
// base rounded whole and viewed as t views it, where the base is t's
// elements alone (a rotated or expanded head's transpose); else t packed
// and rounded. A bf16 head is itself.
func (e *Engine) bf16Head(t *Tensor) (*Tensor, error) {
	if t.dtype != ggmlcgo.F32 {
		return t, nil
	}
	if b := t.base; b != nil && b.dtype == ggmlcgo.F32 && b.Numel() == t.Numel() && readsRowsInPlace(t) {
		r, err := e.bf16Operand(b)
		if err != nil {
			return nil, err
		}
		return viewOf(r, t.shape, t.offset, t.strides), nil
	}
	return e.bf16Operand(t)
}

// keepF32Heads makes tests give the bf16 kernel f32 heads, as it reads them
// outside a tape.
var keepF32Heads = false

// bf16Heads reports whether q, k and v are all stored in bf16 and read in
// place as rows (storedRowsInput), as the bf16 kernel takes them.
func bf16Heads(q, k, v *Tensor) bool {
	for _, t := range []*Tensor{q, k, v} {
		if t.storage().dtype != ggmlcgo.BF16 || !readsRowsInPlace(t) {
			return false
		}
	}
	return true
}

// headsView is the [.., H, T, D] tensor of shape that lies at element off
// of run as [.., T, H, D].
func headsView(run *Tensor, shape []int, off int64) *Tensor {
	n := len(shape)
	d, t, h := int64(shape[n-1]), int64(shape[n-2]), int64(shape[n-3])
	strides := make([]int64, n)
	strides[n-1], strides[n-2], strides[n-3] = 1, h*d, d
	if n == 4 {
		strides[0] = t * h * d
	}
	return viewOf(run, shape, off, strides)
}
