// Package runtime embeds gglua in a Go program. A Runtime is one Lua state
// with its own device and residency state:
//
//	rt, err := runtime.New(runtime.Options{Device: "cpu", Threads: 2})
//	if err != nil { ... }
//	defer rt.Close()
//	vals, err := rt.DoString(ctx, `return to_gpu(tensor{{1,2},{3,4}}, "persistent"):scope()`)
//
// Runtimes are independent: several may run in parallel goroutines. One
// Runtime is used by one goroutine at a time.
package runtime
