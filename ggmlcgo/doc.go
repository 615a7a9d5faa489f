// Package ggmlcgo is gglua's only cgo package: a thin, typed Go face over the
// part of the ggml C API that the project calls.
//
// Its rule is that no call made through it can reach a GGML_ASSERT: ggml
// aborts the whole process on a failed assertion, so every function here
// checks its arguments in Go (dimensions, dtypes, sizes, room left in a
// context or a buffer, stale or nil pointers) and returns an error instead.
//
// The C declarations live in gglua_ggml.h, written by the project, because cgo
// cannot reach the include folder of another Go module. abi_test.go compiles
// that header together with the real headers of the pinned module so that an
// ABI change fails loudly. ggml itself is linked by importing the ollama
// package that compiles it (link_ollama.go); that import is the only place
// that names ollama, so a build tag can later link a system libggml instead.
//
// Values are f32, f16, bf16 or i32; tensors have one to four dimensions. The
// ne arrays here are in ggml's order (innermost first); turning them into
// outermost-first shapes is the job of the packages above.
package ggmlcgo
