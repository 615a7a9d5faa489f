package core

import (
	"fmt"
	"unsafe"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// In-graph gradient sums: where the engine's backend runs a collective as
// a graph node (ggmlcgo's AllReduce: MPI on the CPU, NCCL on a CUDA device
// whose library has gglua's kernels), the sums join the backward's graph
// instead of running between computes (data_parallel.go):
//
//  1. the buckets hold about graphBucketBytes each, the parameters in
//     reverse order, so the first bucket's gradients are the first the
//     backward makes (the last layer's), as PyTorch DDP's buckets;
//  2. Backward visits the tape in reverse topological order, so it reaches
//     a parameter once every op that read it has added its gradient: the
//     gradient is final there, and its copy into its bucket slice is
//     queued at once (gradSums.final);
//  3. once a bucket's gradients are all copied, and every bucket before it
//     queued, its AllReduceMean is queued (the sum times 1/world: NCCL's
//     average, which divides before the sum as DDP does): on a GPU it runs
//     on a stream of its own while the backward goes on. Every process
//     queues the buckets in the same order, whatever order its gradients
//     came in;
//  4. at the end of Backward, the buckets left (a parameter this process
//     gave no gradient adds zeros, or its accumulated .grad) are queued,
//     and a join waits for the sums. Each parameter's .grad is then its
//     bucket slice, which holds the average (DDP's gradient_as_bucket_view:
//     no copy back, no gradient buffer besides the bucket).
//
// A steady step is then at most two graph computes with no collective
// between them: on the CPU forward, backward, the sums and the update
// share one; on a GPU the update rides with the next forward.

// GraphCollective is a collective whose calls are graph nodes (ggmlcgo's
// gglua_collective, filled by package dist).
type GraphCollective struct {
	C        unsafe.Pointer // a gglua_collective, alive for as long as the engine may use it
	OnDevice bool           // it sums device memory (NCCL), else host memory (MPI)
	Err      func() error   // the first failure its nodes recorded, or nil
	// BucketBytes bounds one bucket (PyTorch DDP's bucket_cap_mb); 0:
	// graphBucketBytes.
	BucketBytes int64
}

// graphBucketBytes bounds one bucket of in-graph sums: PyTorch DDP's 25 MB,
// small enough that the sums start early in the backward, large enough
// that each is one efficient collective. A variable for the tests.
var graphBucketBytes int64 = 25 << 20

// inGraph reports whether e's backward sums in its graph.
func (dp *dataParallel) inGraph(e *Engine) bool {
	return dp.coll != nil && dp.coll.OnDevice == !e.backend.IsCPU() && e.backend.HasKernel(ggmlcgo.KernelAllReduce)
}

// gradSums is one Backward's in-graph sums.
type gradSums struct {
	e      *Engine
	dp     *dataParallel
	done   map[*Tensor]bool // parameters whose slice write is queued
	left   []int            // per bucket, its parameters not yet done
	next   int              // the first bucket whose sum is not queued
	sums   []*Tensor        // the AllReduceMean nodes queued (and the join)
	writes []sliceWrite     // the bucket slices' queued writes
}

// startSums readies the buckets for one Backward.
func (e *Engine) startSums() (*gradSums, error) {
	dp := e.dp
	if dp.queued {
		// An earlier backward's sums are still pending (two backwards in
		// one tape): its bucket copies, sums and averages run first, or
		// this backward's copies would overwrite the buckets before the
		// graph sums them (the sums read the buckets, not the copies).
		if err := e.Realize(); err != nil {
			return nil, err
		}
	}
	if err := dp.ready(e); err != nil {
		return nil, err
	}
	s := &gradSums{e: e, dp: dp, done: map[*Tensor]bool{}}
	dp.summing = true // until finish or abandon
	for _, b := range dp.buckets {
		s.left = append(s.left, len(b.params))
	}
	return s, nil
}

// has reports whether p is one of the data-parallel parameters.
func (s *gradSums) has(p *Tensor) bool {
	_, ok := s.dp.place[p]
	return ok
}

// final takes the final gradient g of this backward for p (nil: none);
// p may not be one of the data-parallel parameters.
func (s *gradSums) final(p, g *Tensor) error {
	at, ok := s.dp.place[p]
	if !ok || s.done[p] {
		return nil
	}
	if err := s.write(p, g); err != nil {
		return err
	}
	s.left[at.k]--
	for s.next < len(s.left) && s.left[s.next] == 0 {
		if err := s.queueSum(s.next); err != nil {
			return err
		}
		s.next++
	}
	return nil
}

// write queues p's slice = what p.grad would become: g, plus p.grad where
// backward accumulates (no zero_grad since the last step; after a step,
// p.grad is this very slice), or zeros where neither is. (The bucket's
// all-reduce averages it: one copy per gradient, not a scaling and a copy.)
func (s *gradSums) write(p, g *Tensor) error {
	e := s.e
	s.done[p] = true
	at := s.dp.place[p]
	slice := s.dp.buckets[at.k].slices[at.i]
	acc := p.grad != nil && !p.gradZero
	var err error
	switch {
	case g != nil && acc:
		g, err = e.Add(p.grad, g)
	case g != nil:
		g, err = e.Contiguous(g)
	case acc && p.grad == slice && !slice.pending:
		return nil // the slice holds p's gradient already (a queued update of it needs its hold below)
	case acc:
		g = p.grad
	default: // no gradient here: this process adds zeros
		s.dp.unused = append(s.dp.unused, unusedGrad{p, p.grad, p.gradZero})
		g, err = e.fillLike(slice, 0)
	}
	if err != nil {
		return err
	}
	if err := e.writeInPlace(slice, g); err != nil || !slice.pending {
		return err
	}
	// The write must run where it is, before its bucket's sum, which reads
	// the bucket and not the slice: a later in-place update of the slice
	// (clipping the gradient, which is this slice) chains after it and
	// moves the slice's place in the queue to the end, past the sum. So a
	// second root holds the write here (the graph computes a node once).
	s.writes = append(s.writes, sliceWrite{slice, e.holdAt(slice, len(e.pending))})
	return nil
}

// sliceWrite is a queued write of a bucket slice and the root that holds
// it in place.
type sliceWrite struct{ slice, hold *Tensor }

// ownGrads gives every gradient that is a bucket slice a buffer of its
// own with its value, before the buckets go: it queues the copies, and the
// function it returns, called once they are computed, points the slices
// themselves at those buffers (whoever holds one, backward's result or a
// script's local, reads the same value) and retires the slices that are no
// gradient's (their views are freed with the buckets).
func (dp *dataParallel) ownGrads(e *Engine) (func(), error) {
	var moves []func()
	for _, b := range dp.buckets {
		for i, p := range b.params {
			sl := b.slices[i]
			if p.grad != sl || p.gradZero || !b.flat.handle.Live() {
				if p.grad == sl { // cleared, or gone with a reset of the persistent pool
					p.grad, p.gradZero = nil, true
				}
				moves = append(moves, func() { sl.handle, sl.dropped = nil, true })
				continue
			}
			h, err := e.res.Alloc(residency.Request{Shape: p.shape, Scope: residency.Persistent})
			if err != nil {
				return nil, err
			}
			own := &Tensor{shape: p.Shape(), dtype: h.Type(), handle: h, engine: e}
			if err := e.writeInPlace(own, sl); err != nil {
				return nil, err
			}
			moves = append(moves, func() { sl.handle = h })
		}
	}
	return func() {
		for _, m := range moves {
			m()
		}
	}, nil
}

// queueSum queues bucket k's AllReduceMean. The last bucket is queued
// once every parameter is final, and carries the used flags.
func (s *gradSums) queueSum(k int) error {
	if k == len(s.dp.buckets)-1 {
		if err := s.dp.writeFlags(s.e); err != nil {
			return err
		}
		// Held where it is, as a slice's write, so that abandon unqueues it.
		s.writes = append(s.writes, sliceWrite{s.dp.flags, s.e.holdAt(s.dp.flags, len(s.e.pending))})
	}
	coll := s.dp.coll.C
	s.dp.queued = true // before newOp, which may compute at once (eager mode)
	sum, err := s.e.newOp("all_reduce_mean", []int{1}, []*Tensor{s.dp.buckets[k].flat}, func(c ctx, in []node) (node, error) {
		return c.AllReduceMean(in[0], coll)
	})
	if err != nil {
		return err
	}
	s.sums = append(s.sums, sum)
	return nil
}

// finish queues what is left of the sums, the join and the averages.
func (s *gradSums) finish() error {
	e, dp := s.e, s.dp
	defer func() { dp.summing = false }()
	for _, b := range dp.buckets {
		for _, p := range b.params {
			if err := s.final(p, nil); err != nil {
				return err
			}
		}
	}
	if len(s.sums) == 0 {
		return nil
	}
	coll := dp.coll.C
	join, err := e.newOp("all_reduce_join", []int{1}, []*Tensor{s.sums[len(s.sums)-1]}, func(c ctx, in []node) (node, error) {
		return c.AllReduceJoin(in[0], coll)
	})
	if err != nil {
		return err
	}
	s.sums = append(s.sums, join) // abandon drops it too: it reads the last sum
	// Each gradient is its slice, the average once the sums ran (DDP's
	// gradient_as_bucket_view): no copy out, no gradient buffer of its own.
	for _, b := range dp.buckets {
		for i, p := range b.params {
			p.grad, p.gradZero = b.slices[i], false
		}
	}
	return nil
}

// abandon unqueues the sums and slice writes of a Backward that failed:
// every process must run the same collectives, and this one's step ends
// here.
func (s *gradSums) abandon() {
	s.dp.summing = false
	ran := false // a sum was computed in the middle of the backward
	for _, t := range s.sums {
		if t.pending {
			s.e.unqueue(t)
			t.dropped = true
		} else {
			ran = true
		}
	}
	if !ran && len(s.sums) > 0 {
		s.dp.queued = false
	}
	// The slices keep their values: one may be a parameter's .grad, which
	// a failed backward leaves as it was.
	for _, w := range s.writes {
		if w.slice.pending && w.slice.node == w.hold.node {
			s.e.unqueue(w.slice)
		}
		if w.hold.pending {
			s.e.unqueue(w.hold)
		}
	}
}

// unqueue takes pending t out of the queue: its node is not computed.
func (e *Engine) unqueue(t *Tensor) {
	e.pending[t.queued] = nil
	t.pending, t.node = false, ggmlcgo.Tensor{}
}

// joinOpenSums adds a join after g's last all_reduce_mean where none follows
// it: a backward's pending work split across computes (maxPending, eager
// mode) must not end a graph with a sum forked to the collective's own
// stream and not joined (a device's CUDA graph capture must join every
// stream it forked). A join after part of the sums costs nothing more.
func (e *Engine) joinOpenSums(g *ggmlcgo.Graph) error {
	if e.dp == nil || e.dp.coll == nil || !e.dp.queued {
		return nil
	}
	nodes := g.Nodes()
	for i := len(nodes) - 1; i >= 0; i-- {
		switch nodes[i].Name() {
		case "all_reduce_join":
			return nil
		case "all_reduce_mean":
			c, err := e.nodeContext()
			if err != nil {
				return err
			}
			join, err := c.AllReduceJoin(nodes[i], e.dp.coll.C)
			if err != nil {
				return err
			}
			return g.Expand(join)
		}
	}
	return nil
}

// summing reports whether a Backward is queueing in-graph sums: pending
// work is then not computed before the Backward ends (newOp), whatever
// eager mode or the pending work's size would do, so that no slice's
// write runs before the gradient it adds to is final, and no gradient is
// read between its slice's write and its bucket's sum.
func (e *Engine) summing() bool { return e.dp != nil && e.dp.summing }

// sumPendingFor reports whether t is a bucket slice (a gradient) whose
// bucket's sum is queued and not yet computed. Other reads, the loss's
// after backward, leave the step pending as before.
func (e *Engine) sumPendingFor(t *Tensor) bool {
	return e.dp != nil && e.dp.queued && e.dp.slices[t]
}

// checkSums reports a failure the in-graph sums recorded during the last
// compute. The gradients it leaves are this process's alone, so they go;
// but the compute may already have applied an update with them (the CPU's
// step is one compute), and the processes' collectives are out of step:
// the failure stays (every later compute reports it) and the job must end,
// as PyTorch's NCCL watchdog ends it.
func (e *Engine) checkSums() error {
	if e.dp == nil || e.dp.coll == nil || e.dp.coll.Err == nil {
		return nil
	}
	err := e.dp.coll.Err()
	if err == nil {
		return nil
	}
	e.dp.dropGrads()
	return fmt.Errorf("data parallel: summing gradients failed, so the processes' weights may differ now (end the job): %w", err)
}
