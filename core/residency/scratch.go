package residency

import (
	"fmt"

	"github.com/gglua/gglua/ggmlcgo"
)

// Scratch memory holds the values a graph computes that nothing reads
// after the compute: the nodes inside an op, the gradients of activations.
// ggml's graph allocator (ggml-alloc's gallocr) plans it by liveness: a
// node's memory goes to a later node once its last reader has run, so a
// step needs only its widest point, not the sum of its nodes. The memory is
// one buffer, kept across graphs and passes (a step plans the same way
// every time, so a device replays it at the same addresses), grown when a
// graph needs more, and counted in the ledger and the budget like the pools.
//
// The nodes a graph's caller reads afterwards must have memory first (Place
// in a pool) and be marked as outputs: the allocator leaves placed tensors
// alone and places every other one, views included.
type scratch struct {
	alloc   *ggmlcgo.Gallocr // owns the buffer
	measure *ggmlcgo.Gallocr // plans only: its buffer is always none
	bytes   int64            // alloc's buffer size
}

// PlaceScratch gives every node of g that has no memory yet a place in the
// scratch buffer, growing it within the budget. The buffer is in use until
// g has run: a graph queued on a device is ordered before the next one, so
// only a growth (which frees the old buffer) waits for the device.
func (s *State) PlaceScratch(g *ggmlcgo.Graph) error {
	if s.closed {
		return fmt.Errorf("residency: state is closed")
	}
	sc := &s.scratch
	if sc.alloc == nil {
		sc.alloc, sc.measure = ggmlcgo.NewGallocr(s.buft), ggmlcgo.NewGallocr(s.buft)
	}
	if s.backend.IsCPU() {
		g.GuardInPlace() // ggml-cuda's kernels of these read before they write
	}
	if need := sc.measure.Measure(g); need > sc.bytes {
		if err := s.CheckBudget(need - sc.bytes); err != nil {
			s.dropCache()
			s.collect()
			if err := s.CheckBudget(need - sc.bytes); err != nil {
				return fmt.Errorf("residency: scratch of a graph: %w", err)
			}
		}
		ggmlcgo.WaitDevices() // the old buffer is freed: no queued graph may use it
	}
	ok := sc.alloc.AllocGraph(g) == nil
	sc.bytes = sc.alloc.BufferSize()
	s.notePeak()
	if !ok {
		return fmt.Errorf("residency: %w: the device could not give a graph's scratch memory", ErrBudget)
	}
	return nil
}

// notePeak records the pass pool's high-water mark: its buffers and the
// scratch buffer the pass's graphs use.
func (s *State) notePeak() {
	s.peak = max(s.peak, s.pools[Pass].bytes+s.scratch.bytes)
}

// freeScratch frees the scratch buffer (a full reset, Close).
func (s *State) freeScratch() {
	if s.scratch.alloc != nil {
		ggmlcgo.WaitDevices()
		s.scratch.alloc.Free()
		s.scratch.measure.Free()
	}
	s.scratch = scratch{}
}
