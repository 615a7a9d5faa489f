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
// A model's Tokenizer is the file's (tokenizer.ggml.*): SentencePiece, or
// byte-level BPE with the GPT-2 or the Llama 3 pre-tokenizer. Tokenize and
// Detokenize give what llama.cpp's llama_tokenize and llama_detokenize
// give, checked on llama.cpp's own test vectors and on random texts
// (broken UTF-8 included) against its library. Token ids are llama.cpp's
// (0-based, as in the file's vocabulary); the Lua library adds 1 to show
// them as gglua's 1-based indices.
//
// # Generation
//
// Generate computes the prompt's positions at once, then one token at a
// time, each reading the earlier positions' keys and values from a cache
// in the persistent pool; greedy at temperature 0 (llama.cpp's tokens, on
// the CPU), otherwise top-k, top-p and temperature in llama.cpp's order.
//
// # Fine-tuning
//
// A model's f32, f16 and bf16 weights are parameters (Parameters), as a
// PyTorch model's; LoadOptions.DType dequantizes a quantized file's
// matrices at load for a full fine-tune. AddLoRA attaches LoRA adapters beside the frozen, possibly quantized,
// weights; an ordinary training loop (WithGradTape, Backward, an
// optimizer over LoRA.Parameters) trains them, the gradient flowing back
// through the quantized products to their inputs. LoRA.Save writes
// llama.cpp's adapter GGUF, with which llama.cpp computes the logits gglua
// computes; Model.Save writes the whole model, adapters merged, in the
// types it was read in or quantized anew.
package llm
