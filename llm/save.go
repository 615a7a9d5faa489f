package llm

import (
	"fmt"
	"strings"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// saveTypes are the types Save writes weights in, with llama.cpp's
// general.file_type for a file of that type.
var saveTypes = map[ggmlcgo.Type]uint32{ggmlcgo.F32: 0, ggmlcgo.F16: 1, ggmlcgo.Q4_0: 2, ggmlcgo.Q4_1: 3, ggmlcgo.Q8_0: 7,
	ggmlcgo.Q5_0: 8, ggmlcgo.Q5_1: 9, ggmlcgo.Q4_K: 14, ggmlcgo.Q5_K: 16, ggmlcgo.Q6_K: 18, ggmlcgo.BF16: 32}

// ParseSaveType reads a Save type's name: f32, f16, bf16, q8_0, q4_0,
// q4_1, q5_0, q5_1, q4_K, q5_K or q6_K.
func ParseSaveType(name string) (ggmlcgo.Type, error) {
	for t := range saveTypes {
		if strings.EqualFold(t.String(), name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("save: dtype %q is not one gglua writes (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)", name)
}

// Save writes the model as a GGUF file llama.cpp loads: its shape, its
// tokenizer and its weights, with any LoRA adapters merged into the
// weights they adapt (W + alpha/r·B·A). Each matrix is written in dtype
// (quantized by ggml's quantizer, as llama_model_quantize does without an
// importance matrix), or, for dtype 0, in the type it was read in: a
// weight neither merged nor converted is written as its very bytes. The
// norms' vectors stay f32, as llama.cpp keeps them.
func (m *Model) Save(path string, dtype ggmlcgo.Type) error {
	if _, ok := saveTypes[dtype]; !ok && dtype != 0 {
		return fmt.Errorf("save: dtype %v is not one gglua writes", dtype)
	}
	w := ggmlcgo.NewGGUFWriter()
	defer w.Free()
	c := m.Config
	w.SetString("general.architecture", "llama")
	if c.Name != "" {
		w.SetString("general.name", c.Name)
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"block_count", c.Layers}, {"context_length", c.Context}, {"embedding_length", c.Embd}, {"feed_forward_length", c.FFN},
		{"attention.head_count", c.Heads}, {"attention.head_count_kv", c.HeadsKV}, {"rope.dimension_count", c.RopeDims}} {
		w.SetU32("llama."+k.key, uint32(k.v))
	}
	w.SetF32("llama.rope.freq_base", c.RopeBase)
	w.SetF32("llama.attention.layer_norm_rms_epsilon", c.NormEps)
	if c.RopeScale != 1 {
		w.SetString("llama.rope.scaling.type", "linear")
		w.SetF32("llama.rope.scaling.factor", 1/c.RopeScale)
	}
	if ft, ok := saveTypes[dtype]; ok {
		w.SetU32("general.file_type", ft)
	}
	if m.Tokenizer != nil {
		m.Tokenizer.write(w)
	}
	for _, t := range m.weights { // every tensor Load read, by its name
		typ, stored := dtype, t.Tensor.Dtype()
		if t.Tensor.Dim() == 1 {
			typ = ggmlcgo.F32
		}
		if typ == 0 {
			typ = stored
		}
		merged, err := m.merged(t)
		var raw []byte
		switch {
		case err != nil:
		case merged != nil:
			raw, err = encodeAs(merged, typ)
		case typ != stored:
			raw, err = encodeAs(t.Tensor, typ)
		default: // as read, its very bytes
			raw, _, err = t.Tensor.Stored()
		}
		if err != nil {
			return fmt.Errorf("save: %s: %w", t.Name, err)
		}
		shape := t.Tensor.Shape()
		ne := make([]int64, len(shape))
		for i, d := range shape {
			ne[len(shape)-1-i] = int64(d)
		}
		if err := w.AddTensor(t.Name, typ, ne, raw); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// merged is weight w with its adapter's update added, or nil where it
// has none.
func (m *Model) merged(w Named) (*core.Tensor, error) {
	if m.lora == nil {
		return nil, nil
	}
	p := m.lora.pairs[strings.TrimSuffix(w.Name, ".weight")]
	if p == nil {
		return nil, nil
	}
	var out *core.Tensor
	err := m.e.NoGrad(func() error {
		ba, err := m.e.Matmul(p.b, p.a)
		if err == nil {
			ba, err = m.e.Scale(ba, m.lora.scale())
		}
		if err == nil {
			out, err = m.e.Add(w.Tensor, ba)
		}
		return err
	})
	return out, err
}

// encodeAs is t's values in typ's bytes.
func encodeAs(t *core.Tensor, typ ggmlcgo.Type) ([]byte, error) {
	v, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	return ggmlcgo.Encode(typ, v, int64(t.Shape()[t.Dim()-1]))
}

// write writes the tokenizer's keys (as readTokenizer reads them).
func (v *Tokenizer) write(w *ggmlcgo.GGUFWriter) {
	w.SetString("tokenizer.ggml.model", v.kind)
	if v.pre != "" {
		w.SetString("tokenizer.ggml.pre", v.pre)
	}
	w.SetStrings("tokenizer.ggml.tokens", v.tokens)
	w.SetF32s("tokenizer.ggml.scores", v.scores)
	w.SetI32s("tokenizer.ggml.token_type", v.types)
	if v.merges != nil {
		w.SetStrings("tokenizer.ggml.merges", v.merges)
	}
	if v.BOS >= 0 {
		w.SetU32("tokenizer.ggml.bos_token_id", uint32(v.BOS))
	}
	if v.EOS >= 0 {
		w.SetU32("tokenizer.ggml.eos_token_id", uint32(v.EOS))
	}
	w.SetBool("tokenizer.ggml.add_bos_token", v.addBOS)
	w.SetBool("tokenizer.ggml.add_eos_token", v.addEOS)
	w.SetBool("tokenizer.ggml.add_space_prefix", v.addSpacePrefix)
}
