package core

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Ops (ops_*.go) build their nodes from these: a ggml context of the
// current pass and the nodes of their inputs.
type (
	ctx  = *ggmlcgo.Context
	node = ggmlcgo.Tensor
)

// Stats are the engine's counters, read by tests and benchmarks.
type Stats struct {
	GraphComputes int64         // Realize calls that computed a graph
	NodesComputed int64         // graph nodes computed, summed
	PassBytes     int64         // bytes of node results placed in the pass pool by Realize, summed
	GraphReplays  int64         // of the computes, those replayed as a captured CUDA graph (devices)
	ComputeTime   time.Duration // wall time launching graph computes and waiting for them, summed
	ReduceTime    time.Duration // wall time in data parallelism's gradient collectives, summed
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	st := e.stats
	st.GraphReplays = e.backend.Replays().Replayed
	st.ComputeTime += e.backend.WaitTime() // a device's graphs run on after their launch
	return st
}

// SetEager makes every op compute at once (GGLUA_EAGER=1 does too).
func (e *Engine) SetEager(on bool) { e.eager = on }

const nodeCtxTensors = 4096 // op-node slots of one metadata context

// maxPending is the most ops left pending before they are computed anyway.
const maxPending = 1 << 16

// opNodeRoom is the room an op's node context has at least: the largest
// op built as one (max along a dim, about 30 nodes) fits with a margin.
const opNodeRoom = 64

// nodeContext returns a context with room for an op of up to opNodeRoom
// nodes.
func (e *Engine) nodeContext() (*ggmlcgo.Context, error) {
	if n := len(e.nodeCtxs); n > 0 && e.nodeCtxs[n-1].Room() >= opNodeRoom {
		return e.nodeCtxs[n-1], nil
	}
	c, err := ggmlcgo.NewContext(nodeCtxTensors, 0)
	if err != nil {
		return nil, err
	}
	e.nodeCtxs = append(e.nodeCtxs, c)
	return c, nil
}

func (e *Engine) freeNodeContexts() {
	for _, c := range e.nodeCtxs {
		c.Free()
	}
	e.nodeCtxs = nil
}

func (e *Engine) upload(data []float32, shape []int, dtype ggmlcgo.Type, scope residency.Scope) (*residency.Handle, error) {
	raw, err := encode(dtype, data)
	if err != nil {
		return nil, err
	}
	return e.res.Upload(residency.Request{Shape: shape, Type: dtype, Scope: scope}, raw)
}

// input is the ggml tensor through which an op reads t, in f32: ops
// compute on half-precision and quantized storage in f32. A host tensor is uploaded into
// the pass pool, once per pass.
func (e *Engine) input(t *Tensor) (ggmlcgo.Tensor, error) {
	n, err := e.storedInput(t)
	if err != nil || (n.Type() != ggmlcgo.F16 && n.Type() != ggmlcgo.BF16 && !n.Type().Quantized()) {
		return n, err
	}
	c, err := e.nodeContext()
	if err != nil {
		return n, err
	}
	if n.Type().Quantized() {
		return e.toF32(c, n)
	}
	return c.Cast(n, ggmlcgo.F32)
}

// storedInput is input with t's values in the type t stores them in: a
// packed bf16 view's too (packedBF16View: attention's output that a
// projection reads), any other view's in f32.
func (e *Engine) storedInput(t *Tensor) (ggmlcgo.Tensor, error) {
	if t.Numel() == 0 {
		return ggmlcgo.Tensor{}, errEmptyInput(t)
	}
	st := t.storage()
	if st.dtype == ggmlcgo.I32 && !st.indices {
		return ggmlcgo.Tensor{}, errIntOperand(t)
	}
	if t.base != nil {
		if packedBF16View(t) {
			return e.rowsRead(t, e.storedInput)
		}
		return e.viewInput(t)
	}
	if t.host != nil {
		return e.passCopy(t, ggmlcgo.F32, func() ([]byte, error) { return encode(ggmlcgo.F32, t.host) })
	}
	if t.dropped {
		return ggmlcgo.Tensor{}, errDropped
	}
	if t.freed {
		return ggmlcgo.Tensor{}, errFreed
	}
	if t.engine != e {
		return ggmlcgo.Tensor{}, fmt.Errorf("tensor of shape %s belongs to another runtime or device", ShapeString(t.shape))
	}
	var n ggmlcgo.Tensor
	var err error
	switch {
	case t.pending:
		if t.passGen != e.res.Gen(residency.Pass) {
			return n, fmt.Errorf("%w: its pending value was dropped by a reset of the pass pool", residency.ErrStale)
		}
		n = t.node
	default:
		n, err = t.handle.Tensor()
	}
	return n, err
}

