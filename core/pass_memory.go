package core

import (
	goruntime "runtime"
	"weak"

	"github.com/gglua/gglua/core/residency"
)

// Work done outside a tape (evaluation, sampling, data preparation) places
// its results in the pass pool too, and only the next with_grad_tape frees
// that pool: a loop of 20,000 no_grad matmuls would hold every result. So,
// outside a tape, once the pass pool has grown past a bound, it is compacted:
// the results something still references (found through weak pointers after
// a collection) are copied to the host, where they stay readable and are
// uploaded again when used, and the pool is reset. Inside a tape nothing is
// compacted: the activations are the step's, for backward.

// compactPassBytes is the pass pool's size past which work outside a tape
// compacts it (the bound grows with what is found alive, so that a large
// live working set is not copied back and forth).
const compactPassBytes = 64 << 20

// trackPass remembers a tensor placed in the pass pool, for compaction.
func (e *Engine) trackPass(t *Tensor) {
	e.passLive = append(e.passLive, weak.Make(t))
}

// maybeCompactPass compacts the pass pool when it is over its bound and no
// tape is recording. Nothing may be pending.
func (e *Engine) maybeCompactPass() error {
	if e.tape.active || len(e.pending) > 0 {
		return nil
	}
	bound := max(e.compactAt, compactPassBytes)
	if e.res.Ledger().BufferBytes < bound && len(e.nodeCtxs) < 64 {
		return nil
	}
	goruntime.GC() // what no one references is not copied
	var live int64
	for _, wp := range e.passLive {
		t := wp.Value()
		if t == nil || t.handle == nil || t.handle.Scope() != residency.Pass || !t.handle.Live() || t.handle.HostCopy() != nil {
			continue
		}
		raw := make([]byte, t.handle.Nbytes())
		if err := t.handle.Read(raw); err != nil {
			return err
		}
		if err := t.handle.KeepHostCopy(raw); err != nil {
			return err
		}
		live += int64(len(raw))
	}
	e.passLive = nil
	e.compactAt = 4 * live
	return e.Reset(residency.Pass)
}
