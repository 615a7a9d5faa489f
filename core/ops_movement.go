package core

import (
	"slices"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Movement ops: shape changes, transposes, slices, joins and row lookups.
// Their gradients move g back to where each element came from.

// template describes (without memory) a tensor of shape, for ops that take
// a shape from a tensor: repeat_back reads only its ne.
func template(c ctx, shape []int) (node, error) {
	ne := ne4(shape)
	return c.NewTensor(ggmlcgo.F32, ne[:])
}

// expandTo tiles x up to shape (x's dims must be 1 or equal).
func (e *Engine) expandTo(x *Tensor, shape []int) (*Tensor, error) {
	if sameShape(x.shape, shape) {
		return x, nil
	}
	y, err := e.newOp("expand", shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return c.Repeat(in[0], ne4(shape)) })
	if err != nil {
		return nil, err
	}
	xshape := x.shape // the tape keeps no value
	e.record(y, "expand", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.sumTo(g, xshape)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// inferShape resolves one -1 size against numel and checks the result.
func inferShape(op string, x *Tensor, shape []int) ([]int, error) {
	if len(shape) > ggmlcgo.MaxDims {
		return nil, shapeErrorf("%s: %v has %d dims; gglua's tensors have at most %d (ggml's limit): fold the outer dims into one", op, shape, len(shape), ggmlcgo.MaxDims)
	}
	shape = append([]int(nil), shape...)
	infer, known := -1, int64(1)
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, argErrorf("%s: bad size %d in %v", op, d, shape)
		default:
			known *= int64(d)
		}
	}
	if infer >= 0 && known > 0 && x.Numel()%known == 0 {
		shape[infer] = int(x.Numel() / known)
	}
	if n, err := checkShape(shape); err != nil || n != x.Numel() {
		return nil, shapeErrorf("%s: cannot view shape %s (%d elements) as %v", op, ShapeString(x.shape), x.Numel(), shape)
	}
	return shape, nil
}

// Reshape gives x a new shape with the same number of elements; one size
// may be -1 (inferred). The result is a view of x (sharing its storage)
// when x's strides allow one (see View), and a copy otherwise, as PyTorch's
// reshape. Ops read such views in their graph (views.go), strided rows in
// place where the op takes them.
func (e *Engine) Reshape(x *Tensor, shape ...int) (*Tensor, error) {
	shape, err := inferShape("reshape", x, shape)
	if err != nil {
		return nil, err
	}
	if x.contiguous() {
		return e.View(x, shape...)
	}
	if _, ok := viewStrides(x, shape); ok {
		// A strided x whose steps the new shape can keep (splitting a
		// narrowed last dim into heads): a view, as PyTorch's reshape
		// gives, sharing x's memory both ways.
		return e.View(x, shape...)
	}
	return e.reshapeOp(x, shape)
}

// viewStrides is the strides that view x's elements, in order, with shape
// (as many elements), when x's own strides allow it without a copy:
// PyTorch's rule (ATen's computeStride). Each run of x's dims that are
// contiguous with one another may be split or merged; a new dim may not
// straddle two runs.
func viewStrides(x *Tensor, shape []int) ([]int64, bool) {
	_, old := x.layout()
	out := make([]int64, len(shape))
	if x.Numel() == 0 {
		return contiguousStrides(shape), true
	}
	d := len(shape) - 1
	base := old[len(old)-1]
	var have, want int64 = 1, 1
	for i := len(x.shape) - 1; i >= 0; i-- {
		have *= int64(x.shape[i])
		if i == 0 || (x.shape[i-1] != 1 && old[i-1] != have*base) {
			for d >= 0 && (want < have || shape[d] == 1) {
				out[d] = want * base
				want *= int64(shape[d])
				d--
			}
			if want != have {
				return nil, false
			}
			if i > 0 {
				base, have, want = old[i-1], 1, 1
			}
		}
	}
	return out, d == -1
}

