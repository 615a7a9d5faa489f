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

// SaveType is what Save writes each matrix in: each in the type it was
// read in (the zero SaveType), every one in one type (SaveAs), or
// llama.cpp's q4_k_m mixture (Q4KM: the type its llama_model_quantize
// gives each).
type SaveType struct {
	Type ggmlcgo.Type // with Set
	Set  bool
	Q4KM bool
}

// SaveAs is the SaveType of one type for every matrix.
func SaveAs(t ggmlcgo.Type) SaveType { return SaveType{Type: t, Set: true} }

// fileTypeQ4KM is llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M.
const fileTypeQ4KM = 15

// ParseSaveType reads a Save type's name: f32, f16, bf16, q8_0, q4_0,
// q4_1, q5_0, q5_1, q4_K, q5_K, q6_K (every matrix in that type) or
// q4_k_m (llama-quantize's mixture; its Q4_K is that mixture too, gglua's
// q4_K is not).
func ParseSaveType(name string) (SaveType, error) {
	if strings.EqualFold(name, "q4_k_m") {
		return SaveType{Q4KM: true}, nil
	}
	for t := range saveTypes {
		if strings.EqualFold(t.String(), name) {
			return SaveAs(t), nil
		}
	}
	return SaveType{}, fmt.Errorf("save: dtype %q is not one gglua writes (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, q4_k_m)", name)
}

// typeOf is the type Save writes matrix name of ne0 columns, stored as
// stored, in.
func (st SaveType) typeOf(c Config, name string, ne0 int64, stored ggmlcgo.Type) ggmlcgo.Type {
	switch {
	case st.Q4KM:
		return q4KMType(c, name, ne0)
	case st.Set:
		return st.Type
	}
	return stored
}

// q4KMType is llama.cpp's choice for a llama-architecture matrix under
// q4_k_m (llama_tensor_get_type, no importance matrix): q6_K for the
// output (q8_0 where its rows are not whole q6_K blocks), and for the
// value projections and down projections of the layers use_more_bits
// picks (the first and last eighth, and every third between), q5_K for
// the other value projections of a 70B (80 layers, grouped-query), q4_K
// for the rest; a type whose blocks do not divide the rows falls back as
// llama.cpp's tensor_type_fallback does, to f16 at last.
func q4KMType(c Config, name string, ne0 int64) ggmlcgo.Type {
	moreBits := func(i int) bool { return i < c.Layers/8 || i >= 7*c.Layers/8 || (i-c.Layers/8)%3 == 2 }
	layer := -1
	var role string
	if _, err := fmt.Sscanf(name, "blk.%d.", &layer); err == nil {
		role = strings.TrimSuffix(strings.TrimPrefix(name, fmt.Sprintf("blk.%d.", layer)), ".weight")
	}
	typ := ggmlcgo.Q4_K
	switch {
	case name == "output.weight" || c.Tied && name == "token_embd.weight":
		typ = ggmlcgo.Q6_K
		if ne0%typ.BlockSize() != 0 {
			typ = ggmlcgo.Q8_0
		}
	case (role == "attn_v" || role == "ffn_down") && moreBits(layer):
		typ = ggmlcgo.Q6_K
	case role == "attn_v" && c.Layers == 80 && c.HeadsKV != c.Heads: // llama.cpp's LLM_TYPE_70B
		typ = ggmlcgo.Q5_K
	}
	if ne0%typ.BlockSize() == 0 {
		return typ
	}
	if fallback, ok := map[ggmlcgo.Type]ggmlcgo.Type{ggmlcgo.Q4_K: ggmlcgo.Q5_0, ggmlcgo.Q5_K: ggmlcgo.Q5_1, ggmlcgo.Q6_K: ggmlcgo.Q8_0}[typ]; ok && ne0%fallback.BlockSize() == 0 {
		return fallback
	}
	return ggmlcgo.F16
}

// Save writes the model as a GGUF file llama.cpp loads: its shape, its
// tokenizer and its weights, with any LoRA adapters merged into the
// weights they adapt (W + alpha/r·B·A). Each matrix is written in the
// type st gives it (quantized by ggml's quantizer, as llama_model_quantize
// does without an importance matrix); kept in the type it was read in, a
// weight neither merged nor converted is written as its very bytes. The
// norms' vectors stay f32, as llama.cpp keeps them.
func (m *Model) Save(path string, st SaveType) error {
	if _, ok := saveTypes[st.Type]; st.Set && (!ok || st.Q4KM) {
		return fmt.Errorf("save: dtype %v is not one gglua writes (or is given beside q4_k_m)", st.Type)
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
	switch {
	case st.Q4KM:
		w.SetU32("general.file_type", fileTypeQ4KM)
	case st.Set:
		w.SetU32("general.file_type", saveTypes[st.Type])
	}
	if m.Tokenizer != nil {
		m.Tokenizer.write(w)
	}
	for _, t := range m.weights { // every tensor Load read, by its name
		shape, stored := t.Tensor.Shape(), t.Tensor.Dtype()
		typ := st.typeOf(m.Config, t.Name, int64(shape[len(shape)-1]), stored)
		if t.Tensor.Dim() == 1 {
			typ = ggmlcgo.F32
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
