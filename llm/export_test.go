package llm

import "testing"

// Quantize lets the Lua library's tests (package llm_test) make quantized
// models with llama.cpp's quantizer, and Reference run llama.cpp on them.
func Quantize(t *testing.T, in, out, typ string) { findLlamaRef(t).run(t, "--quantize", in, out, typ) }

func Reference(t *testing.T, args ...string) string { return findLlamaRef(t).run(t, args...) }
