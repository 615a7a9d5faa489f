package core

import (
	"errors"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"slices"
	"weak"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Work done outside a tape (evaluation, sampling, data preparation) places
// its results in the pass pool too, and only the next with_grad_tape frees
// that pool: a loop of 20,000 no_grad matmuls would hold every result. So,
// outside a tape, once the pass pool has grown past a bound, it is compacted:
// the values something still references (found through weak pointers after
// a collection) move to a home that survives (promote, below), and the pool
// is reset.
//
// A training step is left alone: inside the tape the activations are the
// step's, and after it backward and the optimizer are still building the
// step's one graph. So nothing is compacted until that graph has been
// computed (the first Realize after a tape), and the bound is then at least
// twice what the step itself used: what grows past it is work beyond steps.

// reachCheckBytes is the size of a graph's pending results from which
// Realize first looks for the ones nothing can read any more. The
// collection that finds them scans Go's whole live heap (the script's Lua
// values too), so it is made only when the results are larger than that
// heap as well: the device memory it may free is then worth the scan, and
// a graph this large computes for longer. (Not for the backward's graph
// after startForward's: what it computes is gradients, scratch already.)
var reachCheckBytes int64 = 32 << 20 // a var: tests set it to 0, which also skips the heap's test

// worthCollecting reports whether Realize looks for unreachable results.
func (e *Engine) worthCollecting() bool {
	if e.mem.forwardQueued || e.pendingBytes < reachCheckBytes {
		return false
	}
	if reachCheckBytes == 0 {
		return true
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}} // as of the last collection
	metrics.Read(live)
	return live[0].Value.Kind() != metrics.KindUint64 || e.pendingBytes >= int64(live[0].Value.Uint64())
}

// dropUnreachable removes from the pending list the results that no
// script value, Go variable or tape still reaches (a collection finds
// them through weak pointers): the graph then computes them only where
// another node reads them, in scratch memory, and keeps no memory of
// their own for them. In-place updates stay: their memory is a tensor's.
func (e *Engine) dropUnreachable() {
	updates := make([]*Tensor, len(e.pending)) // held: the rest only weakly
	weaks := make([]weak.Pointer[Tensor], len(e.pending))
	for i, t := range e.pending {
		if t.handle != nil {
			updates[i] = t
		} else {
			weaks[i] = weak.Make(t)
		}
		e.pending[i] = nil
	}
	goruntime.GC()
	live := e.pending[:0]
	for i, t := range updates {
		if t == nil {
			t = weaks[i].Value()
		}
		if t != nil {
			t.queued = len(live)
			live = append(live, t)
		}
	}
	e.pending = live
}

// compactPassBytes is the pass pool's size past which work outside a tape
// compacts it (the bound grows with what is found alive, so that a large
// live working set is not copied back and forth).
var compactPassBytes int64 = 64 << 20 // a var: tests lower it

// trackPass remembers a tensor placed in the pass pool, for compaction.
func (e *Engine) trackPass(t *Tensor) {
	e.passLive = append(e.passLive, weak.Make(t))
}

// passMemory is the engine's record of steps, for the bound.
type passMemory struct {
	tapeRan      bool  // a with_grad_tape ran on this engine
	stepComputed bool  // the graph of the last tape's step has been computed
	stepBytes    int64 // the pass pool's size when it was
	compactAt    int64 // the bound found by the last compaction (4x what was alive)
	// forwardQueued: startForward computed the step's forward on its own,
	// so the next graph (the backward) holds no activation to drop.
	forwardQueued bool
	promoting     bool // promote is computing its copies (no compaction meanwhile)
}

// splitSteps: on an asynchronous device a step is two graphs (startForward);
// GGLUA_SPLIT_STEP=0 makes it one, whose activations the graph's scratch
// memory holds only while the backward still reads them.
var splitSteps = os.Getenv("GGLUA_SPLIT_STEP") != "0"

// beyondStep reports whether work now is past the current step (or there
// are no steps), where the pass pool is kept within its bound.
func (e *Engine) beyondStep() bool {
	return !e.tape.active && (!e.mem.tapeRan || e.mem.stepComputed)
}

