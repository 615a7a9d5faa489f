package core

import "math"

// Normalisation layers, as PyTorch's batch_norm, group_norm and rms_norm
// (layer_norm is in ops_nn.go). Each is composed of differentiable ops
// (means, products, rsqrt), so the gradients, through the batch
// statistics too, come from theirs.

// Float32Eps is torch.finfo(torch.float32).eps, rms_norm's default eps.
const Float32Eps = 1.1920928955078125e-07

// BatchNormOptions: Training normalises by the batch's statistics (biased
// variance) and, when running statistics are given, updates them in place
// (running = (1-Momentum)*running + Momentum*batch, with the unbiased
// variance); otherwise the running statistics normalise.
type BatchNormOptions struct {
	Training bool
	Momentum float64
	Eps      float64
}

func checkEps(op string, eps float64) error {
	if !(eps >= 0) || math.IsInf(eps, 0) {
		return argErrorf("%s: eps must be a finite number >= 0, got %g", op, eps)
	}
	return nil
}

// perChannel checks that each of ts is nil or of shape [c]; names name them.
func perChannel(op string, x *Tensor, c int, ts []*Tensor, names []string) error {
	for i, t := range ts {
		if t != nil && (t.Dim() != 1 || t.shape[0] != c) {
			return shapeErrorf("%s: %s of shape %s, expected (%d) for the %d channels of input %s", op, names[i], ShapeString(t.shape), c, c, ShapeString(x.shape))
		}
	}
	return nil
}

// affine is y*w + b along dim 1 of y [N, C, S] (w, b [C] or nil).
func (e *Engine) affine(y, w, b *Tensor) (*Tensor, error) {
	var c chain
	col := func(t *Tensor) *Tensor { return c.do(func() (*Tensor, error) { return e.Reshape(t, t.shape[0], 1) }) }
	if w != nil {
		w2 := col(w)
		y = c.do(func() (*Tensor, error) { return e.Mul(y, w2) })
	}
	if b != nil {
		b2 := col(b)
		y = c.do(func() (*Tensor, error) { return e.Add(y, b2) })
	}
	return y, c.err
}

// BatchNorm is PyTorch's batch_norm of x [N, C, ...]: normalised per
// channel over the batch and every other dim, then scaled by w and shifted
// by b (either may be nil). runMean and runVar ([C]) may be nil in
// training; in eval they are required.
func (e *Engine) BatchNorm(x, runMean, runVar, w, b *Tensor, o BatchNormOptions) (*Tensor, error) {
	const op = "batch_norm"
	if x.Dim() < 2 {
		return nil, shapeErrorf("%s: input of shape %s, expected (N, C, ...)", op, ShapeString(x.shape))
	}
	if err := checkEps(op, o.Eps); err != nil {
		return nil, err
	}
	if !(o.Momentum >= 0 && o.Momentum <= 1) {
		return nil, argErrorf("%s: momentum must be in [0, 1], got %g", op, o.Momentum)
	}
	n, ch := x.shape[0], x.shape[1]
	if err := perChannel(op, x, ch, []*Tensor{runMean, runVar, w, b}, []string{"running_mean", "running_var", "weight", "bias"}); err != nil {
		return nil, err
	}
	if (runMean == nil) != (runVar == nil) {
		return nil, argErrorf("%s: running_mean and running_var must be given together", op)
	}
	s := positions(x)
	count := n * s
	if x.Numel() == 0 { // no values: an empty result, the running statistics untouched (PyTorch's)
		if !o.Training && runMean == nil {
			return nil, argErrorf("%s: eval mode needs running_mean and running_var", op)
		}
		return e.emptyOf(op, x.shape, x, w, b), nil
	}
	if o.Training && count < 2 {
		return nil, shapeErrorf("%s: expected more than 1 value per channel when training, got input of shape %s", op, ShapeString(x.shape))
	}
	if !o.Training && runMean == nil {
		return nil, argErrorf("%s: eval mode needs running_mean and running_var", op)
	}
	var c chain
	do := c.do
	x3 := do(func() (*Tensor, error) { return e.Reshape(x, n, ch, s) })
	// stat is the per-channel mean of t [N, C, S], as [C, 1].
	stat := func(t *Tensor) *Tensor {
		m := do(func() (*Tensor, error) { return e.MeanDim(t, 2, false) }) // [N, C]
		m = do(func() (*Tensor, error) { return e.MeanDim(m, 0, false) })  // [C]
		return do(func() (*Tensor, error) { return e.Reshape(m, ch, 1) })
	}
	var mean, inv *Tensor
	if o.Training {
		mean = stat(x3)
		xc := do(func() (*Tensor, error) { return e.Sub(x3, mean) })
		v := stat(do(func() (*Tensor, error) { return e.Mul(xc, xc) }))
		inv = do(func() (*Tensor, error) { return e.AddScalar(v, float32(o.Eps)) })
		inv = do(func() (*Tensor, error) { return e.Rsqrt(inv) })
		if runMean != nil && c.err == nil {
			c.err = e.NoGrad(func() error { return e.updateRunning(runMean, runVar, mean, v, o.Momentum, count) })
		}
	} else {
		mean = do(func() (*Tensor, error) { return e.Reshape(runMean, ch, 1) })
		inv = do(func() (*Tensor, error) { return e.AddScalar(runVar, float32(o.Eps)) })
		inv = do(func() (*Tensor, error) { return e.Rsqrt(inv) })
		inv = do(func() (*Tensor, error) { return e.Reshape(inv, ch, 1) })
	}
	y := do(func() (*Tensor, error) { return e.Sub(x3, mean) })
	y = do(func() (*Tensor, error) { return e.Mul(y, inv) })
	y = do(func() (*Tensor, error) { return e.affine(y, w, b) })
	y = do(func() (*Tensor, error) { return e.Reshape(y, x.shape...) })
	return y, c.err
}