// reshapeOp is x with a new shape as a tensor of its own, not a view of x
// (whatever x's layout): what Reshape copies into for a strided x, and
// PyTorch's _unsafe_view for results that only look like views of an
// intermediate nobody else holds. When x is an op still to be computed, in
// the same graph, the node only reinterprets its memory (ggml's reshape, no
// copy); a computed x (a leaf of the graph, in memory the graph does not
// place) is copied.
func (e *Engine) reshapeOp(x *Tensor, shape []int) (*Tensor, error) {
	// A tensor of its own stored in half precision (a bf16 product's
	// result) keeps its type: the reshape is its memory, seen anew.
	read, keep := e.input, x.base == nil && (x.dtype == ggmlcgo.BF16 || x.dtype == ggmlcgo.F16)
	if keep {
		read = e.storedInput
	}
	y, err := e.newOpReading("reshape", shape, []*Tensor{x}, read, func(c ctx, in []node) (node, error) {
		if a := in[0]; !a.Allocated() && !a.IsView() && a.IsContiguous() {
			return c.ReshapeView(a, ne4(shape))
		}
		return c.Reshape(in[0], ne4(shape))
	})
	if err != nil {
		return nil, err
	}
	if keep {
		y.dtype = x.dtype
	}
	xshape := x.shape // the tape keeps no value
	e.record(y, "reshape", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.Reshape(g, xshape...)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// View is x with a new shape, sharing x's storage; x's strides must allow
// it (PyTorch's view: contiguous, or splitting and merging only dims that
// step contiguously with one another; otherwise reshape, which copies).
func (e *Engine) View(x *Tensor, shape ...int) (*Tensor, error) {
	shape, err := inferShape("view", x, shape)
	if err != nil {
		return nil, err
	}
	strides, ok := viewStrides(x, shape)
	if !ok {
		return nil, shapeErrorf("view: the strides of a tensor of shape %s (a transpose or a narrow) cannot view it as %s; use reshape, which copies", ShapeString(x.shape), ShapeString(shape))
	}
	off, _ := x.layout()
	y := viewOf(x, shape, off, strides)
	xshape := x.shape // the tape keeps no value
	e.record(y, "reshape", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.Reshape(g, xshape...)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// Transpose swaps two dims (0-based, negative from the end): a view.
func (e *Engine) Transpose(x *Tensor, d0, d1 int) (*Tensor, error) {
	a, err := checkDim("transpose", x.shape, d0)
	if err != nil {
		return nil, err
	}
	b, err := checkDim("transpose", x.shape, d1)
	if err != nil {
		return nil, err
	}
	axes := make([]int, len(x.shape))
	for i := range axes {
		axes[i] = i
	}
	axes[a], axes[b] = b, a
	return e.permute("transpose", x, axes)
}

// Permute reorders x's dims: dim i of the result is dim axes[i] of x (0-based,
// negative from the end), as PyTorch's permute. A view.
func (e *Engine) Permute(x *Tensor, axes ...int) (*Tensor, error) {
	if len(axes) != len(x.shape) {
		return nil, shapeErrorf("permute: %d dims given for a %d-d tensor of shape %s", len(axes), len(x.shape), ShapeString(x.shape))
	}
	seen := make([]bool, len(axes))
	norm := make([]int, len(axes))
	for i, ax := range axes {
		d, err := checkDim("permute", x.shape, ax)
		if err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, argErrorf("permute: dim %d appears twice in %v", d+1, oneBased(axes))
		}
		seen[d], norm[i] = true, d
	}
	return e.permute("permute", x, norm)
}

func (e *Engine) permute(name string, x *Tensor, axes []int) (*Tensor, error) {
	off, st := x.layout()
	shape := make([]int, len(axes))
	strides := make([]int64, len(axes))
	inverse := make([]int, len(axes))
	for i, ax := range axes {
		shape[i], strides[i], inverse[ax] = x.shape[ax], st[ax], i
	}
	y := viewOf(x, shape, off, strides)
	e.record(y, name, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.permute(name, g, inverse)
		return []*Tensor{gx}, err
	})
	return y, nil
}

// oneBased prints 0-based dims or positions as a Lua user counts them.
func oneBased(v []int) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = x
		if x >= 0 {
			out[i] = x + 1
		}
	}
	return out
}

