package core

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Data parallelism, core's side. Package dist owns the processes and the
// collective libraries (MPI, NCCL); core knows none of them. It lends a
// tensor's memory to a collective between graph computes (WithBuffer) and,
// once SetDataParallel has marked a model's parameters, averages their
// gradients at the end of every Backward:
//
//  1. each gradient is copied into its slice of a flat persistent buffer
//     (a bucket of up to bucketBytes), by ggml nodes queued after the
//     backward ones; one compute runs forward, backward and these copies;
//  2. each gradient is set to its slice times 1/world, by nodes that run in
//     the next compute with the optimizer's update;
//  3. before that compute, once the first is done, each bucket is summed
//     across processes in place, one collective per bucket (so the host
//     builds the optimizer's update while a device computes the gradients).
//
// A steady step is therefore two graph computes plus one collective per
// bucket (on a device whose computes return once queued, backward first
// queues the forward, pass_memory.go's startForward, and the update rides
// with the next step's forward), and anything that reads .grad after
// backward (clipping, the optimizer) sees the average, as with PyTorch's
// DistributedDataParallel.

// Buffer is the memory behind a tensor, lent to a collective library.
type Buffer struct {
	Data     unsafe.Pointer // the first element
	Count    int            // float32 elements
	OnDevice bool           // GPU memory (else host memory: a host tensor or the CPU backend's buffers)
}

// bucketBytes bounds one gradient bucket. PyTorch DDP's 25 MB buckets let
// it start reducing while backward still runs; gglua reduces after the whole
// backward, where every further bucket is one more collective to launch and
// wait for (nine for the 216 MB of the H200 MLP benchmark), so a model
// below 1 GiB of gradients makes one. (A parameter larger than the bound
// gets a bucket of its own; package dist splits an MPI call past a C int's
// count, and NCCL takes a size_t.) A variable for the tests.
var bucketBytes int64 = 1 << 30

// WithBuffer computes pending work, then lends fn the memory of t (f32, not
// a view). With write, fn may change it in place and t's readers see the
// new value (its version moves on); without, fn must only read it.
func (e *Engine) WithBuffer(t *Tensor, write bool, fn func(Buffer) error) error {
	switch {
	case t.base != nil:
		return fmt.Errorf("a view of shape %s has no memory of its own: pass a contiguous tensor (x:clone())", ShapeString(t.shape))
	case t.dtype != ggmlcgo.F32 || t.ints != nil:
		return fmt.Errorf("collectives take f32 tensors, got %s", t.dtype)
	case t.host == nil && t.engine != nil && t.engine != e:
		return fmt.Errorf("tensor of shape %s belongs to another runtime or device", ShapeString(t.shape))
	case write && t.gradFn != nil:
		// As copy_: a gradient may read this value (relu's, sigmoid's read
		// their result), and the tape checks only its inputs' versions.
		return fmt.Errorf("in-place change of a tensor the tape needs (it was computed by %s); change a copy (x:detach():clone())", t.gradFn.name)
	}
	if err := e.Realize(); err != nil {
		return err
	}
	return e.lend(t, write, fn)
}

// lend is WithBuffer once pending work is computed (or queued: the
// buffer's address waits for the device).
func (e *Engine) lend(t *Tensor, write bool, fn func(Buffer) error) error {
	if write {
		t.version++ // its value changes: saved versions and host copies go
	}
	if t.host != nil {
		if len(t.host) == 0 {
			return nil
		}
		return fn(Buffer{Data: unsafe.Pointer(&t.host[0]), Count: len(t.host)})
	}
	if t.dropped || t.handle == nil {
		return errDropped
	}
	n, err := t.handle.Tensor()
	if err != nil {
		return err
	}
	if len(e.pending) == 0 {
		// Unpin: no graph reads it any more. (reduceGrads lends with work
		// pending, whose pins must hold until it is computed.)
		defer e.res.Computed()
	}
	if write {
		t.handle.DropHostCopy()
	}
	return fn(Buffer{Data: n.Data(), Count: int(t.Numel()), OnDevice: !e.backend.IsCPU()})
}

