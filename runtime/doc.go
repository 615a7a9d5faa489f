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
// tables whose keys are positive integers (at least half of 1..n; a hole
// is a nil element, and a nil element of a Go slice a hole) []any, other
// tables map[string]any with every key, and tensors *core.Tensor (Register
// and SetGlobal take the same, plus ints and []float32). Keys that are one
// string in Go (1 and "1", true and "true") and tables or functions as
// keys are refused (ErrConvert). A table
// reached from several places (in one result list, or one argument list)
// converts once, and every place gets the same Go slice or map; a Go slice
// or map reached twice becomes one Lua table. A table that contains itself
// (a cycle), nesting deeper than 100, or more than 2^24 values in all is
// an error that errors.Is tells as ErrConvert: DoString returns it, and a
// Register'd function is not called (the script gets a Lua error). The
// walk stops with the call's context.
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
// VM instructions, inside string.find, match, gmatch and gsub (a
// backtracking pattern is stopped every few thousand steps), and a graph
// compute between nodes (on the CPU backend; a 2-d matrix product of more
// than 2^29 multiply-adds is built from blocks of rows, with the same
// values, so that it stops within about 2^28 multiply-adds); the call
// returns an error, the work the script had queued is dropped, and the
// runtime stays usable. What does not stop: one library call that does not
// look at the context (table.sort with a comparator of its own looks only
// between comparisons, a batched or backward product and the OpenBLAS path
// run as one node, a GPU compute runs to its end), and one instruction such
// as s .. s, which copies the whole string.
//
// Sandbox withholds io, os, debug, load*, dofile, require, and gglua's own
// file functions, and bounds what a script can take:
//   - HostLimit (1 GiB by default in a sandbox): host tensors;
//   - HeapLimit (2 GiB): the Go heap one call may add, which holds Lua's
//     strings, tables and coroutines and host tensors' values. A watchdog
//     samples the heap every few milliseconds while the call runs and ends
//     it with ErrMemory; the heap counts garbage not yet collected, so it
//     collects before it decides (watchdog.go);
//   - string.rep, string.gsub, string.format and table.concat make at most
//     64 MiB (a bigger result is an ErrMemory); unpack and string.byte push
//     at most 8000 values (Lua 5.1's own limit); coroutines start with
//     small stacks; pcall and xpcall nest at most 200 deep.
//
// These bounds are soft, and a host that runs untrusted scripts must still
// plan for what they let through:
//   - the heap limit is checked between samples, not at each allocation:
//     one instruction can allocate as much as the script already holds
//     (s = s .. s doubles it at once) and the collector, whose pauses wait
//     for such a copy, holds the watchdog back meanwhile; a call may end
//     with the heap a few times its limit above where it began. Set
//     HeapLimit to a fraction of the memory the host can spare;
//   - the heap is the process's: allocations of the host and of other
//     runtimes running at the same time count against a call's limit, and
//     what a script keeps in its globals between calls is part of the next
//     call's starting point (Close a runtime to free it);
//   - C memory beyond the budgets (ggml's own allocations) and CPU time
//     between two checks are not bounded here.
//
// For a hard guarantee, run untrusted scripts in a process of their own
// with operating-system limits on its memory and CPU (cgroups, RLIMIT_AS, a
// container), and a deadline on every call; the sandbox keeps one script
// from taking that process down in ordinary ways, the OS keeps the process
// from taking the host down.
//
// The Lua is gopher-lua's Lua 5.1, compiled around two of its compiler's
// bugs that gave wrong values with no error (package luacompile: multiple
// assignment, loops whose body begins with a jump), with some of its
// functions replaced. pcall and xpcall run the callee on a Lua thread of
// its own, so a caught error no longer breaks the caller's closures
// (gopher-lua issue #448): results, error objects, positions and
// tracebacks are as before; coroutine.yield inside them is an error, as in
// Lua 5.1; they nest at most 200 deep, as in Lua 5.1 (pcall.go).
// math.random and math.randomseed use a generator of the runtime's own,
// seeded 0 when the runtime starts, so a script with the same seeds draws
// the same numbers; a bound that is not an integer is an error
// (random.go). string.find, match, gmatch and gsub run on a matcher that
// stops with the context, match by match (strpattern.go); string.format
// and string.byte are Lua 5.1's (gopher-lua's format was Go's Sprintf:
// "%!d(MISSING)" for a missing argument, every digit for %g), and
// table.concat joins in one pass (strformat.go, stdlib.go). Each is
// checked against the lua5.1 interpreter's answers; the differences: a
// malformed pattern is an error as soon as it is seen, a replacement
// ending in a lone '%' is an error, and %s formats any value as tostring
// does (Lua 5.2's reading).
//
// Errors keep their Go cause: a script's failure is an *Error whose message
// is the Lua one (file, line, op, shapes), and errors.Is tells ErrBudget,
// ErrStale, ErrShape, ErrArgument, ErrMemory, ErrConvert, context.Canceled
// and context.DeadlineExceeded apart without reading that message.
//
// Runtimes are independent: several may run in parallel goroutines. One
// Runtime runs one call at a time: DoString, DoFile, SetGlobal, SetTensor,
// Tensor or Register while a call runs returns ErrBusy (a function given
// to Register too: it takes and returns values), and Close from another
// goroutine cancels the running call (it returns ErrClosed) and waits for
// it.
package runtime
