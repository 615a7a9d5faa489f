// Package llm runs the language models of llama.cpp's GGUF files on gglua's
// core: a llama-family model's weights, quantized ones kept quantized, its
// forward pass to logits, checked against llama.cpp itself.
//
// # Files
//
// Load reads a model written by llama.cpp's tools (general.architecture
// "llama": Llama, Mistral, TinyLlama and the other models of that shape),
// its weights in f32, f16, bf16 or the quantized types ggmlcgo.Type names
// (a q4_k_m file's mix included). Every key and tensor is checked before it
// is used: an unknown architecture, a missing key, a tensor of the wrong
// shape or type is an error naming it.
//
// # Tokens
//
// Token ids are llama.cpp's (0-based, as in the file's vocabulary); the Lua
// library adds 1 to show them as gglua's 1-based indices.
package llm