// Narrow is x's elements start..start+length-1 (0-based) along dim: a view.
func (e *Engine) Narrow(x *Tensor, dim, start, length int) (*Tensor, error) {
	d, err := checkDim("narrow", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if start < 0 || length < 0 || start > x.shape[d] || length > x.shape[d]-start {
		return nil, argErrorf("narrow: start %d and length %d are outside dim %d (size %d) of shape %s", start+1, length, d+1, x.shape[d], ShapeString(x.shape))
	}
	off, st := x.layout()
	shape := x.Shape()
	shape[d] = length
	y := viewOf(x, shape, off+int64(start)*st[d], st)
	xshape := x.shape // the tape keeps no value
	e.record(y, "narrow", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		var pad [ggmlcgo.MaxDims][2]int
		k := len(xshape) - 1 - d // the dim in ne order
		pad[k] = [2]int{start, xshape[d] - start - length}
		gx, err := e.newOp("narrow_back", xshape, []*Tensor{g}, func(c ctx, in []node) (node, error) {
			if e.backend.IsCPU() && in[0].IsContiguous() {
				return c.PadCPU(in[0], k, pad[k][0], pad[k][1])
			}
			return c.Pad(in[0], pad)
		})
		return []*Tensor{gx}, err
	})
	if y.gradFn != nil {
		y.gradFn.slice = &narrowSlice{dim: d, start: start, size: x.shape[d]}
	}
	return y, nil
}

// Contiguous is x itself, or a packed copy of a strided view.
func (e *Engine) Contiguous(x *Tensor) (*Tensor, error) {
	if x.base == nil {
		return x, nil
	}
	return e.copyOf("contiguous", x)
}

// Clone is a copy of x with its own storage, differentiable (the gradient
// passes through unchanged), as PyTorch's clone.
func (e *Engine) Clone(x *Tensor) (*Tensor, error) {
	if x.storage().dtype == ggmlcgo.I32 {
		y, err := e.cloneInt(x)
		return keepScalar(y, x), err
	}
	return e.copyOf("clone", x)
}

func (e *Engine) copyOf(name string, x *Tensor) (*Tensor, error) {
	if x.Numel() == 0 { // of the dtype a copy of x has
		return e.emptyRecorded(name, emptyTyped(x.shape, opDtype(x)), x), nil
	}
	y, err := e.newOp(name, x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) { return c.Cont(in[0]) })
	if err != nil {
		return nil, err
	}
	e.record(y, name, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) { return []*Tensor{g}, nil })
	return keepScalar(y, x), nil
}

// keepScalar marks y, a copy of x's values (clone, detach, a cast), 0-d
// where x is (Scalar), as PyTorch's copies of a 0-d tensor are 0-d.
func keepScalar(y, x *Tensor) *Tensor {
	if y != nil && x.scalar {
		y.scalar = true
	}
	return y
}

