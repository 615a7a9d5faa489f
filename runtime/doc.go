// Package runtime embeds gglua in a Go program. A Runtime is one Lua state
// with its own device and residency state; Close frees every device buffer
// it holds.
//
// A worked example: Go makes the data, a script trains on it, Go reads the
// weights back (the whole program is examples/embed).
//
//	rt, err := runtime.New(runtime.Options{Threads: 2, Sandbox: true})
//	if err != nil { ... }
//	defer rt.Close()
//
//	x, _ := core.FromFloat32(xs, n, 3) // shares xs: no copy
//	y, _ := core.FromFloat32(ys, n, 1)
//	rt.SetTensor("x", x)
//	rt.SetTensor("y", y)
//	_, err = rt.DoString(ctx, `
//	    local model = nn.Linear(3, 1)
//	    local opt = optim.adam(model:parameters(), {lr = 0.05})
//	    for epoch = 1, 60 do
//	      for xb, yb in data.loader(x, y, {batch = 32}) do
//	        opt:zero_grad()
//	        backward(with_grad_tape(function() return nn.mse_loss(model(xb), yb) end))
//	        opt:step()
//	      end
//	    end
//	    w = model.weight`)
//	w, _ := rt.Tensor("w")
//	weights, _ := w.Float32s()
//
// Values cross as Go values: numbers are float64, strings, booleans,
// sequences []any, other tables map[string]any and tensors *core.Tensor
// (Register and SetGlobal take the same, plus ints and []float32).
//
// Cancelling the context of DoString or DoFile stops the script between Lua
// VM instructions and a graph compute between nodes (on the CPU backend);
// the call returns an error, the work the script had queued is dropped, and
// the runtime stays usable. Sandbox withholds io, os, debug, load*, dofile,
// require, and gglua's own file functions.
//
// Errors keep their Go cause: a script's failure is an *Error whose message
// is the Lua one (file, line, op, shapes), and errors.Is tells ErrBudget,
// ErrStale, ErrShape, ErrArgument, context.Canceled and
// context.DeadlineExceeded apart without reading that message.
//
// Runtimes are independent: several may run in parallel goroutines. One
// Runtime is used by one goroutine at a time.
package runtime