// dataParallel is the state SetDataParallel keeps.
type dataParallel struct {
	params  []*Tensor
	world   int
	sum     func(Buffer) error // sums a buffer across processes, in place
	coll    *GraphCollective   // sums in the backward's graph, where the backend can (data_parallel_sums.go)
	buckets []gradBucket
	place   map[*Tensor]slot // each parameter's bucket and index in it
	slices  map[*Tensor]bool // every bucket's slices (the in-graph sums' gradients)
	meta    *ggmlcgo.Context // the slices' view metadata
	due     bool             // the buckets hold this process's gradients, not yet summed
	queued  bool             // in-graph sums are pending (data_parallel_sums.go)
	summing bool             // a Backward is queueing in-graph sums
	paused  int              // inside NoSync: Backward accumulates locally
	flags   *Tensor          // the used flags: [len(params)] after the last bucket's gradients, summed with them
	unused  []unusedGrad     // this Backward's parameters that got no gradient here
	broken  error            // a Backward that averaged failed here (outOfStep)
	frozen  []*Tensor        // parameters frozen when their model was wrapped: not averaged (WatchFrozen)
}

// unusedGrad is a parameter this process gave no gradient, and the .grad
// it had before the Backward.
type unusedGrad struct {
	p, grad *Tensor
	zero    bool
}

// slot is a parameter's place: bucket k, index i in it.
type slot struct {
	k, i int
	flag int // its used flag: its place among all the buckets' parameters
}

// gradBucket is one flat buffer and its parameters' slices of it.
type gradBucket struct {
	flat   *Tensor   // persistent f32 [n] (the last bucket: [n + len(params)], the used flags after)
	grads  *Tensor   // flat's gradients: flat, or a view of its first n elements
	params []*Tensor // in order
	slices []*Tensor // params[i]'s gradient's place in flat: persistent tensors sharing its memory
	offs   []int64   // slices[i] starts at flat's element offs[i]
	flags  *Tensor   // the last bucket's used flags (else nil)
}

// SetDataParallel makes every later Backward average the gradients of
// params across world processes, summing with coll inside the backward's
// graph where the backend runs its nodes (data_parallel_sums.go), else
// with sum between graph computes (nil params: stop). Every
// process must call Backward equally often (each call is a collective), and
// a parameter that got no gradient on this process adds zeros, so all of
// them get the average, and one that no process gave a gradient keeps the
// .grad it had (keepUnusedGrads), as DDP with find_unused_parameters does.
func (e *Engine) SetDataParallel(params []*Tensor, world int, sum func(Buffer) error, coll *GraphCollective) error {
	if e.dp != nil {
		// Pending averages read the buckets through the views freed below
		// (and the sums due come first), and so do gradients that are
		// bucket slices (data_parallel_sums.go): they get buffers of their
		// own.
		retire, err := e.dp.ownGrads(e)
		if err != nil {
			return err
		}
		if err := e.Realize(); err != nil {
			return err
		}
		retire()
	}
	e.dp.free()
	e.dp = nil
	if len(params) == 0 {
		return nil
	}
	if world < 1 || (sum == nil && coll == nil) {
		return errors.New("data parallel: needs a world size >= 1 and a collective")
	}
	if coll != nil && ggmlcgo.CollectiveWorld(coll.C) != world {
		// The in-graph sums average over the collective's processes.
		return fmt.Errorf("data parallel: the collective has %d processes, not %d", ggmlcgo.CollectiveWorld(coll.C), world)
	}
	seen := map[*Tensor]bool{}
	dp := &dataParallel{world: world, sum: sum, coll: coll}
	for i, p := range params {
		switch {
		case !p.requiresGrad || p.gradFn != nil:
			return fmt.Errorf("data parallel: parameter %d (shape %s) is not a leaf that requires grad", i+1, ShapeString(p.shape))
		case p.base != nil:
			return fmt.Errorf("data parallel: parameter %d (shape %s) is a view", i+1, ShapeString(p.shape))
		case !seen[p]: // tied weights are averaged once
			seen[p] = true
			dp.params = append(dp.params, p)
		}
	}
	if sum == nil && !dp.inGraph(e) {
		return errors.New("data parallel: this backend runs no collective in its graphs, and no other was given")
	}
	e.dp = dp
	return nil
}

// DataParallelParams returns the parameters whose gradients every
// Backward averages (nil: none).
func (e *Engine) DataParallelParams() []*Tensor {
	if e.dp == nil {
		return nil
	}
	return slices.Clone(e.dp.params)
}

