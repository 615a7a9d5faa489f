// Package luabind exposes gglua's core to Lua 5.1 (gopher-lua): the tensor
// userdata and the global libraries tensor, to_gpu, to_cpu, residency and
// device.
//
// Every function validates its Lua arguments and raises a Lua error that names
// the function, what it expected and what it was given; nothing a script
// passes can reach ggml unchecked. Indices are 1-based here, as in Torch7.
package luabind
