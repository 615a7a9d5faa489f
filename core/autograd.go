package core

import (
	"errors"
	"fmt"
	"slices"
	"weak"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// gradFn is a recorded op: its inputs' places in the tape and how to turn
// the gradient of its output into theirs (nil where an input gets none).
// The tape holds no input's value: only what backward's closure captured
// is kept for it, so the activations nothing will read again (a product's
// f32 input under autocast, a residual sum's operands) can be freed once
// the forward has run (pass_memory.go's dropUnreachable), as PyTorch keeps
// only the tensors an op saved.
type gradFn struct {
	name string
	// inputs are where each input's gradient goes: its own gradFn, or a
	// leaf's (leaf set, the tensor whose .grad it is); nil where the input
	// needs none.
	inputs []*gradFn
	leaf   *Tensor
	// versions: each input's storage, held weakly, and its version when
	// the op read it. An input still alive at backward may have been
	// changed in place (one that is gone was not, and its closure never
	// reads it).
	versions []readVersion
	backward func(g *Tensor) ([]*Tensor, error)
	shapes   [][]int // the inputs' shapes (call)
	// roundsGrad: backward rounds g to bf16 before it reads it (autocast's
	// gemm), so the op that makes g may hand it over rounded.
	roundsGrad bool
	// released: a Backward went through it and let go of its inputs and
	// closure, so that the values they held can be freed (release).
	released bool
	// slice: the op is a narrow of its input along dim from start, whose
	// gradient Backward joins with its siblings' (joinSlices).
	slice *narrowSlice
}

// readVersion is an input's storage (held weakly) and its version when an
// op read it.
type readVersion struct {
	storage weak.Pointer[Tensor]
	version int64
	shape   []int
}

// narrowSlice is where a narrow view lies in its input: along dim from
// start, of a dim of size.
type narrowSlice struct{ dim, start, size int }

// tapeNode is where t's gradient goes: its gradFn, or for a leaf that
// requires grad, a gradFn of its own that holds it.
func (t *Tensor) tapeNode() *gradFn {
	switch {
	case !t.requiresGrad:
		return nil
	case t.gradFn != nil:
		return t.gradFn
	case t.accumulate == nil:
		t.accumulate = &gradFn{name: "leaf", leaf: t}
	}
	return t.accumulate
}

// errReleased is PyTorch's refusal of a second backward through a graph
// (gglua has no retain_graph: a graph's saved values go with its backward).
var errReleased = errors.New("backward: trying to backward through the graph a second time: a backward already went through an op of it and freed the values that op saved (compute the forward again)")

// release lets go of what f holds for its backward once a Backward used it,
// as PyTorch frees a graph's saved tensors: nothing keeps an activation
// alive but a script's own variables, so that Realize can give its memory
// to other nodes (dropUnreachable). An op that saves nothing (add,
// transpose: savesNothing) keeps its inputs, and a later backward may go
// through it again, as in PyTorch (a transposed weight shared by two
// micro-batches' losses).
func (f *gradFn) release() {
	if savesNothing[f.name] || f.leaf != nil {
		return
	}
	f.inputs, f.versions, f.backward, f.released = nil, nil, nil, true
}

// savesNothing names the ops whose gradients do not read their inputs'
// values, so an in-place change of an input after the forward cannot make
// their gradients wrong (PyTorch does not save those inputs either).
var savesNothing = map[string]bool{
	"add": true, "sub": true, "scale": true, "sum": true, "sum_to": true, "expand": true,
	"reshape": true, "transpose": true, "permute": true, "narrow": true, "cat": true,
	"contiguous": true, "clone": true, "rope": true,
	"bias_relu": true, // reads its own result, which the tape keeps from in-place changes
}

// checkVersions refuses a gradient whose inputs were changed in place after
// the op read them: the values it would use are gone.
func (f *gradFn) checkVersions() error {
	for i, r := range f.versions {
		if st := r.storage.Value(); st != nil && st.version != r.version {
			return fmt.Errorf("backward: input %d of %s (shape %s) was changed in place after the forward used it (version %d, the tape saved version %d); change it after backward, or use an out-of-place op",
				i+1, f.name, ShapeString(r.shape), st.version, r.version)
		}
	}
	return nil
}

type tape struct {
	active bool
	noGrad int
}

func (e *Engine) recording() bool { return e.tape.active && e.tape.noGrad == 0 }

// record attaches a gradFn to out when the tape is on and an input needs
// a gradient. Outside a tape nothing is recorded.
func (e *Engine) record(out *Tensor, name string, inputs []*Tensor, backward func(g *Tensor) ([]*Tensor, error)) {
	if !e.recording() || !slices.ContainsFunc(inputs, func(in *Tensor) bool { return in.requiresGrad }) {
		return
	}
	f := &gradFn{name: name, inputs: make([]*gradFn, len(inputs)), backward: backward, shapes: make([][]int, len(inputs))}
	for i, in := range inputs {
		f.inputs[i], f.shapes[i] = in.tapeNode(), in.shape
	}
	if !savesNothing[name] {
		f.versions = make([]readVersion, len(inputs))
		for i, in := range inputs {
			st := in.storage()
			f.versions[i] = readVersion{storage: weak.Make(st), version: st.version, shape: in.shape}
		}
	}
	out.requiresGrad, out.gradFn = true, f
}

// call is f's backward of g. An empty g (an output of no elements, which
// depends on nothing) gives each input a zero gradient, with no op of
// f's own: a narrow of length 0 gives its input zeros, as PyTorch does.
func (f *gradFn) call(g *Tensor) ([]*Tensor, error) {
	if g.Numel() > 0 {
		return f.backward(g)
	}
	ins := make([]*Tensor, len(f.shapes))
	for i, sh := range f.shapes {
		if f.inputs[i] == nil {
			continue
		}
		z, err := Zeros(sh...)
		if err != nil {
			return nil, err
		}
		ins[i] = z
	}
	return ins, nil
}

// WithGradTape runs one step's forward pass: it computes pending work,
// resets the pass pool, and records the ops fn makes.
func (e *Engine) WithGradTape(fn func() error) error {
	if e.tape.active {
		return errors.New("with_grad_tape: already inside a tape (tapes do not nest: each one resets the pass pool)")
	}
	if err := e.Reset(residency.Pass); err != nil {
		return fmt.Errorf("with_grad_tape: %w", err)
	}
	e.tape.active = true
	e.mem.tapeRan, e.mem.stepComputed = true, false
	defer func() { e.tape.active = false }()
	return fn()
}

// NoGrad runs fn without recording.
func (e *Engine) NoGrad(fn func() error) error {
	e.tape.noGrad++
	defer func() { e.tape.noGrad-- }()
	return fn()
}

// Backward computes the gradient of the one-element loss with respect to
// every leaf that requires grad, adding it to their .grad (until ZeroGrad).
// It returns the leaves it reached with their gradients. The leaves' .grad
// change only once every gradient op was built, so a failure changes none.
func (e *Engine) Backward(loss *Tensor) (_ map[*Tensor]*Tensor, err error) {
	if loss.Numel() != 1 {
		return nil, shapeErrorf("backward: the loss must have one element, got shape %s", ShapeString(loss.shape))
	}
	built := false // every gradient op was built
	if e.averages() {
		if e.dp.broken != nil {
			return nil, fmt.Errorf("backward: %w", e.dp.broken)
		}
		// The refusal above and this one come before anything is queued,
		// from what the script did alike on every process (a loss of the
		// wrong shape, a parameter unfrozen): none is out of step. A
		// failure from here on may be this process's alone (a loss that
		// reaches no parameter may be one rank's empty batch).
		if err := e.dp.unfrozen(); err != nil {
			return nil, fmt.Errorf("backward: %w", err)
		}
		defer func() {
			if !built {
				e.dp.outOfStep(err)
			}
		}()
		e.dp.unused = nil // filled by this Backward's sums (keepUnusedGrads)
	}
	if !loss.requiresGrad || loss.gradFn == nil {
		return nil, errors.New("backward: the loss does not depend on any tensor that requires grad (was the forward pass run inside with_grad_tape?)")
	}
	if loss.gradFn.released {
		return nil, errReleased
	}
	e.tape.noGrad++
	defer func() { e.tape.noGrad-- }()
	// Gradients compute in the precision their forward recorded, whatever
	// autocast is in force now (PyTorch runs backward ops in the forward's
	// types): a gradient built of ops (attention's) must not round.
	defer e.setAutocast(ggmlcgo.F32)()

	if err := e.startForward(); err != nil {
		return nil, fmt.Errorf("backward: %w", err)
	}
	e.backwarding = true
	defer func() { e.backwarding = false }()
	order := topoOrder(loss.gradFn)
	seed, err := e.fillLike(loss, 1)
	if err != nil {
		return nil, fmt.Errorf("backward: %w", err)
	}
	grads := map[*gradFn]*Tensor{loss.gradFn: seed}
	var sums *gradSums // data parallel, summing in this graph (data_parallel_sums.go)
	if e.averages() && e.dp.inGraph(e) {
		if sums, err = e.startSums(); err != nil {
			return nil, fmt.Errorf("backward: %w", err)
		}
		defer func() {
			if !built {
				sums.abandon()
			}
		}()
	}
	// The leaves in the order reached (not a map's random order): each step
	// then queues the same graph, which a GPU replays as one CUDA graph.
	// final is where each one's gradient became final in the pending list.
	var leaves []*Tensor
	var final []int
	waiting := map[*gradFn][]*gradFn{} // the narrow views of an op's result whose gradients wait for it
	for i := len(order) - 1; i >= 0; i-- {
		f := order[i]
		if views := waiting[f]; views != nil {
			if grads[f], err = e.joinSlices(f, views, grads); err != nil {
				return nil, fmt.Errorf("backward: %w", err)
			}
			delete(waiting, f)
		}
		g := grads[f]
		if g == nil {
			continue
		}
		if f.leaf != nil {
			if !f.leaf.requiresGrad {
				continue // frozen since the forward: no gradient, as PyTorch's AccumulateGrad
			}
			// Reverse topological order: every op that read the leaf
			// came before, so g is final.
			leaves = append(leaves, f.leaf)
			final = append(final, len(e.pending))
			if sums != nil {
				if err := sums.final(f.leaf, g); err != nil {
					return nil, fmt.Errorf("backward: %w", err)
				}
			}
			continue
		}
		if f.released {
			return nil, errReleased
		}
		if err := f.checkVersions(); err != nil {
			return nil, err
		}
		if f.slice != nil && f.inputs[0] != nil {
			// Every op that reads the base comes before it: its narrow
			// views' gradients are joined when its turn comes.
			waiting[f.inputs[0]] = append(waiting[f.inputs[0]], f)
			continue
		}
		ins, err := f.call(g)
		if err != nil {
			return nil, fmt.Errorf("backward through %s: %w", f.name, err)
		}
		for j, in := range f.inputs {
			if j >= len(ins) || ins[j] == nil || in == nil {
				continue
			}
			if prev := grads[in]; prev != nil {
				if ins[j], err = e.Add(prev, ins[j]); err != nil {
					return nil, fmt.Errorf("backward: %w", err)
				}
			}
			grads[in] = ins[j]
		}
	}
	// Each .grad changes only now, once every gradient op was built, but
	// its accumulation is queued where its gradient became final: the
	// graph then computes it there, and the memory of the gradient (a
	// weight's, a LayerNorm's run) goes to later nodes at once instead of
	// being held to the graph's end with every other leaf's.
	moved := 0 // places the accumulations queued so far took
	for i, leaf := range leaves {
		if sums != nil && sums.has(leaf) {
			continue // its .grad is the average (sums.finish)
		}
		before := len(e.pending)
		e.insertAt = 1 + final[i] + moved
		err := e.accumulateGrad(leaf, grads[leaf.accumulate])
		e.insertAt = 0
		moved += len(e.pending) - before
		if err != nil {
			return nil, fmt.Errorf("backward: %w", err)
		}
	}
	switch { // data parallel: every process ends with the average (data_parallel.go)
	case sums != nil:
		err = sums.finish()
	case e.averages():
		err = e.averageGrads()
	}
	if err != nil {
		return nil, fmt.Errorf("backward: %w", err)
	}
	built = true
	for _, f := range order {
		f.release()
	}
	if e.averages() {
		if err := e.keepUnusedGrads(); err != nil {
			return nil, fmt.Errorf("backward: %w", err)
		}
	}
	out := map[*Tensor]*Tensor{}
	for _, leaf := range leaves {
		out[leaf] = leaf.grad
	}
	return out, nil
}

// joinSlices is the gradient of x (an op's result: its gradFn) from those
// of its narrow views and of the other ops that read x (grads[x]). Views
// that tile one dim of x exactly (chunk's, split's) are joined with cat, as
// PyTorch's split backward: a copy of each, where padding each to x's
// shape and adding them would write x's size once a view and read it twice
// an add (a GPT layer's q, k and v: 3 pads and 2 adds of [B*T, 3d]).
// Otherwise each is padded and added, in the order the views were reached.
func (e *Engine) joinSlices(x *gradFn, views []*gradFn, grads map[*gradFn]*Tensor) (*Tensor, error) {
	sorted := slices.Clone(views)
	slices.SortStableFunc(sorted, func(a, b *gradFn) int { return a.slice.start - b.slice.start })
	if dim, ok := tiling(sorted, grads); ok && grads[x] == nil {
		gs := make([]*Tensor, len(sorted))
		for i, v := range sorted {
			gs[i] = grads[v]
		}
		if len(gs) == 1 {
			return gs[0], nil
		}
		return e.Cat(gs, dim)
	}
	sum := grads[x]
	for _, v := range views {
		ins, err := v.call(grads[v])
		if err != nil {
			return nil, fmt.Errorf("backward through %s: %w", v.name, err)
		}
		if sum != nil {
			if ins[0], err = e.Add(sum, ins[0]); err != nil {
				return nil, err
			}
		}
		sum = ins[0]
	}
	return sum, nil
}

// tiling reports the dim along which narrow views, sorted by start (their
// gradients in grads), lie side by side and cover it without overlap, if
// they do.
func tiling(sorted []*gradFn, grads map[*gradFn]*Tensor) (int, bool) {
	dim, end := sorted[0].slice.dim, 0
	for _, v := range sorted {
		if s := v.slice; s.dim != dim || s.start != end {
			return 0, false
		}
		end += grads[v].shape[dim]
	}
	return dim, end == sorted[0].slice.size
}

// topoOrder lists the ops (and leaves) loss's gradFn depends on, each after
// its inputs.
func topoOrder(loss *gradFn) []*gradFn {
	var order []*gradFn
	seen := map[*gradFn]bool{loss: true}
	type frame struct {
		f    *gradFn
		next int
	}
	stack := []frame{{f: loss}}
	for len(stack) > 0 {
		fr := &stack[len(stack)-1]
		if fr.next < len(fr.f.inputs) {
			in := fr.f.inputs[fr.next]
			fr.next++
			if in != nil && !seen[in] {
				seen[in] = true
				stack = append(stack, frame{f: in})
			}
			continue
		}
		order = append(order, fr.f)
		stack = stack[:len(stack)-1]
	}
	return order
}

// accumulateGrad adds g to leaf.grad. A parameter's gradient has a
// persistent buffer, allocated once and written in place every step (a host
// parameter's too: it outlives the pass reset, as PyTorch accumulates
// gradients over backward calls).
func (e *Engine) accumulateGrad(leaf, g *Tensor) error {
	if leaf.Numel() == 0 { // an empty gradient: nothing to add or hold
		leaf.grad, leaf.gradZero = emptyTensor(leaf.shape), false
		return nil
	}
	g, err := e.Contiguous(g) // a gradient owns its storage
	if err != nil {
		return err
	}
	old := leaf.grad
	if old != nil && old.storage().handle != nil && !old.storage().handle.Live() {
		old = nil // gone with a reset of its pool: absent, as after zero_grad
	}
	if old != nil && !leaf.gradZero {
		if g, err = e.Add(old, g); err != nil {
			return err
		}
	}
	// A host parameter's gradient is a new tensor after zero_grad, as
	// PyTorch's set_to_none makes it (whoever holds the old one keeps its
	// values); a persistent parameter's buffer is reused. A gradient moved
	// to the host (to_gpu's pass scope) or made on another device gets a
	// buffer here too.
	persistent := leaf.persistent()
	reuse := old != nil && (persistent || (!leaf.gradZero && old.persistent() && old.engine == e))
	if !reuse {
		h, err := e.res.Alloc(residency.Request{Shape: leaf.shape, Scope: residency.Persistent, Alone: !persistent})
		if err != nil {
			return err
		}
		leaf.grad = &Tensor{shape: leaf.Shape(), dtype: h.Type(), handle: h, engine: e}
		if !persistent {
			e.keep(leaf.grad) // kept through a reset of the persistent pool, as the parameter is
		}
	}
	if err := e.writeInPlace(leaf.grad, g); err != nil {
		leaf.grad = old
		return err
	}
	leaf.gradZero = false
	return nil
}

// ZeroGrad clears the gradients of params: the next backward sets them
// instead of adding. Persistent gradient buffers are kept for reuse.
func ZeroGrad(params []*Tensor) {
	for _, p := range params {
		p.gradZero = true
	}
}

// ZeroGradToZeros is torch's zero_grad(set_to_none=False): every gradient
// that exists becomes zeros, in place (whoever holds it sees the zeros),
// and one that does not stays absent. An optimizer then steps a parameter
// whose gradient is zeros (Adam's moments decay, weight decay applies),
// where it skips one without a gradient.
func ZeroGradToZeros(params []*Tensor) error {
	for _, p := range params {
		g := p.Grad()
		if g == nil {
			continue
		}
		if g.base == nil && g.host != nil && !g.pending { // a host gradient: its storage
			clear(g.host)
			g.version++
			continue
		}
		e := g.engine
		if e != nil && g.handle == nil && g.pending { // a pending result has its buffer once computed
			if err := e.Realize(); err != nil {
				return fmt.Errorf("zero_grad: %w", err)
			}
		}
		if e == nil || g.handle == nil {
			return fmt.Errorf("zero_grad: the gradient of a parameter of shape %s is neither on the host nor placed", ShapeString(p.shape))
		}
		z, err := e.fillLike(g, 0)
		if err == nil {
			err = e.writeInPlace(g, z)
		}
		if err != nil {
			return fmt.Errorf("zero_grad: %w", err)
		}
	}
	return nil
}