// Cat joins tensors along dim; all other dims must agree.
func (e *Engine) Cat(ts []*Tensor, dim int) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, argErrorf("cat: no tensors")
	}
	if slices.ContainsFunc(ts, func(t *Tensor) bool { return t.Numel() == 0 }) {
		return e.catEmpty(ts, dim)
	}
	d, err := checkDim("cat", ts[0].shape, dim)
	if err != nil {
		return nil, err
	}
	if len(ts) == 1 { // a new tensor, as PyTorch's cat makes: never its input
		return e.Clone(ts[0])
	}
	out := ts[0]
	for i, t := range ts[1:] {
		if t.Dim() != out.Dim() {
			return nil, shapeErrorf("cat: tensor %d has shape %s, tensor 1 has %s", i+2, ShapeString(t.shape), ShapeString(ts[0].shape))
		}
		shape := out.Shape()
		for j := range shape {
			if j != d && shape[j] != t.shape[j] {
				return nil, shapeErrorf("cat: shapes %s and %s differ outside dim %d", ShapeString(out.shape), ShapeString(t.shape), d+1)
			}
		}
		shape[d] += t.shape[d]
		a, b := out, t
		k := len(shape) - 1 - d
		flat := e.pastGPUGrid(shape)
		joined, err := e.newOp("cat", shape, []*Tensor{a, b}, func(c ctx, in []node) (node, error) {
			if flat {
				return concatRows(c, in[0], in[1], k, ne4(shape))
			}
			return c.Concat(in[0], in[1], k)
		})
		if err != nil {
			return nil, err
		}
		na, nb := a.shape[d], b.shape[d] // the tape keeps no value
		e.record(joined, "cat", []*Tensor{a, b}, func(g *Tensor) ([]*Tensor, error) {
			ga, err := e.Narrow(g, d, 0, na)
			if err != nil {
				return nil, err
			}
			gb, err := e.Narrow(g, d, na, nb)
			return []*Tensor{ga, gb}, err
		})
		out = joined
	}
	return out, nil
}

// concatRows is concat along ggml dim k for a result (ne out) whose dims
// ggml-cuda's concat would launch past the grid limit: every dim inside k
// merged with k makes a and b rows of one length each, joined along dim 0
// (the kernel's unbounded grid dimension), the rows themselves laid out by
// gridLayout so that ne1 and ne2 fit. The memory order is concat's.
func concatRows(c ctx, a, b node, k int, out [ggmlcgo.MaxDims]int64) (node, error) {
	inner, outer := int64(1), int64(1)
	for i := range k {
		inner *= out[i]
	}
	for i := k + 1; i < ggmlcgo.MaxDims; i++ {
		outer *= out[i]
	}
	l := gridLayout(outer)
	ra, err := c.Reshape(a, [ggmlcgo.MaxDims]int64{inner * a.Ne()[k], l[0], l[1], l[2]})
	if err != nil {
		return node{}, err
	}
	rb, err := c.Reshape(b, [ggmlcgo.MaxDims]int64{inner * b.Ne()[k], l[0], l[1], l[2]})
	if err != nil {
		return node{}, err
	}
	j, err := c.Concat(ra, rb, 0)
	if err != nil {
		return node{}, err
	}
	return c.Reshape(j, out)
}

// pastGPUGrid reports whether, on a GPU backend, ggml-cuda's concat would
// launch a result of shape with a grid dimension past CUDA's limit (ne1,
// ne2 above 65535): the launch fails and ggml aborts the process.
// forceConcatRows makes tests take cat's other layout on the CPU.
func (e *Engine) pastGPUGrid(shape []int) bool {
	ne := ne4(shape)
	return forceConcatRows || (!e.backend.IsCPU() && (ne[1] > cudaGridLimit || ne[2] > cudaGridLimit))
}

var forceConcatRows = false