// updateRunning writes the running statistics in place: mean and v ([C,
// 1]) are the batch's mean and biased variance over count values.
func (e *Engine) updateRunning(runMean, runVar, mean, v *Tensor, m float64, count int) error {
	var c chain
	do := c.do
	blend := func(run, batch *Tensor, scale float64) *Tensor {
		bt := do(func() (*Tensor, error) { return e.Reshape(batch, run.shape...) })
		bt = do(func() (*Tensor, error) { return e.Scale(bt, float32(m*scale)) })
		r := do(func() (*Tensor, error) { return e.Scale(run, float32(1-m)) })
		return do(func() (*Tensor, error) { return e.Add(r, bt) })
	}
	nm := blend(runMean, mean, 1)
	nv := blend(runVar, v, float64(count)/float64(count-1))
	if c.err != nil {
		return c.err
	}
	if err := e.Assign(runMean, nm); err != nil {
		return err
	}
	return e.Assign(runVar, nv)
}

// GroupNorm is PyTorch's group_norm of x [N, C, ...]: normalised over each
// group of C/groups channels (and every other dim), then scaled by w and
// shifted by b per channel (either may be nil).
func (e *Engine) GroupNorm(x *Tensor, groups int, w, b *Tensor, eps float64) (*Tensor, error) {
	const op = "group_norm"
	if x.Dim() < 2 {
		return nil, shapeErrorf("%s: input of shape %s, expected (N, C, ...)", op, ShapeString(x.shape))
	}
	if err := checkEps(op, eps); err != nil {
		return nil, err
	}
	n, ch := x.shape[0], x.shape[1]
	if groups < 1 || ch%groups != 0 {
		return nil, shapeErrorf("%s: groups %d must be >= 1 and divide the %d channels of input %s", op, groups, ch, ShapeString(x.shape))
	}
	if err := perChannel(op, x, ch, []*Tensor{w, b}, []string{"weight", "bias"}); err != nil {
		return nil, err
	}
	s := positions(x)
	var c chain
	do := c.do
	xg := do(func() (*Tensor, error) { return e.Reshape(x, n, groups, ch/groups*s) })
	mean := do(func() (*Tensor, error) { return e.MeanDim(xg, 2, true) })
	xc := do(func() (*Tensor, error) { return e.Sub(xg, mean) })
	v := do(func() (*Tensor, error) { return e.Mul(xc, xc) })
	v = do(func() (*Tensor, error) { return e.MeanDim(v, 2, true) })
	v = do(func() (*Tensor, error) { return e.AddScalar(v, float32(eps)) })
	v = do(func() (*Tensor, error) { return e.Rsqrt(v) })
	y := do(func() (*Tensor, error) { return e.Mul(xc, v) })
	y = do(func() (*Tensor, error) { return e.Reshape(y, n, ch, s) })
	y = do(func() (*Tensor, error) { return e.affine(y, w, b) })
	y = do(func() (*Tensor, error) { return e.Reshape(y, x.shape...) })
	return y, c.err
}

