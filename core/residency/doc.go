// Package residency keeps tensors resident on a compute device in two pools
// with different lifetimes, so that a training loop's weights stay on the
// device between steps while its activations are freed every step.
//
//   - The pass pool holds activations and temporaries. It is reset at the start
//     of every training step (with_grad_tape).
//   - The persistent pool holds weights, gradients and optimizer moments. Only an
//     explicit persistent (or full) reset frees it.
//
// Each pool owns its ggml contexts and backend buffers. Tensors are placed
// into a few large buffers ("arenas", growing geometrically) by ggml's linear
// allocator rather than one buffer each, and a reset frees them all at once.
//
// Each pool has a generation counter that a reset advances. A Handle records
// the pool and generation it was allocated in, and is live only while its
// own pool is still at that generation: a pass reset never makes a persistent
// handle look stale, and no reset can make a dead handle look live again.
// A stale handle is never passed to ggml: reading it returns its cached host
// copy, if it has one, or an error naming the pool whose reset freed it.
//
// The Ledger reports both pools and the host<->device traffic; the budget
// (SetLimit) counts both pools and is checked before every allocation.
//
// This design, and the properties its tests pin down, come from the
// residency tests of the R package ggmlR; residency_test.go ports each of
// them under its original name.
// A State is used by one goroutine at a time.
package residency
