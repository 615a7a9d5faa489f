package llm

import (
	"fmt"
	"math"
	"slices"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// LoRA adapters (Hu et al., as Hugging Face PEFT and llama.cpp apply
// them): beside a frozen weight W [out, in], possibly quantized, two
// trainable f32 matrices A [r, in] and B [out, r]; the layer computes
// W·x + (alpha/r)·B·A·dropout(x). B starts at zero, so a new adapter
// changes nothing until trained; A starts as PEFT's (Kaiming-uniform).

// LoRAOptions are an adapter's settings, named as PEFT's.
type LoRAOptions struct {
	R       int      // rank (PEFT's r)
	Alpha   float64  // lora_alpha: the update is scaled by Alpha/R
	Dropout float64  // lora_dropout on the adapter's input, in training
	Targets []string // the weights adapted, llama.cpp's names (attn_q, ffn_down, ...)
}

// LoRA is a model's adapters: one pair of matrices per targeted weight of
// each layer.
type LoRA struct {
	LoRAOptions
	m     *Model
	pairs map[string]*loraPair // by llama.cpp's tensor name, blk.N.attn_q
	names []string             // the tensor names, in the model's order
}

type loraPair struct{ a, b *core.Tensor }

// AddLoRA attaches adapters to the model's targeted weights (replacing
// any it had); its forward passes use them from now on.
func (m *Model) AddLoRA(o LoRAOptions) (*LoRA, error) {
	if o.R < 1 || o.R > min(m.Embd, 1<<16) {
		return nil, fmt.Errorf("lora: r is %d: expected 1 to %d", o.R, min(m.Embd, 1<<16))
	}
	if !(o.Dropout >= 0 && o.Dropout < 1) || math.IsNaN(o.Alpha) || math.IsInf(o.Alpha, 0) {
		return nil, fmt.Errorf("lora: dropout %g, alpha %g: expected 0 <= dropout < 1 and a finite alpha", o.Dropout, o.Alpha)
	}
	if len(o.Targets) == 0 {
		return nil, fmt.Errorf("lora: no targets (expected some of %v)", matrices)
	}
	for _, t := range o.Targets {
		if !slices.Contains(matrices, t) {
			return nil, fmt.Errorf("lora: target %q is not one of %v", t, matrices)
		}
	}
	for _, w := range m.weights { // the base is frozen, as PEFT's
		if !w.Tensor.IsQuantized() {
			if err := w.Tensor.SetRequiresGrad(false); err != nil {
				return nil, fmt.Errorf("lora: %w", err)
			}
		}
	}
	l := &LoRA{LoRAOptions: o, m: m, pairs: map[string]*loraPair{}}
	l.Targets = slices.Clone(o.Targets)
	rng := m.e.Rand()
	for i := range m.layers {
		for _, target := range matrices {
			if !slices.Contains(o.Targets, target) {
				continue
			}
			w := m.layers[i].weight(target)
			out, in := w.Shape()[0], w.Shape()[1]
			bound := 1 / math.Sqrt(float64(in)) // kaiming_uniform_(a=sqrt(5)), PEFT's init of A
			a := make([]float32, o.R*in)
			for j := range a {
				a[j] = float32((2*rng.Float64() - 1) * bound)
			}
			p, err := l.newPair(a, make([]float32, out*o.R), in, out)
			if err != nil {
				return nil, err
			}
			name := fmt.Sprintf("blk.%d.%s", i, target)
			l.pairs[name] = p
			l.names = append(l.names, name)
		}
	}
	m.lora = l
	return l, nil
}

// newPair places A [r, in] and B [out, r] in the persistent pool as
// trainable parameters.
func (l *LoRA) newPair(a, b []float32, in, out int) (*loraPair, error) {
	p := &loraPair{}
	for _, x := range []struct {
		dst   **core.Tensor
		v     []float32
		shape []int
	}{{&p.a, a, []int{l.R, in}}, {&p.b, b, []int{out, l.R}}} {
		t, err := core.FromFloat32(x.v, x.shape...)
		if err == nil {
			err = t.MoveToDevice(l.m.e, residency.Persistent)
		}
		if err == nil {
			err = t.SetRequiresGrad(true)
		}
		if err != nil {
			return nil, fmt.Errorf("lora: %w", err)
		}
		*x.dst = t
	}
	return p, nil
}

// Parameters are the adapters' matrices, A then B of each weight in the
// model's order: what an optimizer trains.
func (l *LoRA) Parameters() []*core.Tensor {
	var ps []*core.Tensor
	for _, n := range l.names {
		ps = append(ps, l.pairs[n].a, l.pairs[n].b)
	}
	return ps
}

// scale is the factor of the adapters' update (llama.cpp: 1 for alpha 0).
func (l *LoRA) scale() float32 {
	if l.Alpha == 0 {
		return 1
	}
	return float32(l.Alpha / float64(l.R))
}

// Save writes the adapters as llama.cpp's LoRA adapter GGUF (its
// llama_adapter_lora_init reads it): general.type "adapter", adapter.type
// "lora", adapter.lora.alpha, and X.weight.lora_a [r, in] and
// X.weight.lora_b [out, r] for each adapted weight X.
func (l *LoRA) Save(path string) error {
	w := ggmlcgo.NewGGUFWriter()
	defer w.Free()
	w.SetString("general.architecture", "llama")
	w.SetString("general.type", "adapter")
	w.SetString("adapter.type", "lora")
	w.SetF32("adapter.lora.alpha", float32(l.Alpha))
	for _, n := range l.names {
		for _, t := range []struct {
			suffix string
			x      *core.Tensor
		}{{".weight.lora_a", l.pairs[n].a}, {".weight.lora_b", l.pairs[n].b}} {
			raw, err := encodeAs(t.x, ggmlcgo.F32)
			if err != nil {
				return fmt.Errorf("lora:save: %w", err)
			}
			shape := t.x.Shape()
			if err := w.AddTensor(n+t.suffix, ggmlcgo.F32, []int64{int64(shape[1]), int64(shape[0])}, raw); err != nil {
				return fmt.Errorf("lora:save: %w", err)
			}
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("lora:save: %w", err)
	}
	return nil
}

// adapted is x times the weight of layer i named target, plus the
// adapter's update where the model has one for it.
func (f *forward) adapted(i int, target string, x *core.Tensor) *core.Tensor {
	y := f.do(func() (*core.Tensor, error) { return f.e.Linear(x, f.m.layers[i].weight(target)) })
	l := f.m.lora
	if l == nil {
		return y
	}
	p := l.pairs[fmt.Sprintf("blk.%d.%s", i, target)]
	if p == nil {
		return y
	}
	in := x
	if l.Dropout > 0 && f.m.Training {
		in = f.do(func() (*core.Tensor, error) { return f.e.Dropout(x, l.Dropout, true) })
	}
	z := f.do(func() (*core.Tensor, error) { return f.e.Linear(in, p.a) })
	z = f.do(func() (*core.Tensor, error) { return f.e.Linear(z, p.b) })
	z = f.do(func() (*core.Tensor, error) { return f.e.Scale(z, l.scale()) })
	return f.do(func() (*core.Tensor, error) { return f.e.Add(y, z) })
}