// RMSNorm is PyTorch 2.4's rms_norm: x divided by the root mean square of
// its trailing dims normShape (plus eps; Float32Eps when eps is nil), times
// w (of shape normShape, or nil).
func (e *Engine) RMSNorm(x *Tensor, normShape []int, w *Tensor, eps *float64) (*Tensor, error) {
	const op = "rms_norm"
	k := len(normShape)
	if k < 1 || k > x.Dim() || !sameShape(x.shape[x.Dim()-k:], normShape) {
		return nil, shapeErrorf("%s: normalized_shape %v does not match the trailing dims of input %s", op, normShape, ShapeString(x.shape))
	}
	if w != nil && !sameShape(w.shape, normShape) {
		return nil, shapeErrorf("%s: weight of shape %s, expected normalized_shape %v", op, ShapeString(w.shape), normShape)
	}
	ep := Float32Eps
	if eps != nil {
		ep = *eps
	}
	if err := checkEps(op, ep); err != nil {
		return nil, err
	}
	inner := 1
	for _, d := range normShape {
		inner *= d
	}
	var c chain
	do := c.do
	x2 := do(func() (*Tensor, error) { return e.Reshape(x, int(x.Numel())/inner, inner) })
	var y *Tensor
	if e.fusedRMSNorm(inner) {
		y = do(func() (*Tensor, error) { return e.rmsNormRows(x2, float32(ep)) })
	} else {
		ms := do(func() (*Tensor, error) { return e.Mul(x2, x2) })
		ms = do(func() (*Tensor, error) { return e.MeanDim(ms, 1, true) })
		ms = do(func() (*Tensor, error) { return e.AddScalar(ms, float32(ep)) })
		ms = do(func() (*Tensor, error) { return e.Rsqrt(ms) })
		y = do(func() (*Tensor, error) { return e.Mul(x2, ms) })
	}
	if w != nil {
		w1 := do(func() (*Tensor, error) { return e.Reshape(w, inner) })
		y = do(func() (*Tensor, error) { return e.Mul(y, w1) })
	}
	y = do(func() (*Tensor, error) { return e.Reshape(y, x.shape...) })
	return y, c.err
}

// fusedRMSNorm reports whether RMSNorm over rows of n is ggml's rms_norm
// and its gradient ggml's rms_norm_back (one node each, where the
// composed form is seven): on the CPU, and on devices for rows whose
// length ggml-cuda's rms_norm_back takes (a multiple of 32).
func (e *Engine) fusedRMSNorm(n int) bool {
	return !composedRMSNorm && (e.backend.IsCPU() || n%32 == 0)
}

// composedRMSNorm makes RMSNorm compose its ops (tests compare the forms).
var composedRMSNorm = false

// rmsNormRows is each row of x (2-d) divided by its root mean square
// (plus eps), one node, its gradient one node.
func (e *Engine) rmsNormRows(x *Tensor, eps float32) (*Tensor, error) {
	y, err := e.kernelOp("rms_norm", x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return c.RMSNorm(in[0], eps) })
	if err != nil {
		return nil, err
	}
	e.record(y, "rms_norm", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		dx, err := e.kernelOp("rms_norm_back", x.shape, []*Tensor{g, x}, func(c ctx, in []node) (node, error) {
			return c.RMSNormBack(in[0], in[1], eps)
		})
		return []*Tensor{dx}, err
	})
	return y, nil
}

// positions is how many values a channel has in one sample of x [N, C,
// ...]: the product of the dims past C (1 for x [N, C]).
func positions(x *Tensor) int {
	s := 1
	for _, d := range x.shape[2:] {
		s *= d
	}
	return s
}
