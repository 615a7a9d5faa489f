package llm

import (
	"fmt"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// Model is a llama-family language model on an engine: its weights in the
// persistent pool, quantized ones as the file stores them.
type Model struct {
	Config
	e       *core.Engine
	tokens  *core.Tensor // token_embd.weight [Vocab, Embd]
	outNorm *core.Tensor // output_norm.weight [Embd]
	output  *core.Tensor // output.weight [Vocab, Embd], or tokens where the file ties them
	layers  []layer
	// Tokenizer is the file's tokenizer; nil where the file has none.
	Tokenizer *Tokenizer
	cache     *kvCache // generate's, made by its first call
	lora      *LoRA    // the adapters AddLoRA attached, if any
	// Training turns the adapters' dropout on (as nn.Module's train()).
	Training bool
	weights  []Named // every tensor by llama.cpp's name, in the file's order of roles
}

// Named is a model tensor and its name in llama.cpp's files.
type Named struct {
	Name   string
	Tensor *core.Tensor
}

// LoadOptions are Load's settings.
type LoadOptions struct {
	// DType, if set ("f32", "f16" or "bf16"), is the type every matrix is
	// kept in, dequantized or converted at load: a model to fine-tune in
	// full. "" keeps each as the file stores it.
	DType string
}

// layer is one transformer block's weights (llama.cpp's blk.N names).
type layer struct {
	attnNorm, q, k, v, o    *core.Tensor // attn_norm, attn_q, attn_k, attn_v, attn_output
	ffnNorm, gate, up, down *core.Tensor
}

// matrices are a layer's matrices by llama.cpp's names, sorted: what
// adapters may target, in the order AddLoRA makes them.
var matrices = []string{"attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up"}

// weight is the layer's matrix by llama.cpp's name (nil for another name).
func (l *layer) weight(name string) *core.Tensor {
	switch name {
	case "attn_q":
		return l.q
	case "attn_k":
		return l.k
	case "attn_v":
		return l.v
	case "attn_output":
		return l.o
	case "ffn_gate":
		return l.gate
	case "ffn_up":
		return l.up
	case "ffn_down":
		return l.down
	}
	return nil
}

// Load reads the llama-family model at path onto e. Its weights of f32,
// f16 or bf16 are parameters, trainable as a PyTorch model's are (AddLoRA
// freezes them); quantized ones are never trainable.
func Load(e *core.Engine, path string, opts ...LoadOptions) (*Model, error) {
	var o LoadOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	var dtype ggmlcgo.Type
	if o.DType != "" {
		var err error
		if dtype, err = ggmlcgo.ParseType(o.DType); err != nil || dtype == ggmlcgo.I32 {
			return nil, fmt.Errorf("llm.load: dtype %q: expected f32, f16 or bf16 (a quantized type is kept as the file stores it)", o.DType)
		}
	}
	g, err := ggmlcgo.OpenGGUF(path)
	if err != nil {
		return nil, fmt.Errorf("llm.load: %w", err)
	}
	defer g.Close()
	c, err := readConfig(g)
	if err != nil {
		return nil, fmt.Errorf("llm.load: %s: %w", path, err)
	}
	infos := map[string]ggmlcgo.GGUFTensorInfo{}
	for _, info := range g.Tensors() {
		infos[info.Name] = info
	}
	m := &Model{Config: c, e: e}
	read := func(name string, shape ...int) (*core.Tensor, error) {
		info, ok := infos[name]
		if !ok {
			return nil, fmt.Errorf("tensor %s is missing", name)
		}
		delete(infos, name)
		if !info.Type.Quantized() && info.Type != ggmlcgo.F32 && info.Type != ggmlcgo.F16 && info.Type != ggmlcgo.BF16 {
			return nil, fmt.Errorf("tensor %s has type %v, which gglua does not read (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K)", name, info.Type)
		}
		want := [ggmlcgo.MaxDims]int64{1, 1, 1, 1}
		for i, d := range shape {
			want[len(shape)-1-i] = int64(d)
		}
		if info.Ne != want {
			return nil, fmt.Errorf("tensor %s has ne %v, expected %v for this model's shape", name, info.Ne, want)
		}
		raw, err := g.ReadTensor(info)
		if err != nil {
			return nil, err
		}
		typ := info.Type
		if o.DType != "" && len(shape) == 2 && typ != dtype {
			v, err := ggmlcgo.Decode(typ, raw, int64(shape[0])*int64(shape[1]))
			if err == nil {
				raw, err = ggmlcgo.Encode(dtype, v, int64(shape[1]))
			}
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", name, err)
			}
			typ = dtype
		}
		t, err := e.Weight(raw, typ, shape)
		if err == nil && !t.IsQuantized() {
			t.MarkParam()
			err = t.SetRequiresGrad(true)
		}
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		m.weights = append(m.weights, Named{name, t})
		return t, nil
	}
	// The vocabulary's size is the token table's rows.
	if info, ok := infos["token_embd.weight"]; ok {
		if v := info.Ne[1]; v >= 1 && v <= limit {
			c.Vocab, m.Vocab = int(v), int(v)
		}
	}
	if m.Vocab == 0 {
		return nil, fmt.Errorf("llm.load: %s: tensor token_embd.weight is missing or has no rows", path)
	}
	if m.Tokenizer, err = readTokenizer(g, m.Vocab); err != nil {
		return nil, fmt.Errorf("llm.load: %s: %w", path, err)
	}
	kv := c.HeadsKV * c.HeadDim
	var errs []error
	must := func(t *core.Tensor, err error) *core.Tensor {
		if err != nil {
			errs = append(errs, err)
		}
		return t
	}
	m.tokens = must(read("token_embd.weight", c.Vocab, c.Embd))
	m.outNorm = must(read("output_norm.weight", c.Embd))
	if _, ok := infos["output.weight"]; ok {
		m.output = must(read("output.weight", c.Vocab, c.Embd))
	} else {
		m.output, m.Tied = m.tokens, true
	}
	for i := 0; i < c.Layers && len(errs) == 0; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		m.layers = append(m.layers, layer{
			attnNorm: must(read(p+"attn_norm.weight", c.Embd)),
			q:        must(read(p+"attn_q.weight", c.Embd, c.Embd)),
			k:        must(read(p+"attn_k.weight", kv, c.Embd)),
			v:        must(read(p+"attn_v.weight", kv, c.Embd)),
			o:        must(read(p+"attn_output.weight", c.Embd, c.Embd)),
			ffnNorm:  must(read(p+"ffn_norm.weight", c.Embd)),
			gate:     must(read(p+"ffn_gate.weight", c.FFN, c.Embd)),
			up:       must(read(p+"ffn_up.weight", c.FFN, c.Embd)),
			down:     must(read(p+"ffn_down.weight", c.Embd, c.FFN)),
		})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("llm.load: %s: %w", path, errs[0])
	}
	// llama.cpp's rope frequency table (rope_freqs.weight) and other extra
	// tensors change the model's values: refused rather than ignored.
	for name := range infos {
		return nil, fmt.Errorf("llm.load: %s: tensor %s is not one gglua's llama model uses", path, name)
	}
	return m, nil
}