// passBound is the pass pool's size past which work beyond steps compacts it.
func (e *Engine) passBound() int64 {
	return max(compactPassBytes, e.mem.compactAt, 2*e.mem.stepBytes)
}

// startForward queues what is pending (the forward) on a device whose
// computes return once queued (ggmlcgo's async.go), before backward builds
// the gradients: the device computes the forward while the host builds the
// rest of the step, where one graph would leave the device idle until all
// of it was built. It is not the step's graph for the bound below: that is
// the one computed after backward. (A step cancelled once its forward was
// queued keeps what the forward wrote in place, BatchNorm's running
// statistics; its backward and update are dropped.)
func (e *Engine) startForward() error {
	if !e.backend.Async() || len(e.pending) == 0 || !splitSteps {
		return nil
	}
	computed := e.mem.stepComputed
	defer func() { e.mem.stepComputed = computed }()
	// The tape holds only what backward's closures saved, so the forward's
	// graph looks for the activations nothing reaches (dropUnreachable);
	// the backward's graph that follows makes gradients, scratch already.
	e.mem.forwardQueued = false
	err := e.Realize()
	e.mem.forwardQueued = err == nil
	return err
}

// afterRealize notes a step's computed graph and compacts the pass pool
// when work beyond steps has grown it past its bound.
func (e *Engine) afterRealize() error {
	if e.tape.active || len(e.pending) > 0 || e.mem.promoting {
		return nil
	}
	if e.mem.tapeRan && !e.mem.stepComputed {
		e.mem.stepComputed, e.mem.stepBytes = true, e.res.Ledger().BufferBytes
		return nil
	}
	if e.res.Ledger().BufferBytes < e.passBound() && len(e.nodeCtxs) < 64 {
		return nil
	}
	return e.compactPass()
}

// compactPass moves what is still referenced in the pass pool to a home
// that survives (promote: everything reachable, pass uploads and the last
// step's values too, since a compaction is the engine's doing and not the
// script's) and resets the pool. Nothing may be pending.
func (e *Engine) compactPass() error {
	live, err := e.promote(true, false)
	e.mem.compactAt = 4 * live
	e.freePass()
	e.res.Reset(residency.Pass)
	return err
}

// Values that outlive their step. A pass reset frees the pass pool, but a
// caller may still reach some of its values: data prepared before the loop,
// a metric kept in a table, clip_grad_norm's norm, a host parameter's
// gradient, an RNN state carried to the next step, last step's loss. Just
// before the pool goes, promote gives each of them, once, a home that
// survives it:
//   - a value made outside a tape, or detached in one to be carried on
//     (Carry), is copied into the persistent pool, by one graph queued on
//     the device (no wait for it), and the tensor now lives there: reads and
//     in-place updates need nothing more;
//   - a value that was read (the read left a host copy) becomes a host
//     tensor holding what was read;
//   - where the persistent pool refuses a copy (the budget) or goes too (a
//     full reset), the value is read to the host instead.
// Anything else goes with the pool and is a stale-handle error if read: a
// step's activations and pass uploads (to_gpu(x)), as residency says. A
// compaction (everything) keeps every value something references.

// promoteCollectBytes is the size of the values found to promote from
// which a collection first tells the ones really reachable from those only
// not collected yet (a loop's last activations, an evaluation's results).
var promoteCollectBytes int64 = 1 << 20