// packedBF16View reports whether t is a view of bf16 storage that a
// product reads where it lies: a packed run of its base's elements that
// starts a multiple of 256 bytes into it, so no less aligned than the base
// itself (ggml-cuda places tensors 128 bytes apart; cuBLASLt's products
// read such operands today).
func packedBF16View(t *Tensor) bool {
	return t.base != nil && t.storage().dtype == ggmlcgo.BF16 && t.offset%128 == 0 && t.contiguous() && readsRowsInPlace(t)
}

// passCopy is t's upload into the current pass, made from raw (bytes of
// type typ) the first time the pass needs it, and again after t changed.
// The cache is the engine's: one host tensor may feed several runtimes.
func (e *Engine) passCopy(t *Tensor, typ ggmlcgo.Type, raw func() ([]byte, error)) (ggmlcgo.Tensor, error) {
	up, ok := e.uploads[t]
	if !ok || !up.h.Live() || up.version != t.version {
		b, err := raw()
		if err != nil {
			return ggmlcgo.Tensor{}, err
		}
		h, err := e.res.Upload(residency.Request{Shape: t.shape, Type: typ}, b)
		if err != nil {
			return ggmlcgo.Tensor{}, err
		}
		if e.uploads == nil {
			e.uploads = map[*Tensor]upload{}
		}
		up = upload{h, t.version}
		e.uploads[t] = up
	}
	return up.h.Tensor()
}

// upload is a host tensor's copy in the current pass, as of a version.
type upload struct {
	h       *residency.Handle
	version int64
}

// newOp adds an op: it reads inputs, lets build describe the output node(s)
// and returns the pending result of the given shape.
func (e *Engine) newOp(name string, shape []int, inputs []*Tensor, build func(c *ggmlcgo.Context, in []ggmlcgo.Tensor) (ggmlcgo.Tensor, error)) (*Tensor, error) {
	return e.newOpReading(name, shape, inputs, e.input, build)
}