// outOfStep records that a Backward that was to average failed or
// panicked (err nil) on this process. The other processes may have run
// that step's sums, which now wait for this one's; the next sums here
// would pair with them and mix two steps' gradients. So every later
// Backward, every collective (OutOfStep) and the end of the script
// (FinishCollectives) report it: the process ends with an error and its
// launcher ends the job, as PyTorch's DDP refuses the next iteration after
// an unfinished reduction. Nothing puts the processes back in step (a
// new SetDataParallel here would not move the others).
func (dp *dataParallel) outOfStep(err error) {
	cause := "it panicked"
	if err != nil {
		cause = err.Error()
	}
	dp.broken = fmt.Errorf("data parallel: a backward failed on this process (%s), so its gradient sums are out of step with the other processes' (each must run every backward), and every collective here refuses: end the job", cause)
}

// WatchFrozen names the parameters of the wrapped models that were frozen
// (requires_grad off) when they were wrapped: broadcast, not averaged, as
// DDP leaves them. One unfrozen since would train on this process's
// gradients alone, and the processes' weights would part silently (DDP's
// pitfall), so Backward refuses until the model is wrapped again.
func (e *Engine) WatchFrozen(ts []*Tensor) {
	if e.dp != nil {
		e.dp.frozen = slices.Clone(ts)
	}
}

// DataParallelFrozen is what WatchFrozen was given last (nil: nothing).
func (e *Engine) DataParallelFrozen() []*Tensor {
	if e.dp == nil {
		return nil
	}
	return slices.Clone(e.dp.frozen)
}

// unfrozen is Backward's refusal of a parameter unfrozen since its model
// was wrapped (WatchFrozen), nil if none.
func (dp *dataParallel) unfrozen() error {
	for _, p := range dp.frozen {
		if p.requiresGrad {
			return fmt.Errorf("data parallel: a parameter of shape %s was frozen when dist.data_parallel wrapped its model and requires grad now: its gradient would not be averaged across the processes, whose weights would part; call dist.data_parallel(model) again (on every process) after unfreezing", ShapeString(p.shape))
		}
	}
	return nil
}

// OutOfStep is the error of a backward that failed while averaging (see
// outOfStep), nil if none: every collective must refuse once it is set.
func (e *Engine) OutOfStep() error {
	if e.dp == nil {
		return nil
	}
	return e.dp.broken
}

// dropGrads forgets every parameter's gradient: after a failed or dropped
// sum it would be this process's alone, not the average.
func (dp *dataParallel) dropGrads() {
	for _, p := range dp.params {
		p.grad, p.gradZero = nil, true
	}
}

func (dp *dataParallel) free() {
	if dp != nil && dp.meta != nil {
		dp.meta.Free()
		dp.meta = nil
	}
}

// ready (re)builds the buckets: once, and again after a reset of the
// persistent pool freed them.
func (dp *dataParallel) ready(e *Engine) error {
	if len(dp.buckets) > 0 && dp.buckets[0].flat.handle.Live() {
		return nil
	}
	dp.free()
	dp.buckets = nil
	meta, err := ggmlcgo.NewContext(len(dp.params)+3, 0)
	if err != nil {
		return err
	}
	dp.meta = meta
	var group []*Tensor
	var bytes int64
	flush := func(flags int64) error {
		if len(group) == 0 {
			return nil
		}
		b, err := e.newBucket(meta, group, bytes/4, flags)
		if err != nil {
			return err
		}
		dp.buckets = append(dp.buckets, b)
		group, bytes = nil, 0
		return nil
	}
	// In-graph sums take the parameters last first, in smaller buckets.
	params, bound := dp.params, bucketBytes
	if dp.inGraph(e) {
		params, bound = make([]*Tensor, 0, len(dp.params)), graphBucketBytes
		if dp.coll.BucketBytes > 0 {
			bound = dp.coll.BucketBytes
		}
		for i := len(dp.params) - 1; i >= 0; i-- {
			params = append(params, dp.params[i])
		}
	}
	for _, p := range params {
		if n := 4 * p.Numel(); bytes > 0 && bytes+n > bound {
			if err := flush(0); err != nil {
				return err
			}
		}
		group = append(group, p)
		bytes += 4 * p.Numel()
	}
	if err := flush(int64(len(dp.params))); err != nil { // the last bucket carries the used flags
		return err
	}
	dp.flags = dp.buckets[len(dp.buckets)-1].flags
	dp.place, dp.slices = map[*Tensor]slot{}, map[*Tensor]bool{}
	for k, b := range dp.buckets {
		for i, p := range b.params {
			dp.place[p] = slot{k, i, len(dp.place)}
			dp.slices[b.slices[i]] = true
		}
	}
	return nil
}