// rowsBack is ggml's get_rows_back: a [rows, cols] tensor of zeros with
// row i of g [n, cols] added to row idx[i] (it is idx uploaded). ggml-cuda
// launches it with a grid row per output row, at most 65535: on a GPU a
// larger output is built in blocks of rows, each from the indices shifted
// by the block's start (its kernel skips the rows an index does not name),
// joined along a third dim and cut to size.
func (e *Engine) rowsBack(name string, g *Tensor, idx []int, it *Tensor, rows int) (*Tensor, error) {
	cols := g.shape[1]
	if !e.backend.IsCPU() || forcePickRowsBack {
		if len(idx) > 0 && distinctRows(idx, rows) {
			return e.pickRowsBack(name, g, it, rows)
		}
	}
	if (!e.backend.IsCPU() || forceOneHotRowsBack) && int64(rows)*int64(len(idx)) <= oneHotRowsBackLimit {
		return e.oneHotRowsBack(name, g, idx, rows)
	}
	if e.backend.IsCPU() || rows <= cudaGridLimit {
		shape := []int{rows, cols}
		return e.newOp(name, shape, []*Tensor{g, it}, func(c ctx, in []node) (node, error) {
			like, err := template(c, shape)
			if err != nil {
				return node{}, err
			}
			return c.GetRowsBack(in[0], in[1], like)
		})
	}
	k := (rows + cudaGridLimit - 1) / cudaGridLimit
	b := (rows + k - 1) / k
	inputs := []*Tensor{g}
	for j := range k {
		shifted := make([]int, len(idx))
		for i, v := range idx {
			shifted[i] = v - j*b
		}
		t, err := e.uploadInts(shifted)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, t)
	}
	full, err := e.newOp(name, []int{k * b, cols}, inputs, func(c ctx, in []node) (node, error) {
		like, err := template(c, []int{b, cols})
		if err != nil {
			return node{}, err
		}
		var out node
		for j := range k {
			part, err := c.GetRowsBack(in[0], in[1+j], like)
			if err == nil {
				part, err = c.Reshape(part, [ggmlcgo.MaxDims]int64{int64(cols), int64(b), 1, 1})
			}
			if err == nil && j > 0 {
				part, err = c.Concat(out, part, 2)
			}
			if err != nil {
				return node{}, err
			}
			out = part
		}
		return c.Reshape(out, ne4([]int{k * b, cols}))
	})
	if err != nil {
		return nil, err
	}
	cut, err := e.Narrow(full, 0, 0, rows)
	if err != nil {
		return nil, err
	}
	return e.Contiguous(cut)
}

// distinctRows reports whether the indices idx (each in [0, rows): its
// callers check the range first) are all different. Increasing indices
// (cross_entropy's picks, i*classes + label_i, rows a million for a GPT's
// batch) are, without a set of rows to clear every step.
func distinctRows(idx []int, rows int) bool {
	increasing := true
	for i := 1; i < len(idx) && increasing; i++ {
		increasing = idx[i] > idx[i-1]
	}
	if increasing {
		return true
	}
	seen := make([]uint64, (rows+63)/64)
	for _, r := range idx {
		if seen[r/64]&(1<<(r%64)) != 0 {
			return false
		}
		seen[r/64] |= 1 << (r % 64)
	}
	return true
}

// pickRowsBack is rowsBack for indices that are all different (it is idx
// uploaded): zeros with g's rows written over them by ggml's set_rows, a
// thread per element of g. ggml-cuda's get_rows_back loops over every index
// for every output row (rows × indices: 10 ms a step for a batch of 8192
// labels on the H200); a get_rows through the inverse indices launched a
// block per output row (2.2 ms for cross_entropy's 16384 x 65
// log-probabilities, whose rows are single elements).
func (e *Engine) pickRowsBack(name string, g, it *Tensor, rows int) (*Tensor, error) {
	cols := g.shape[1]
	return e.newOp(name, []int{rows, cols}, []*Tensor{g, it}, func(c ctx, in []node) (node, error) {
		// The zeros are made on the device (g's first element, filled and
		// repeated), so a step uploads only the indices.
		one, err := c.View(in[0], [ggmlcgo.MaxDims]int64{1, 1, 1, 1}, [3]int64{4, 4, 4}, 0)
		if err == nil {
			one, err = c.Fill(one, 0)
		}
		var zeros node
		if err == nil {
			zeros, err = c.Repeat(one, ne4([]int{rows, cols}))
		}
		if err != nil {
			return node{}, err
		}
		return c.SetRows(zeros, in[0], in[1])
	})
}

