package core

import (
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"weak"

	"github.com/gglua/gglua/core/residency"
)

// Work done outside a tape (evaluation, sampling, data preparation) places
// its results in the pass pool too, and only the next with_grad_tape frees
// that pool: a loop of 20,000 no_grad matmuls would hold every result. So,
// outside a tape, once the pass pool has grown past a bound, it is compacted:
// the results something still references (found through weak pointers after
// a collection) are copied to the host, where they stay readable and are
// uploaded again when used, and the pool is reset.
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
// a graph this large computes for longer. (Not for startForward's graph,
// whose activations the tape still holds, nor for the backward's after it:
// what it computes is gradients, scratch already.)
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
	// The tape holds every activation still: Realize need not look for
	// results nothing reaches, here or in the backward's graph that follows.
	e.mem.forwardQueued = true
	err := e.Realize()
	e.mem.forwardQueued = err == nil
	return err
}

// afterRealize notes a step's computed graph and compacts the pass pool
// when work beyond steps has grown it past its bound.
func (e *Engine) afterRealize() error {
	if e.tape.active || len(e.pending) > 0 {
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

// keepHeld copies to the host, before a pass reset frees them, the kept
// results of the pass pool that have no copy: Realize copies the ones it
// computes, but a collective writes one in place outside any graph
// (dist.all_reduce of a metric computed from the loss). A pass upload
// (to_gpu(x)) is not kept: it goes with its pass, as residency says.
func (e *Engine) keepHeld() {
	for _, wp := range e.passLive {
		if t := wp.Value(); t != nil && t.keptWithoutCopy() {
			t.handle.CopyToHost()
		}
	}
}

// keptWithoutCopy reports whether t is a kept result of the pass pool
// (held, computed outside a tape, computed already) that has no host copy
// yet, kept or on its way.
func (t *Tensor) keptWithoutCopy() bool {
	h := t.handle
	return t.base == nil && t.result && t.held && !t.pending && !t.inTape && h != nil &&
		h.Scope() == residency.Pass && h.Live() && !h.HasHostCopy()
}

// compactPass copies what is still referenced in the pass pool to the host
// and resets the pool. Nothing may be pending.
func (e *Engine) compactPass() error {
	goruntime.GC() // what no one references is not copied
	var live int64
	for _, wp := range e.passLive {
		t := wp.Value()
		if t == nil || t.handle == nil || t.handle.Scope() != residency.Pass || !t.handle.Live() || t.handle.HostCopy() != nil {
			continue
		}
		if err := t.handle.CopyToHost(); err != nil {
			return err
		}
		live += t.handle.Nbytes()
	}
	e.passLive = nil
	e.mem.compactAt = 4 * live
	return e.Reset(residency.Pass)
}
