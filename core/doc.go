// Package core holds gglua's tensors, their ops and gradients, the tape, lazy
// realization and the optimizers. Nothing here knows Lua exists.
//
// An Engine is one backend (the CPU by default) with its residency state. A
// Tensor's data lives on the host (a []float32) or on the engine's device,
// reached through a residency.Handle. Shapes are listed outermost first, as
// in Torch, PyTorch and NumPy; ggml's innermost-first ne never leaves the
// packages below this one.
//
// Lazy realization. An op (an Engine method: Add, Linear, Softmax, ...)
// checks its operands and adds a ggml node; nothing is computed until a
// value is needed (Float32s, Item, Realize, a pass reset). Then everything
// pending runs as one graph whose results are placed in the pass pool and
// turned into leaves, so later graphs read them without recomputing their
// ancestry. A standard training step,
//
//	opt.ZeroGrad()
//	e.WithGradTape(forward)   // resets the pass pool, records
//	e.Backward(loss)          // gradient nodes, made of ggml ops
//	opt.Step()                // in-place updates of the persistent weights
//	loss.Item()               // one graph: forward + backward + update
//
// computes one graph. GGLUA_EAGER=1 (or SetEager) computes every op at once.
// On an asynchronous device (a GPU; ggmlcgo's async.go) Backward first
// queues the forward and the loss's read queues the rest and waits only for
// the forward: two graphs, each overlapping the host's building of the next.
//
// The tape. Inside WithGradTape every op whose operand requires grad records
// a gradFn: where its inputs' gradients go (their gradFns, or a leaf's) and
// how to map the output's gradient to theirs. The tape holds no input's
// value: a gradFn's closure captures what its gradient reads (as PyTorch's
// saved tensors), so the forward's graph keeps only those activations and
// the ones a script still holds (pass_memory.go's dropUnreachable).
// Backward walks them in reverse topological order, sums the gradients of a
// tensor used several times (joins a chunk's with cat), and adds the leaves'
// gradients to their .grad (a persistent buffer, written in place, for
// resident parameters).
// Gradients are checked by Gradcheck (central differences) and, in the
// tests, against values worked out independently.
//
// Optimizers (SGD, Adam, AdamW) build their updates from the same ops, so the
// update runs inside the step's graph; their state lives in the persistent
// pool and step-dependent numbers are baked into the graph, so a step
// uploads nothing but its batch.
package core
