package core

import (
	"fmt"
	"math"
)

// Interpolate is PyTorch's F.interpolate of x [N, C, L] or [N, C, H, W]
// in modes nearest, nearest-exact, linear (3-d x) and bilinear (4-d x).
// Each spatial dim is resized on its own, the last first (the order of
// PyTorch's CPU kernels' sums): nearest picks one input index for each
// output index (one index_select), linear two neighbours weighted λ0 and
// λ1 (two index_selects, λ0·x0 + λ1·x1). The indices and weights are
// computed as PyTorch's kernels do, in float32, so the values are its own;
// the gradients are those of index_select, mul and add.
func (e *Engine) Interpolate(x *Tensor, o InterpolateOptions) (*Tensor, error) {
	const op = "interpolate"
	spatial := x.Dim() - 2
	if spatial < 1 || spatial > 2 {
		return nil, shapeErrorf("%s: expected [N, C, L] or [N, C, H, W], got shape %s", op, ShapeString(x.shape))
	}
	linear := o.Mode == "linear" || o.Mode == "bilinear"
	switch {
	case o.Mode == "linear" && spatial != 1, o.Mode == "bilinear" && spatial != 2:
		return nil, shapeErrorf("%s: mode %s needs a %d-d input, got shape %s", op, o.Mode, map[string]int{"linear": 3, "bilinear": 4}[o.Mode], ShapeString(x.shape))
	case !linear && o.Mode != "nearest" && o.Mode != "nearest-exact":
		return nil, argErrorf("%s: mode %q is not supported (nearest, nearest-exact, linear, bilinear)", op, o.Mode)
	case o.AlignCorners && !linear:
		return nil, argErrorf("%s: align_corners is for the interpolating modes (linear, bilinear), not %s", op, o.Mode)
	}
	size, scales, err := o.sizes(x.shape[2:])
	if err != nil {
		return nil, err
	}
	y := x
	for i := spatial - 1; i >= 0 && err == nil; i-- {
		in, out, d := x.shape[2+i], size[i], 2+i
		if linear && in == out {
			continue // PyTorch's kernel leaves a dim of unchanged size as it is, whatever the factor
		}
		if linear {
			y, err = e.linearResize(y, d, in, out, scales[i], o.AlignCorners)
			continue
		}
		idx := make([]int, out)
		for j := range idx {
			idx[j] = nearestIndex(j, in, out, scales[i], o.Mode == "nearest-exact", spatial == 2)
		}
		y, err = e.IndexSelect(y, d, idx)
	}
	return y, err
}

// InterpolateOptions are F.interpolate's: the output's spatial Size, or
// a Scale factor for each spatial dim (the output size its floor, the
// factor itself used for the coordinates, or with RecomputeScale, PyTorch's
// recompute_scale_factor, in/out as for a size); Mode; AlignCorners for
// the linear modes.
type InterpolateOptions struct {
	Size           []int
	Scale          []float64
	RecomputeScale bool
	Mode           string
	AlignCorners   bool
}

// sizes checks the options against the spatial dims and returns the
// output sizes and the factors the coordinates use (0: in/out).
func (o InterpolateOptions) sizes(in []int) ([]int, []float64, error) {
	const op = "interpolate"
	if (o.Size == nil) == (o.Scale == nil) {
		return nil, nil, argErrorf("%s: give exactly one of size and scale_factor", op)
	}
	if o.RecomputeScale && o.Scale == nil {
		return nil, nil, argErrorf("%s: recompute_scale_factor needs scale_factor (and no size)", op)
	}
	size, scales := make([]int, len(in)), make([]float64, len(in))
	for i, n := range in {
		if o.Size != nil {
			if len(o.Size) != len(in) {
				return nil, nil, shapeErrorf("%s: size %v for %d spatial dims %v", op, o.Size, len(in), in)
			}
			size[i] = o.Size[i]
		} else {
			if len(o.Scale) != len(in) {
				return nil, nil, shapeErrorf("%s: scale_factor %v for %d spatial dims %v", op, o.Scale, len(in), in)
			}
			f := o.Scale[i]
			if !(f > 0) || math.IsInf(f, 0) || float64(n)*f >= 1<<31 {
				return nil, nil, argErrorf("%s: scale_factor %g must be a positive finite number", op, f)
			}
			size[i], scales[i] = int(float64(n)*f), f
			if o.RecomputeScale {
				scales[i] = 0 // the coordinates from in/out
			}
		}
		if size[i] < 1 || size[i] > 1<<30 {
			return nil, nil, shapeErrorf("%s: output size %d along spatial dim %d (input %d): sizes are from 1, as PyTorch's", op, size[i], i+1, n)
		}
	}
	return size, scales, nil
}

