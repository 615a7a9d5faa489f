// Package luabind exposes gglua's core to Lua 5.1 (gopher-lua). Open
// installs these globals:
//
//	tensor          the tensor userdata's library: tensor{...}, constructors, every
//	                method (tensor.go lists them all in two sorted tables), save/load
//	to_gpu, to_cpu  residency moves (residency.go)
//	residency       stats, reset, limit of the two pools (residency.go)
//	with_grad_tape, no_grad, autocast, backward, detect_anomaly, sync
//	                autograd (autograd.go)
//	nn              losses in Go (losses.go), modules in Lua (nn.lua)
//	optim           sgd, adam, adamw, clipping (optim.go), lr_scheduler (lr_scheduler.go)
//	device          list, use, current, clock (device.go)
//	data            csv, loader (data.go)
//	progress        progress bars (progress.go)
//
// Each library is one sorted table of named functions, so its whole Lua
// surface reads in one place; the bindings only read arguments (args.go:
// checkTensor, optDim, readOpts for options tables) and call core, where
// all the math is.
//
// Every function validates its Lua arguments and raises a Lua error that
// names the function, what it expected and what it was given; nothing a
// script passes can reach ggml unchecked. A Go error raised to Lua keeps its
// chain: Env.Cause gives it back to the runtime, so a host can test it with
// errors.Is. Indices and dims are 1-based here, as in Torch7.
package luabind
