// Package core holds gglua's tensors and the engine they run on: one backend
// (the CPU by default) with its residency state.
//
// A Tensor's data lives either on the host (a []float32) or on the engine's
// device, reached through a residency.Handle. Shapes are listed outermost
// first, as in Torch, PyTorch and NumPy; ggml's innermost-first ne never
// leaves the packages below this one.
//
// Autograd, lazy graphs and optimizers build on this package (issue [2]);
// nothing here knows Lua exists.
package core