// newBucket allocates a flat buffer of n elements for params and their
// slices of it, in order, and flags more for the used flags (0: none).
func (e *Engine) newBucket(meta *ggmlcgo.Context, params []*Tensor, n, flags int64) (gradBucket, error) {
	h, err := e.res.Alloc(residency.Request{Shape: []int{int(n + flags)}, Scope: residency.Persistent})
	if err == nil {
		err = h.Zero()
	}
	if err != nil {
		return gradBucket{}, fmt.Errorf("data parallel: gradient bucket: %w", err)
	}
	b := gradBucket{flat: &Tensor{shape: []int{int(n + flags)}, dtype: ggmlcgo.F32, handle: h, engine: e}, params: params}
	flat, err := h.Tensor()
	if err != nil {
		return gradBucket{}, err
	}
	alias := func(shape []int, off int64) (*Tensor, error) {
		v, err := sliceOf(meta, flat, shape, off)
		if err == nil {
			err = v.InitView()
		}
		if err != nil {
			return nil, fmt.Errorf("data parallel: gradient bucket: %w", err)
		}
		return &Tensor{shape: slices.Clone(shape), dtype: ggmlcgo.F32, handle: h.Alias(v, shape), engine: e}, nil
	}
	var off int64
	for _, p := range params {
		sl, err := alias(p.shape, off)
		if err != nil {
			return gradBucket{}, err
		}
		b.slices = append(b.slices, sl)
		b.offs = append(b.offs, off)
		off += p.Numel()
	}
	b.grads = b.flat
	if flags > 0 {
		if b.grads, err = alias([]int{int(n)}, 0); err != nil {
			return gradBucket{}, err
		}
		if b.flags, err = alias([]int{int(flags)}, n); err != nil {
			return gradBucket{}, err
		}
	}
	return b, nil
}

// sliceOf is the view of a bucket's flat f32 buffer (flat, its tensor or
// a node writing it) that holds a gradient of shape from element off.
func sliceOf(c *ggmlcgo.Context, flat ggmlcgo.Tensor, shape []int, off int64) (ggmlcgo.Tensor, error) {
	ne := ne4(shape)
	nb := [ggmlcgo.MaxDims - 1]int64{4 * ne[0], 4 * ne[0] * ne[1], 4 * ne[0] * ne[1] * ne[2]}
	return c.View(flat, ne, nb, 4*off)
}

// NoSync runs fn with the gradients' sums held back: a Backward inside adds
// this process's gradients to .grad, and the first Backward after fn
// averages all that accumulated (PyTorch DDP's no_sync: gradient
// accumulation over micro-batches with one collective a step instead of
// one a micro-batch). Without data parallelism it just runs fn.
func (e *Engine) NoSync(fn func() error) error {
	dp := e.dp
	if dp == nil {
		return fn()
	}
	dp.paused++
	defer func() { dp.paused-- }()
	return fn()
}

// averages reports whether this Backward averages across processes.
func (e *Engine) averages() bool { return e.dp != nil && e.dp.paused == 0 }

// averageGrads is the end of Backward under data parallelism (see the top
// of this file).
func (e *Engine) averageGrads() error {
	dp := e.dp
	if err := dp.ready(e); err != nil {
		return err
	}
	for _, b := range dp.buckets {
		for i, p := range b.params {
			g := p.grad
			if g == nil || p.gradZero { // no gradient here: this process adds zeros
				dp.unused = append(dp.unused, unusedGrad{p, p.grad, p.gradZero})
				z, err := e.fillLike(b.slices[i], 0)
				if err != nil {
					return err
				}
				g = z
			}
			if err := e.writeInPlace(b.slices[i], g); err != nil {
				return err
			}
		}
	}
	if err := dp.writeFlags(e); err != nil {
		return err
	}
	if err := e.Realize(); err != nil {
		return err
	}
	// The buckets are summed before the next compute (reduceGrads), not
	// now: the host builds what reads the averages (clipping, the
	// optimizer) while a device still computes the gradients.
	dp.due = true
	return dp.setAverages(e)
}