// Tokenize is the model's tokenizer's Tokenize, or an error where the
// file has no tokenizer.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int, error) {
	if m.Tokenizer == nil {
		return nil, fmt.Errorf("tokenize: this model's file has no tokenizer (tokenizer.ggml.model)")
	}
	return m.Tokenizer.Tokenize(text, addSpecial, parseSpecial)
}

// Detokenize is the model's tokenizer's Detokenize, or an error where the
// file has no tokenizer.
func (m *Model) Detokenize(ids []int) (string, error) {
	if m.Tokenizer == nil {
		return "", fmt.Errorf("detokenize: this model's file has no tokenizer (tokenizer.ggml.model)")
	}
	return m.Tokenizer.Detokenize(ids)
}

// Parameters are the model's trainable tensors, as a PyTorch model's
// parameters(): its f32, f16 and bf16 weights (frozen once adapters are
// attached), then the adapters' matrices. Quantized weights are not among
// them.
func (m *Model) Parameters() []*core.Tensor {
	var ps []*core.Tensor
	for _, w := range m.weights {
		if !w.Tensor.IsQuantized() {
			ps = append(ps, w.Tensor)
		}
	}
	if m.lora != nil {
		ps = append(ps, m.lora.Parameters()...)
	}
	return ps
}

// StateDict is every tensor of the model by its name in llama.cpp's files
// (token_embd.weight, blk.0.attn_q.weight, ...), the adapters' as
// llama.cpp's adapter files name them (blk.0.attn_q.weight.lora_a).
func (m *Model) StateDict() []Named {
	out := append([]Named(nil), m.weights...)
	if m.lora != nil {
		for _, n := range m.lora.names {
			out = append(out, Named{n + ".weight.lora_a", m.lora.pairs[n].a}, Named{n + ".weight.lora_b", m.lora.pairs[n].b})
		}
	}
	return out
}
