// Package residency keeps tensors resident on a compute device in two pools
// with different lifetimes, so that a training loop's weights stay on the
// device between steps while its activations are freed every step.
//
//   - The pass pool holds activations and temporaries. It is reset at the start
//     of every training step (with_grad_tape).
//   - The persistent pool holds weights, gradients and optimizer moments. A
//     persistent (or full) reset frees it whole; besides, the memory of a
//     persistent tensor whose Handle is no longer reachable goes back to the
//     pool (see below), so optimizers and modules made again and again (a
//     REPL, a sweep) do not pile up.
//
// Each pool owns its ggml contexts and backend buffers. Tensors are placed
// into a few large buffers ("arenas", growing geometrically) rather than one
// buffer each, first fit into each arena's free regions (at first one region,
// the whole buffer), and a reset frees them all at once. Tensor descriptions
// live in metadata contexts of the pool, apart from the buffers.
//
// Taking memory back: the State holds a weak pointer to each persistent
// Handle. Once the garbage collector has found a handle unreachable, its
// region returns to its arena's free list (merged with free neighbours) the
// next time the State looks (Ledger, or an allocation that finds no room):
// all on the owner's goroutine, so nothing runs concurrently with it. Before
// a persistent arena is added, a collection is forced when enough was placed
// since the last (Go's pacer does not see device memory), and before an
// allocation is refused by the budget. An arena left empty is freed, unless
// it is the newest. A region is never reused while a graph may still read
// it: Handle.Tensor pins the handle until Computed (core calls it once its
// pending work has run or been dropped) or a pass reset; an Alias keeps its
// parent reachable. A metadata context is freed once it describes no live
// tensor and the pass pool was reset since (graph nodes built in that pass
// may point at the descriptions).
//
// Each pool has a generation counter that a reset advances. A Handle records
// the pool and generation it was allocated in, and is live only while its
// own pool is still at that generation: a pass reset never makes a persistent
// handle look stale, and no reset can make a dead handle look live again.
// A stale handle is never passed to ggml: reading it returns its cached host
// copy, if it has one, or an error naming the pool whose reset freed it.
//
// The Ledger reports both pools (PFreeBytes: the persistent pool's bytes no
// tensor uses) and the host<->device traffic; the budget (SetLimit) counts
// the buffers of both pools, free regions included, and is checked whenever
// a buffer is added; a tensor placed in a free region needs no more.
//
// This design, and the properties its tests pin down, come from the
// residency tests of the R package ggmlR; residency_test.go ports each of
// them under its original name.
// A State is used by one goroutine at a time.
package residency