// oneHotRowsBack is rowsBack for repeated indices (an embedding's
// gradient: every token adds its row) as one GEMM, out_prod(g, onehot),
// with the one-hot [n, rows] made on the device from the indices as f32
// (|index - r| stepped). ggml-cuda's get_rows_back walks every index for
// every output element. Like every f32 GEMM on CUDA it runs in TF32.
// cuBLAS crawls on leading dims that are not multiples of 4 floats (a
// 65-symbol vocabulary), so the one-hot has rows rounded up to 4, the
// extra ones matching no index, and the result is the first rows of the
// product (a contiguous view: its rows are the outer dim).
func (e *Engine) oneHotRowsBack(name string, g *Tensor, idx []int, rows int) (*Tensor, error) {
	n, cols := len(idx), g.shape[1]
	padded := (rows + 3) / 4 * 4
	at := make([]float32, n)
	for i, r := range idx {
		at[i] = float32(r) // exact: rows*n is bounded far below 2^24 squared
	}
	idxF, err := FromFloat32(at, n)
	if err != nil {
		return nil, err
	}
	return e.newOp(name, []int{rows, cols}, []*Tensor{g, idxF}, func(c ctx, in []node) (node, error) {
		b := e.nodes(c)
		col := b.reshape(in[1], [4]int64{1, int64(n), 1, 1})
		ramp := b.set(c.Arange(0, float32(padded), 1)) // ne (padded)
		ramp = b.reshape(ramp, [4]int64{int64(padded), 1, 1, 1})
		grid := b.repeat(ramp, [4]int64{int64(padded), int64(n), 1, 1})
		diff := b.unary("abs", b.sub(grid, col))            // ne (padded, n): |r - idx[i]|
		onehot := b.scaleBias(b.unary("step", diff), -1, 1) // 1 where r == idx[i]
		if b.err != nil {
			return node{}, b.err
		}
		x, err := e.packed(c, in[0])
		if err != nil {
			return node{}, err
		}
		s, err := c.OutProd(x, onehot, false) // ne (cols, padded): Σ_i g[i, :] ⊗ onehot[i, :]
		if err != nil || padded == rows {
			return s, err
		}
		c4 := int64(4 * cols)
		return c.View(s, [4]int64{int64(cols), int64(rows), 1, 1}, [3]int64{c4, c4 * int64(rows), c4 * int64(rows)}, 0)
	})
}

// oneHotRowsBackLimit bounds the one-hot's elements (128 MiB of f32): a
// vocabulary of 50k over 16k tokens stays on get_rows_back.
const oneHotRowsBackLimit = 1 << 25

// forceOneHotRowsBack makes tests take the GPU's oneHotRowsBack on the CPU.
var forceOneHotRowsBack = false

// forcePickRowsBack makes tests take the GPU's pickRowsBack on the CPU.
var forcePickRowsBack = false

// uploadInts puts 0-based indices on the device (pass pool) as i32.
func (e *Engine) uploadInts(idx []int) (*Tensor, error) {
	h, err := e.res.Upload(residency.Request{Shape: []int{len(idx)}, Type: ggmlcgo.I32}, encodeInts(idx))
	if err != nil {
		return nil, err
	}
	return &Tensor{shape: []int{len(idx)}, dtype: ggmlcgo.I32, handle: h, engine: e, indices: true}, nil
}

