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
//	x, _ := core.FromFloat32(xs, n, 3)
//	y, _ := core.FromFloat32(ys, n, 1)
//	rt.SetTensor("x", x) // the script gets a copy of xs
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
// A host tensor going into a script (SetTensor, SetGlobal, a Register'd
// function's result) is copied: its values, dtype and requires_grad. Go
// may rewrite the slice it gave core.FromFloat32 at any time; the script
// never sees those writes (a pass keeps its upload of a host tensor, so a
// shared slice would show old values in one expression and new ones in the
// next), and the script's in-place changes stay in its copy: read them with
// Tensor. Pass new values with another SetTensor. A device tensor is shared.
// Tensors coming out of a script (DoString's results, Tensor, a Register'd
// function's arguments) are the script's own, not copies.
//
// Cancelling the context of DoString or DoFile stops the script between Lua
// VM instructions and a graph compute between nodes (on the CPU backend);
// the call returns an error, the work the script had queued is dropped, and
// the runtime stays usable. Sandbox withholds io, os, debug, load*, dofile,
// require, and gglua's own file functions.
//
// The Lua is gopher-lua's Lua 5.1 with two of its functions replaced.
// pcall and xpcall run the callee on a Lua thread of its own, so a caught
// error no longer breaks the caller's closures (gopher-lua issue #448):
// results, error objects, positions and tracebacks are as before;
// coroutine.yield inside them is an error, as in Lua 5.1; they nest at most
// 200 deep, as in Lua 5.1 (pcall.go). math.random and math.randomseed use
// a generator of the runtime's own, seeded 0 when the runtime starts, so a
// script with the same seeds draws the same numbers; a bound that is not an
// integer is an error (random.go).
//
// Errors keep their Go cause: a script's failure is an *Error whose message
// is the Lua one (file, line, op, shapes), and errors.Is tells ErrBudget,
// ErrStale, ErrShape, ErrArgument, context.Canceled and
// context.DeadlineExceeded apart without reading that message.
//
// Runtimes are independent: several may run in parallel goroutines. One
// Runtime is used by one goroutine at a time.
package runtime