// writeFlags queues the used flags' write: 1 for each parameter with a
// gradient here, 0 for dp.unused. Summed across the processes with the
// last bucket, a flag is 0 only where no process had a gradient.
func (dp *dataParallel) writeFlags(e *Engine) error {
	var flags *Tensor
	var err error
	if len(dp.unused) == 0 { // the common case: a fill, no upload
		flags, err = e.fillLike(dp.flags, 1)
	} else {
		vals := make([]float32, len(dp.params))
		for i := range vals {
			vals[i] = 1
		}
		for _, u := range dp.unused {
			vals[dp.place[u.p].flag] = 0
		}
		flags, err = e.constants(vals)
	}
	if err != nil {
		return err
	}
	return e.writeInPlace(dp.flags, flags)
}

// keepUnusedGrads gives back their .grad to the parameters that no process
// gave a gradient in this Backward: they had the average of zeros, which
// an optimizer would step with (Adam's moments, weight decay), where one
// process alone leaves them untouched and skips them. PyTorch DDP with
// find_unused_parameters does the same. Finding out takes the sums'
// result, so a process with unused parameters computes its step here; one
// that used them all (the usual case) does not wait.
func (e *Engine) keepUnusedGrads() error {
	dp := e.dp
	unused := dp.unused
	dp.unused = nil
	if len(unused) == 0 {
		return nil
	}
	if err := e.Realize(); err != nil {
		return err
	}
	used, err := dp.flags.Float32s()
	if err != nil {
		return err
	}
	for _, u := range unused {
		if used[dp.place[u.p].flag] == 0 {
			u.p.grad, u.p.gradZero = u.grad, u.zero
		}
	}
	return nil
}

// setAverages queues each parameter's gradient = its bucket slice (the
// sum over the processes) times 1/world.
func (dp *dataParallel) setAverages(e *Engine) error {
	scale := 1 / float32(dp.world)
	for _, b := range dp.buckets {
		for i, p := range b.params {
			avg, err := e.newOp("grad_average", p.shape, []*Tensor{b.slices[i]}, func(c ctx, in []node) (node, error) { return c.Scale(in[0], scale) })
			if err != nil {
				return err
			}
			p.gradZero = true // the average replaces what backward accumulated
			if err := e.accumulateGrad(p, avg); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceGrads sums the buckets across processes, once the graph that
// filled them is done. Realize calls it before computing anything else, so
// every process runs its collectives in the order of its graphs.
func (e *Engine) reduceGrads() error {
	dp := e.dp
	dp.due = false
	e.backend.Wait() // the gradients' graph, so that the time below is the collectives'
	started := time.Now()
	defer func() { e.stats.ReduceTime += time.Since(started) }()
	for _, b := range dp.buckets {
		if err := e.lend(b.flat, true, dp.sum); err != nil {
			return fmt.Errorf("data parallel: averaging gradients: %w", err)
		}
	}
	return nil
}

// FinishCollectives runs the gradients' sums that a backward left for the
// next compute, if any: between computes, or queued in the graph
// (data_parallel_sums.go: then the pending work is computed). A script's
// end calls it (runtime's call): every process must run the same
// collectives, and one whose script ends without another compute would
// leave the others waiting in theirs (a rank 0 that reads the weights to
// save them after the last step, say).
func (e *Engine) FinishCollectives() error {
	if e.dp != nil && e.dp.broken != nil {
		return e.dp.broken
	}
	if err := e.sumsDue(); err != nil {
		return err
	}
	if e.dp != nil && e.dp.queued {
		return e.Realize()
	}
	return nil
}

// sumsDue runs the sums between computes that a backward left for the
// next compute, if any (Realize's first step).
func (e *Engine) sumsDue() error {
	if e.dp == nil || !e.dp.due {
		return nil
	}
	if err := e.reduceGrads(); err != nil {
		// The pending averages would read unsummed buckets: they, and what
		// reads them, go, and so do the gradients (this process's alone,
		// not the average): a later step or read finds none.
		e.dropPending()
		e.dp.dropGrads()
		return err
	}
	return nil
}