// promote moves the pass pool's values that outlive it (see above) and
// returns the bytes it moved. It computes a graph of the copies: call it
// with nothing pending, just before the pass pool is reset.
func (e *Engine) promote(everything, persistentToo bool) (int64, error) {
	var found []*Tensor
	var bytes int64
	find := func() {
		found, bytes = found[:0], 0
		for _, wp := range e.passLive {
			t := wp.Value()
			if t == nil || t.base != nil || t.pending || t.handle == nil ||
				t.handle.Scope() != residency.Pass || !t.handle.Live() {
				continue
			}
			if everything || t.outlivesItsStep() || t.handle.HostCopy() != nil {
				found = append(found, t)
				bytes += t.handle.Nbytes()
			}
		}
	}
	find()
	if everything || bytes >= promoteCollectBytes {
		found = nil    // its backing array would keep every value found reachable
		goruntime.GC() // what no one references is not copied
		find()
	}
	type move struct{ t, to *Tensor }
	var moves []move
	var toHost []*Tensor
	for _, t := range found {
		if persistentToo || (!everything && !t.outlivesItsStep()) {
			toHost = append(toHost, t)
			continue
		}
		to, err := e.persistentCopy(t)
		if errors.Is(err, residency.ErrBudget) {
			toHost = append(toHost, t) // the host has room the budget does not
			continue
		}
		if err != nil {
			return 0, err
		}
		moves = append(moves, move{t, to})
	}
	for _, t := range toHost {
		if err := t.becomeHost(); err != nil {
			return 0, err
		}
	}
	if len(moves) == 0 {
		return bytes, nil
	}
	e.mem.promoting = true
	err := e.Realize()
	e.mem.promoting = false
	if err != nil {
		return 0, err
	}
	for _, m := range moves {
		t, h := m.t, m.to.handle
		if raw := t.handle.HostCopy(); raw != nil {
			if err := h.KeepHostCopy(raw); err != nil {
				return 0, err
			}
		}
		t.handle, t.written = h, m.to.written
		t.inTape, t.carried = false, false
		e.keep(t)
	}
	return bytes, nil
}

// keep records t, a value the engine moved into the persistent pool on a
// caller's behalf (a promoted value, a host parameter's gradient): a reset
// of the persistent pool reads it to the host first (keptToHost), so that
// it outlives that reset too, as a host value would.
func (e *Engine) keep(t *Tensor) {
	if len(e.kept) == cap(e.kept) { // drop the collected before the list grows
		e.kept = slices.DeleteFunc(e.kept, func(wp weak.Pointer[Tensor]) bool { return wp.Value() == nil })
	}
	e.kept = append(e.kept, weak.Make(t))
}

// keptToHost makes the kept values still reachable host tensors, before
// the persistent pool is reset.
func (e *Engine) keptToHost() error {
	for _, wp := range e.kept {
		if t := wp.Value(); t != nil && t.handle != nil && t.handle.Scope() == residency.Persistent && t.handle.Live() {
			if err := t.becomeHost(); err != nil {
				return err
			}
		}
	}
	e.kept = nil
	return nil
}

// outlivesItsStep reports whether t, a result of the pass pool, is one
// promote copies into the persistent pool: held by a caller and made
// outside a tape, or carried.
func (t *Tensor) outlivesItsStep() bool { return t.result && t.held && (!t.inTape || t.carried) }

// persistentCopy queues a copy of t's value into new memory of the
// persistent pool: the pending in-place update that fills it.
func (e *Engine) persistentCopy(t *Tensor) (*Tensor, error) {
	h, err := e.res.Alloc(residency.Request{Shape: t.shape, Type: t.handle.Type(), Scope: residency.Persistent, Alone: true})
	if err != nil {
		return nil, err
	}
	src, err := t.handle.Tensor()
	if err != nil {
		return nil, err
	}
	dst, err := h.Tensor()
	if err != nil {
		return nil, err
	}
	c, err := e.nodeContext()
	if err != nil {
		return nil, err
	}
	n, err := c.Cpy(src, dst)
	if err != nil {
		return nil, err
	}
	to := &Tensor{shape: t.shape, dtype: t.dtype, handle: h, engine: e, result: true,
		node: n, pending: true, passGen: e.res.Gen(residency.Pass), queued: len(e.pending)}
	e.pending = append(e.pending, to)
	return to, nil
}

// becomeHost makes t, a value of the pass pool, a host tensor holding its
// value: what a read left, or read now.
func (t *Tensor) becomeHost() error {
	raw := t.handle.HostCopy()
	if raw == nil {
		raw = make([]byte, t.handle.Nbytes())
		if err := t.handle.Read(raw); err != nil {
			return err
		}
	}
	if typ := t.handle.Type(); typ == ggmlcgo.I32 {
		t.ints = decodeInt32s(raw)
	} else {
		v, err := decode(typ, raw)
		if err != nil {
			return err
		}
		t.host = v
	}
	t.handle, t.result, t.written = nil, false, 0
	return nil
}

// freePass forgets what this engine kept of the pass pool about to be reset.
func (e *Engine) freePass() {
	e.freeNodeContexts()
	e.passLive, e.uploads = nil, nil
}