// newOpReading is newOp with the inputs' nodes made by read (e.input, or
// rowsInput for ops that take strided rows).
func (e *Engine) newOpReading(name string, shape []int, inputs []*Tensor, read func(*Tensor) (ggmlcgo.Tensor, error), build func(c *ggmlcgo.Context, in []ggmlcgo.Tensor) (ggmlcgo.Tensor, error)) (*Tensor, error) {
	if numel(shape) == 0 { // nothing to compute (empty.go)
		return emptyTensor(shape), nil
	}
	ins := make([]ggmlcgo.Tensor, len(inputs))
	for i, t := range inputs {
		x, err := read(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ins[i] = x
	}
	c, err := e.nodeContext()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	node, err := build(c, ins)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := &Tensor{shape: append([]int(nil), shape...), dtype: ggmlcgo.F32, engine: e,
		node: node, pending: true, passGen: e.res.Gen(residency.Pass), inTape: e.tape.active, scratch: e.backwarding}
	e.queue(out)
	e.pendingBytes += 4 * out.Numel()
	// A script that builds without ever reading (x = x + 1 forever) would
	// grow the graph without bound: past maxPending ops (or, outside a tape,
	// past the pass pool's bound) it is computed, and its results are held
	// (and budgeted) in the pass pool.
	// Not inside a backward that sums in its graph (data_parallel_sums.go):
	// its gradients' slices and sums must run in one graph, in order.
	if (e.eager || len(e.pending) >= maxPending || (e.beyondStep() && e.pendingBytes > e.passBound())) && !e.summing() {
		if err := e.Realize(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, nil
}

// writeInPlace makes dst (a placed device tensor) take the value of src when
// pending work is computed: dst's memory is updated, no new buffer is made.
// Optimizers update persistent weights this way.
func (e *Engine) writeInPlace(dst, src *Tensor) error {
	return e.inPlace(dst, []*Tensor{src}, func(c ctx, base node, in []node) (node, error) { return c.Cpy(in[0], base) })
}

// inPlace queues build, an op that writes into dst's own memory (base is
// dst's tensor, or its queued update to chain after) reading inputs.
func (e *Engine) inPlace(dst *Tensor, inputs []*Tensor, build func(c ctx, base node, in []node) (node, error)) error {
	if dst.Numel() == 0 { // nothing to write
		return nil
	}
	if dst.handle == nil || dst.engine != e {
		return fmt.Errorf("in-place update of a tensor that is not placed on this device")
	}
	ins := make([]node, len(inputs))
	for i, t := range inputs {
		n, err := e.input(t)
		if err != nil {
			return err
		}
		ins[i] = n
	}
	base, err := dst.handle.Tensor()
	if err != nil {
		return err
	}
	if dst.pending { // an update already queued: chain after it
		base = dst.node
	}
	c, err := e.nodeContext()
	if err != nil {
		return err
	}
	n, err := build(c, base, ins)
	if err != nil {
		return err
	}
	// The update is queued last: a graph computes the pending results in
	// their order, so every op queued since, which may read dst's previous
	// value (the same memory), runs before the update overwrites it. An
	// update queued before stays where it was (holdAt): what it reads (a
	// gradient Backward made, summed into a .grad) is then freed there,
	// not kept to the end of the graph with the chain of later updates.
	if dst.pending && e.pending[dst.queued] == dst {
		e.holdAt(dst, dst.queued)
	}
	e.queue(dst)
	dst.node, dst.pending, dst.passGen = n, true, e.res.Gen(residency.Pass)
	dst.version++
	return nil
}

// queue puts t in the pending list: last, or where insertAt says (Backward
// queues a leaf's accumulation where its gradient became final), the work
// after it moving up a place.
func (e *Engine) queue(t *Tensor) {
	at := e.insertAt - 1
	if at < 0 || at >= len(e.pending) {
		t.queued = len(e.pending)
		e.pending = append(e.pending, t)
		return
	}
	e.pending = slices.Insert(e.pending, at, t)
	for i, p := range e.pending[at:] {
		if p != nil {
			p.queued = at + i
		}
	}
	e.insertAt++
}

// holdAt queues a second root for pending t's current node at queue place
// at (len(e.pending): last), so that the graph computes that node there
// even after t's own place moves on (an in-place update of t re-queues t
// last, and the node it chains after would otherwise go with it or, where
// nothing reads it, not be computed at all).
func (e *Engine) holdAt(t *Tensor, at int) *Tensor {
	h := &Tensor{shape: t.shape, dtype: t.dtype, handle: t.handle, engine: e,
		node: t.node, pending: true, passGen: t.passGen, queued: at}
	if at == len(e.pending) {
		e.pending = append(e.pending, h)
	} else {
		e.pending[at] = h
	}
	return h
}

// constants is a [len(vals)] tensor holding vals: numbers that change
// every step (learning rates, bias corrections). On the CPU it is one
// pending node holding the numbers. On a device they are uploaded into the
// pass pool: ops that carried them in their parameters would make every
// step's graph a different one, which the device could not replay as a
// CUDA graph (graph_replay.c).
func (e *Engine) constants(vals []float32) (*Tensor, error) {
	if e.backend.IsCPU() && !forceUploadedConstants {
		var release func()
		t, err := e.newOp("constants", []int{len(vals)}, nil, func(c ctx, _ []node) (node, error) {
			n, free, err := c.Values(vals)
			release = free
			return n, err
		})
		if release != nil {
			e.releases = append(e.releases, release)
		}
		return t, err
	}
	raw, err := encode(ggmlcgo.F32, vals)
	if err != nil {
		return nil, err
	}
	h, err := e.res.Upload(residency.Request{Shape: []int{len(vals)}, Type: ggmlcgo.F32, Scope: residency.Pass}, raw)
	if err != nil {
		return nil, err
	}
	t := &Tensor{shape: []int{len(vals)}, dtype: ggmlcgo.F32, handle: h, engine: e}
	e.trackPass(t) // promoted if the pass pool is compacted before its use
	return t, nil
}

// planSteps turns Realize's memory plan on. GGLUA_PLAN=0 places every
// node in the pass pool instead, as before the plan (a diagnostic; tests
// compare the two).
var planSteps = os.Getenv("GGLUA_PLAN") != "0"

// Transient marks pending results that nothing reads but the ops already
// built from them (a product before its bias is added, attention's scores
// before their softmax): the graph that computes them gives them scratch
// memory. Call it once those ops are built; a result computed already is
// left as it is.
func (e *Engine) Transient(ts ...*Tensor) {
	for _, t := range ts {
		if t != nil && t.pending && t.handle == nil && t.engine == e && !t.scratch {
			t.scratch = true
			e.pendingBytes -= 4 * t.Numel() // not held: not counted toward the pass pool's bound
		}
	}
}

// Recording reports whether a tape is recording (with_grad_tape, and not
// inside no_grad).
func (e *Engine) Recording() bool { return e.recording() }

// forceUploadedConstants makes tests take the devices' constants on the CPU.
var forceUploadedConstants = false

// Realize computes everything pending as one graph. Results are placed in
// the pass pool and become leaves: a later graph reads them and never
// recomputes their ancestry.
func (e *Engine) Realize() error {
	if err := e.sumsDue(); err != nil { // the sums a backward left for this compute
		return fmt.Errorf("realize: %w", err)
	}
	if len(e.pending) == 0 {
		e.batch++
		return nil
	}
	live := e.pending[:0] // without the places updates moved from
	for _, t := range e.pending {
		if t != nil {
			t.queued = len(live)
			live = append(live, t)
		}
	}
	e.pending = live
	plan := planSteps && !e.backwarding && e.dp == nil
	if plan && e.worthCollecting() {
		e.dropUnreachable()
	}
	e.mem.forwardQueued = false
	roots := make([]ggmlcgo.Tensor, len(e.pending))
	// Planned: only what can be read after the compute (results a caller
	// may hold, in-place updates) gets memory of its own in the pass pool;
	// every other node (inside an op, a gradient Backward made for its own
	// use) goes to scratch memory shared by liveness. Not while Backward is
	// still building (its gradients are read by the ops it adds next), nor
	// under data parallelism, whose collectives read and write gradients
	// outside the graph's order.
	outputs := map[ggmlcgo.Tensor]bool{}
	for i, t := range e.pending {
		if t.passGen != e.res.Gen(residency.Pass) {
			e.dropPending()
			return fmt.Errorf("realize: %w: pending work was dropped by a reset of the pass pool", residency.ErrStale)
		}
		roots[i] = t.node
		if plan && t.scratch && t.handle == nil {
			continue
		}
		// A result that may be read after the compute: ggml-cuda must not
		// fuse it away into the next node's kernel (a LayerNorm's x̂ into
		// its weight's product, a sum into the next add).
		t.node.SetOutput()
		outputs[t.node.Base()] = true
	}
	g, gctx, err := ggmlcgo.GraphOf(roots)
	if err != nil {
		return fmt.Errorf("realize: %w", err)
	}
	defer gctx.Free()
	if err := e.joinOpenSums(g); err != nil {
		return fmt.Errorf("realize: %w", err)
	}
	placed := map[ggmlcgo.Tensor]*residency.Handle{}
	var placedBytes int64
	var given []ggmlcgo.Tensor // the nodes this call gave memory
	// A graph that cannot be given all its memory (the budget) is left as
	// it was, to be computed by a later Realize: what its nodes were given
	// goes back (the pass memory itself only with the pass).
	unplace := func(err error) error {
		for _, n := range given {
			n.Unplace()
		}
		return fmt.Errorf("realize: %w", err)
	}
	for _, n := range g.Nodes() {
		if n.Allocated() || (plan && (n.IsView() || !outputs[n])) {
			continue
		}
		if n.IsView() {
			if err := n.InitView(); err != nil {
				return unplace(err)
			}
			given = append(given, n)
			continue
		}
		h, err := e.res.Place(residency.Pass, n, nil)
		if err != nil {
			return unplace(err)
		}
		given = append(given, n)
		placed[n] = h
		placedBytes += n.Nbytes()
	}
	if plan {
		if err := e.res.PlaceScratch(g); err != nil {
			return unplace(err)
		}
	}
	ctx := e.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	choice, chooser := -1, (*threadChooser)(nil) // for a large CPU graph
	if e.backend.IsCPU() {
		// Below about 64K produced elements, splitting the nodes across
		// threads costs more in synchronisation than it saves
		// (BenchmarkTinyCompute, config c in docs/BENCHMARKS.md); above,
		// the chooser (threads.go) picks by measured speed.
		threads := e.backend.Threads()
		if g.Work() < 1<<16 {
			threads = 1
		} else if threads > 1 {
			chooser = e.threads.forGraph(g.NNodes(), g.Work())
			if choice = chooser.pick(); choice == 0 {
				threads = 1
			}
		}
		e.backend.UseThreads(threads)
	}
	if e.beforeCompute != nil {
		e.beforeCompute(g)
	}
	started := time.Now()
	compute := e.backend.ComputeContext
	if e.profile != nil {
		compute = func(ctx context.Context, g *ggmlcgo.Graph) error { return e.profile.compute(ctx, e.backend, g) }
	}
	if err := compute(ctx, g); err != nil {
		// A cancelled step is abandoned whole: its work is dropped rather
		// than retried, since some in-place updates may already have run.
		e.dropPending()
		return fmt.Errorf("realize: %w", err)
	}
	if choice >= 0 {
		chooser.record(choice, g.Work(), time.Since(started))
	}
	launch := e.backend.Launches()
	e.stats.GraphComputes++
	e.stats.ComputeTime += time.Since(started)
	e.stats.NodesComputed += int64(g.NNodes())
	e.stats.PassBytes += placedBytes
	for _, t := range e.pending {
		t.storage().written = launch
		switch {
		case t.handle != nil: // an in-place update: a cached host copy is old
			t.handle.DropHostCopy()
		case plan && t.scratch: // its memory went to later nodes
			t.pending, t.node, t.freed = false, ggmlcgo.Tensor{}, true
			continue
		default: // an op result: its node is now its memory
			t.result = true
			h := placed[t.node.Base()] // a view's is its base's, of this graph's memory
			if h == nil {
				return fmt.Errorf("realize: internal error: result of shape %s has no memory", ShapeString(t.shape))
			}
			t.handle = h.Alias(t.node, t.shape)
			t.node.MakeLeaf()
			e.trackPass(t) // promoted at the pass reset if it outlives its step
		}
		t.pending, t.node = false, ggmlcgo.Tensor{}
	}
	e.pending, e.pendingBytes = nil, 0
	e.batch++
	e.res.Computed() // persistent memory dropped meanwhile may be reused now
	e.release()
	if e.dp != nil {
		e.dp.queued = false // the in-graph sums queued ran
	}
	if err := e.checkSums(); err != nil {
		return fmt.Errorf("realize: %w", err)
	}
	return e.afterRealize()
}

// Sync computes everything pending and waits for the device to finish it
// (a device's computes return once queued: ggmlcgo's async.go).
func (e *Engine) Sync() error {
	err := e.Realize()
	ggmlcgo.WaitDevices()
	return err
}

// DropPending abandons everything pending (a cancelled script's work).
func (e *Engine) DropPending() { e.dropPending() }

// release frees what the nodes just computed (or dropped) borrowed.
func (e *Engine) release() {
	for _, f := range e.releases {
		f()
	}
	e.releases = nil
}

// dropPending forgets pending work (its pass is gone): op results become
// unreadable, queued in-place updates are lost.
func (e *Engine) dropPending() {
	if len(e.pending) > 0 {
		e.lost = append(e.lost, e.batch)
	}
	e.batch++
	e.release()
	if e.dp != nil && e.dp.queued {
		// The in-graph sums go: the gradients, bucket slices, would hold
		// this process's part alone (or an older sum).
		e.dp.queued = false
		e.dp.dropGrads()
	}
	for _, t := range e.pending {
		if t == nil {
			continue
		}
		t.pending, t.node = false, ggmlcgo.Tensor{}
		if t.handle == nil {
			t.dropped = true
		}
	}
	e.pending, e.pendingBytes = nil, 0
	e.res.Computed()
}

// Reset frees pools (none named: both) after computing pending work, so
// that no queued update of a weight is lost. The pass pool's node contexts
// go with it, and the values that outlive it first move out (promote).
func (e *Engine) Reset(scopes ...residency.Scope) error {
	err := e.Realize()
	e.dropPending()
	if len(scopes) == 0 {
		scopes = []residency.Scope{residency.Pass, residency.Persistent}
	}
	if slices.Contains(scopes, residency.Pass) {
		_, perr := e.promote(false, slices.Contains(scopes, residency.Persistent))
		if err == nil {
			err = perr
		}
		e.freePass()
	}
	if slices.Contains(scopes, residency.Persistent) {
		if kerr := e.keptToHost(); err == nil {
			err = kerr
		}
	}
	e.res.Reset(scopes...)
	return err
}
