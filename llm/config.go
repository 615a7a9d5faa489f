package llm

import (
	"fmt"
	"math"

	"github.com/gglua/gglua/ggmlcgo"
)

// Config is a llama-family model's shape, from llama.cpp's metadata keys.
type Config struct {
	Name     string  // general.name, if the file has one
	Layers   int     // llama.block_count
	Context  int     // llama.context_length: the positions it was trained on
	Embd     int     // llama.embedding_length
	FFN      int     // llama.feed_forward_length
	Heads    int     // llama.attention.head_count
	HeadsKV  int     // llama.attention.head_count_kv (Heads when absent)
	HeadDim  int     // Embd / Heads
	Vocab    int     // the token embedding's rows
	RopeDims int     // llama.rope.dimension_count (HeadDim when absent)
	RopeBase float32 // llama.rope.freq_base (10000 when absent)
	// RopeScale multiplies positions: 1, or 1/llama.rope.scaling.factor
	// for linear scaling (llama.rope.scaling.type "linear").
	RopeScale float32
	NormEps   float32 // llama.attention.layer_norm_rms_epsilon
	// Tied: the file has no output.weight, the output is the token
	// embedding (read from the tensors, not the metadata).
	Tied bool
}

// limit bounds every count a file may claim: past it, sizes computed from
// them could overflow before a tensor's own shape is checked.
const limit = 1 << 24

func readConfig(g *ggmlcgo.GGUFFile) (Config, error) {
	arch, ok := g.String("general.architecture")
	if !ok {
		return Config{}, fmt.Errorf("general.architecture is missing: not a model file")
	}
	if arch != "llama" {
		return Config{}, fmt.Errorf("architecture %q: gglua reads llama-family models (general.architecture \"llama\")", arch)
	}
	var c Config
	c.Name, _ = g.String("general.name")
	count := func(key string, dst *int, def int) error {
		v, ok := g.Int(key)
		if !ok {
			if def > 0 {
				*dst = def
				return nil
			}
			return fmt.Errorf("%s is missing or not an integer", key)
		}
		if v < 1 || v > limit {
			return fmt.Errorf("%s is %d: expected 1 to %d", key, v, limit)
		}
		*dst = int(v)
		return nil
	}
	for _, k := range []struct {
		key string
		dst *int
	}{{"llama.block_count", &c.Layers}, {"llama.context_length", &c.Context}, {"llama.embedding_length", &c.Embd},
		{"llama.feed_forward_length", &c.FFN}, {"llama.attention.head_count", &c.Heads}} {
		if err := count(k.key, k.dst, 0); err != nil {
			return Config{}, err
		}
	}
	if c.Embd%c.Heads != 0 {
		return Config{}, fmt.Errorf("llama.embedding_length %d is not a multiple of llama.attention.head_count %d", c.Embd, c.Heads)
	}
	c.HeadDim = c.Embd / c.Heads
	if err := count("llama.attention.head_count_kv", &c.HeadsKV, c.Heads); err != nil {
		return Config{}, err
	}
	if c.Heads%c.HeadsKV != 0 {
		return Config{}, fmt.Errorf("llama.attention.head_count %d is not a multiple of llama.attention.head_count_kv %d", c.Heads, c.HeadsKV)
	}
	if err := count("llama.rope.dimension_count", &c.RopeDims, c.HeadDim); err != nil {
		return Config{}, err
	}
	if c.RopeDims != c.HeadDim { // as llama.cpp's loader requires of a llama model
		return Config{}, fmt.Errorf("llama.rope.dimension_count %d: a llama model rotates whole heads (%d)", c.RopeDims, c.HeadDim)
	}
	real := func(key string, def float64) (float32, error) {
		v, ok := g.Float(key)
		if !ok {
			if def == 0 {
				return 0, fmt.Errorf("%s is missing or not a number", key)
			}
			v = def
		}
		if !(v > 0) || math.IsInf(v, 1) || v > math.MaxFloat32 {
			return 0, fmt.Errorf("%s is %g: expected a positive number", key, v)
		}
		return float32(v), nil
	}
	var err error
	if c.RopeBase, err = real("llama.rope.freq_base", 10000); err != nil {
		return Config{}, err
	}
	if c.NormEps, err = real("llama.attention.layer_norm_rms_epsilon", 0); err != nil {
		return Config{}, err
	}
	c.RopeScale = 1
	switch typ, _ := g.String("llama.rope.scaling.type"); typ {
	case "", "none":
	case "linear":
		f, err := real("llama.rope.scaling.factor", 0)
		if err != nil {
			return Config{}, err
		}
		c.RopeScale = 1 / f
	default:
		return Config{}, fmt.Errorf("llama.rope.scaling.type %q: gglua applies none or linear", typ)
	}
	return c, nil
}