// IndexSelect picks x's slices along dim (0-based, any rank) by 0-based
// indices, in their order, repeats allowed; a copy. Its gradient adds each
// picked slice's gradient back. Along dim 0 of a 2-d x it is one row
// lookup (an embedding); otherwise dim moves to the front, the rest is
// flattened into rows, and the result moves back.
func (e *Engine) IndexSelect(x *Tensor, dim int, idx []int) (*Tensor, error) {
	d, err := checkDim("index_select", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if len(idx) == 0 { // nothing picked: empty (and x's gradient zeros, gradFn.call's)
		shape := x.Shape()
		shape[d] = 0
		return e.emptyRecorded("index_select", emptyTyped(shape, opDtype(x)), x), nil
	}
	for i, v := range idx {
		if v < 0 || v >= x.shape[d] {
			return nil, argErrorf("index_select: index %d (position %d) is out of range for dim %d of size %d", v+1, i+1, d+1, x.shape[d])
		}
	}
	if x.storage().dtype == ggmlcgo.I32 {
		return e.intIndexSelect(x, d, idx)
	}
	if x.Dim() == 2 && d == 0 {
		return e.indexRows(x, idx)
	}
	axes := make([]int, 0, x.Dim()) // dim d first, the others in order
	axes = append(axes, d)
	for i := range x.shape {
		if i != d {
			axes = append(axes, i)
		}
	}
	var c chain
	front := c.do(func() (*Tensor, error) { return e.permute("index_select", x, axes) })
	rows := c.do(func() (*Tensor, error) { return e.Reshape(front, x.shape[d], int(x.Numel())/x.shape[d]) })
	picked := c.do(func() (*Tensor, error) { return e.indexRows(rows, idx) })
	shape := make([]int, len(axes))
	for i, ax := range axes {
		shape[i] = x.shape[ax]
	}
	shape[0] = len(idx)
	back := c.do(func() (*Tensor, error) { return e.Reshape(picked, shape...) })
	inverse := make([]int, len(axes))
	for i, ax := range axes {
		inverse[ax] = i
	}
	out := c.do(func() (*Tensor, error) { return e.permute("index_select", back, inverse) })
	if c.err != nil {
		return nil, c.err
	}
	return e.Contiguous(out)
}

// indexRows picks rows of a 2-d x by checked 0-based indices (ggml's
// get_rows, and get_rows_back for the gradient).
func (e *Engine) indexRows(x *Tensor, idx []int) (*Tensor, error) {
	if len(idx) == 0 { // no rows picked (empty.go)
		return e.emptyOf("get_rows", []int{0, x.shape[x.Dim()-1]}, x), nil
	}
	it, err := e.uploadInts(idx)
	if err != nil {
		return nil, err
	}
	read := e.input
	if x.IsQuantized() && e.readsQuantized("get_rows", x.storage().dtype) {
		read = weightAsStored(x, read) // get_rows dequantizes the rows it picks
	}
	y, err := e.newOpReading("index_select", []int{len(idx), x.shape[1]}, []*Tensor{x, it}, read, func(c ctx, in []node) (node, error) {
		return c.GetRows(in[0], in[1])
	})
	if err != nil {
		return nil, err
	}
	rows := x.shape[0] // the tape keeps no value
	e.record(y, "index_select", []*Tensor{x, it}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.rowsBack("index_select_back", g, idx, it, rows)
		return []*Tensor{gx, nil}, err
	})
	return y, nil
}

// To is x stored as dtype (f32, f16 or bf16): x itself when it already is,
// else a copy whose values are rounded to dtype (PyTorch's .to(dtype),
// .half(), .bfloat16(), .float()). Ops compute on half-precision storage
// in f32 (see input); the gradient passes back unchanged, in f32, as
// PyTorch's does.
func (e *Engine) To(x *Tensor, dtype ggmlcgo.Type) (*Tensor, error) {
	if dtype == ggmlcgo.I32 {
		y, err := e.ToInt(x)
		return keepScalar(y, x), err
	}
	if x.storage().dtype == ggmlcgo.I32 {
		y, err := e.intToFloat(x, dtype)
		return keepScalar(y, x), err
	}
	switch dtype {
	case ggmlcgo.F32, ggmlcgo.F16, ggmlcgo.BF16:
	default:
		return nil, argErrorf("to: dtype %s is not one a tensor computes with here (f32, f16, bf16)", dtype)
	}
	if x.dtype == dtype {
		return x, nil
	}
	y, err := e.newOp("to_"+dtype.String(), x.shape, []*Tensor{x}, func(c ctx, in []node) (node, error) {
		if dtype == ggmlcgo.F32 {
			return c.Cont(in[0]) // input has cast x's half storage to f32 already
		}
		return c.Cast(in[0], dtype)
	})
	if err != nil {
		return nil, err
	}
	y.dtype = dtype
	e.record(y, "to", []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) { return []*Tensor{g}, nil })
	return keepScalar(y, x), nil
}