// scaleOf is PyTorch's compute_scales_value in float32: 1/factor where a
// factor was given, else in/out.
func scaleOf(in, out int, factor float64) float32 {
	if factor > 0 {
		return float32(1 / factor)
	}
	return float32(in) / float32(out)
}

// nearestIndex is the source index of PyTorch 1.13's nearest kernels
// (exact: nearest-exact's). Its 2-d kernel (nearest_idx) takes j for out
// = in and j/2 for out = 2·in whatever the factor; its 1-d kernel
// always computes from the scale (torch: a [1, 1, 3] input at 1.2 gives
// [0, 0, 1], a [1, 1, 3, 3] one is unchanged).
func nearestIndex(j, in, out int, factor float64, exact, shortcuts bool) int {
	switch {
	case shortcuts && !exact && out == in:
		return j
	case shortcuts && !exact && out == 2*in:
		return j >> 1
	}
	scale := scaleOf(in, out, factor)
	var src int
	if exact { // floorf of the double (j + 0.5)·scale, as a float
		src = int(math.Floor(float64(float32((float64(j) + 0.5) * float64(scale)))))
	} else {
		src = int(float32(math.Floor(float64(float32(j) * scale))))
	}
	return min(src, in-1)
}

// linearResize resizes dim d of x from in to out by PyTorch's linear
// interpolation (compute_indices_weights_linear): source coordinate,
// its floor and the next index (the same at the end), weights 1-λ and λ.
func (e *Engine) linearResize(x *Tensor, d, in, out int, factor float64, alignCorners bool) (*Tensor, error) {
	var scale float32
	switch {
	case alignCorners && out > 1:
		scale = float32(in-1) / float32(out-1)
	case !alignCorners:
		scale = scaleOf(in, out, factor)
	}
	i0, i1 := make([]int, out), make([]int, out)
	w0, w1 := make([]float32, out), make([]float32, out)
	for j := range out {
		var src float32
		if alignCorners {
			src = scale * float32(j)
		} else if src = scale*(float32(j)+0.5) - 0.5; src < 0 {
			src = 0
		}
		i0[j] = int(src)
		lambda := min(max(src-float32(i0[j]), 0), 1)
		i1[j] = i0[j]
		if i0[j] < in-1 {
			i1[j]++
		}
		w0[j], w1[j] = 1-lambda, lambda
	}
	wshape := make([]int, x.Dim()) // out along d, 1 elsewhere
	for k := range wshape {
		wshape[k] = 1
	}
	wshape[d] = out
	var c chain
	do := c.do
	weight := func(w []float32) *Tensor {
		return do(func() (*Tensor, error) {
			t, err := FromFloat32(w, wshape...)
			if err != nil {
				return nil, fmt.Errorf("interpolate: %w", err)
			}
			return t, nil
		})
	}
	x0 := do(func() (*Tensor, error) { return e.IndexSelect(x, d, i0) })
	x1 := do(func() (*Tensor, error) { return e.IndexSelect(x, d, i1) })
	a := do(func() (*Tensor, error) { return e.Mul(weight(w0), x0) })
	b := do(func() (*Tensor, error) { return e.Mul(weight(w1), x1) })
	return do(func() (*Tensor, error) { return e.Add(a, b) }), c.err
}
