package core

import (
	"errors"
	"fmt"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// gradFn is a recorded op: its inputs and how to turn the gradient of its
// output into theirs (nil where an input gets none).
type gradFn struct {
	name     string
	inputs   []*Tensor
	versions []int64 // each input's storage version when the op read it
	backward func(g *Tensor) ([]*Tensor, error)
	// roundsGrad: backward rounds g to bf16 before it reads it (autocast's
	// gemm), so the op that makes g may hand it over rounded.
	roundsGrad bool
	// released: a Backward went through it and let go of its inputs and
	// closure, so that the values they held can be freed (release).
	released bool
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
	if savesNothing[f.name] {
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
	"contiguous": true, "clone": true,
	"bias_relu": true, // reads its own result, which the tape keeps from in-place changes
}

// checkVersions refuses a gradient whose inputs were changed in place after
// the op read them: the values it would use are gone.
func (f *gradFn) checkVersions() error {
	if savesNothing[f.name] {
		return nil
	}
	for i, in := range f.inputs {
		if v := in.storage().version; v != f.versions[i] {
			return fmt.Errorf("backward: input %d of %s (shape %s) was changed in place after the forward used it (version %d, the tape saved version %d); change it after backward, or use an out-of-place op",
				i+1, f.name, ShapeString(in.shape), v, f.versions[i])
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
	if !e.recording() {
		return
	}
	for _, in := range inputs {
		if in.requiresGrad {
			versions := make([]int64, len(inputs))
			for i, t := range inputs {
				versions[i] = t.storage().version
			}
			out.requiresGrad = true
			out.gradFn = &gradFn{name: name, inputs: inputs, versions: versions, backward: backward}
			return
		}
	}
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
	order := topoOrder(loss)
	seed, err := e.fillLike(loss, 1)
	if err != nil {
		return nil, fmt.Errorf("backward: %w", err)
	}
	grads := map[*Tensor]*Tensor{loss: seed}
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
	var leaves []*Tensor
	for i := len(order) - 1; i >= 0; i-- {
		t := order[i]
		g := grads[t]
		if g == nil {
			continue
		}
		if t.gradFn == nil {
			// Reverse topological order: every op that read t came
			// before, so g is final.
			leaves = append(leaves, t)
			if sums != nil {
				if err := sums.final(t, g); err != nil {
					return nil, fmt.Errorf("backward: %w", err)
				}
			}
			continue
		}
		if t.gradFn.released {
			return nil, errReleased
		}
		if err := t.gradFn.checkVersions(); err != nil {
			return nil, err
		}
		ins, err := t.gradFn.backward(g)
		if err != nil {
			return nil, fmt.Errorf("backward through %s: %w", t.gradFn.name, err)
		}
		for j, in := range t.gradFn.inputs {
			if j >= len(ins) || ins[j] == nil || !in.requiresGrad {
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
	for _, leaf := range leaves {
		if sums != nil && sums.has(leaf) {
			continue // its .grad is the average (sums.finish)
		}
		if err := e.accumulateGrad(leaf, grads[leaf]); err != nil {
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
	for _, t := range order {
		if t.gradFn != nil {
			t.gradFn.release()
		}
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

// topoOrder lists the tensors loss depends on, each after its inputs.
func topoOrder(loss *Tensor) []*Tensor {
	var order []*Tensor
	seen := map[*Tensor]bool{}
	type frame struct {
		t    *Tensor
		next int
	}
	stack := []frame{{t: loss}}
	seen[loss] = true
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.t.gradFn != nil && f.next < len(f.t.gradFn.inputs) {
			in := f.t.gradFn.inputs[f.next]
			f.next++
			if in.requiresGrad && !seen[in] {
				seen[in] = true
				stack = append(stack, frame{t: in})
			}
			continue
		}
		order = append(order, f.t)
		stack = stack[:len(stack)-1]
	}
	return order
}

// accumulateGrad adds g to leaf.grad. A parameter's gradient has a
// persistent buffer, allocated once and written in place every step (a host
// parameter's too: it outlives the pass reset, as PyTorch accumulates
// gradients over backward calls).
func (e *Engine) accumulateGrad(leaf, g *Tensor) error {
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
