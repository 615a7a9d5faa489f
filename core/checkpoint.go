package core

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gglua/gglua/ggmlcgo"
)

// CheckpointEntry is one named tensor of a checkpoint.
type CheckpointEntry struct {
	Name   string
	Tensor *Tensor
}

const (
	shapeKey = "gglua.shape." // + name: the exact shape, "2x3" (ggml's n_dims drops sizes of 1)
	valueKey = "gglua.value." // + name: a number or string saved beside the tensors
	formatKV = "gglua.format" // marks gglua's checkpoints
	formatV1 = "gglua-checkpoint-1"
)

// SaveCheckpoint writes tensors (in their dtype) and string metadata to a
// GGUF file, atomically.
func SaveCheckpoint(path string, entries []CheckpointEntry, meta map[string]string) error {
	w := ggmlcgo.NewGGUFWriter()
	defer w.Free()
	w.SetString("general.architecture", "gglua")
	w.SetString(formatKV, formatV1)
	for _, e := range entries {
		v, err := e.Tensor.Float32s()
		if err != nil {
			return fmt.Errorf("tensor.save: %s: %w", e.Name, err)
		}
		dtype := e.Tensor.Dtype()
		raw, err := encode(dtype, v)
		if err != nil {
			return fmt.Errorf("tensor.save: %s: %w", e.Name, err)
		}
		ne := ne4(e.Tensor.shape)
		if err := w.AddTensor(e.Name, dtype, ne[:len(e.Tensor.shape)], raw); err != nil {
			return fmt.Errorf("tensor.save: %w", err)
		}
		w.SetString(shapeKey+e.Name, ShapeString(e.Tensor.shape))
	}
	for k, v := range meta {
		w.SetString(valueKey+k, v)
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("tensor.save: %w", err)
	}
	return nil
}

// LoadCheckpoint reads a GGUF file into host tensors and its gglua metadata.
// Files from other ggml tools load too (their f32/f16/bf16 tensors).
func LoadCheckpoint(path string) ([]CheckpointEntry, map[string]string, error) {
	f, err := ggmlcgo.OpenGGUF(path)
	if err != nil {
		return nil, nil, fmt.Errorf("tensor.load: %w", err)
	}
	defer f.Close()
	var out []CheckpointEntry
	for _, info := range f.Tensors() {
		if !info.Type.Valid() || info.Type == ggmlcgo.I32 {
			return nil, nil, fmt.Errorf("tensor.load: %s: tensor %q has type %v, which gglua does not read", path, info.Name, info.Type)
		}
		shape := shapeOf(info)
		if s, ok := f.String(shapeKey + info.Name); ok {
			if shape, err = parseShape(s); err != nil {
				return nil, nil, fmt.Errorf("tensor.load: %s: tensor %q: %w", path, info.Name, err)
			}
		}
		n, err := checkShape(shape)
		if err != nil || n*info.Type.Size() != info.Size {
			return nil, nil, fmt.Errorf("tensor.load: %s: tensor %q: shape %v does not match its %d bytes", path, info.Name, shape, info.Size)
		}
		raw, err := f.ReadTensor(info)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor.load: %w", err)
		}
		v, err := decode(info.Type, raw)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor.load: %w", err)
		}
		t, err := FromFloat32(v, shape...)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor.load: %w", err)
		}
		t.dtype = info.Type
		out = append(out, CheckpointEntry{Name: info.Name, Tensor: t})
	}
	meta := map[string]string{}
	for _, k := range f.Keys() {
		if name, ok := strings.CutPrefix(k, valueKey); ok {
			meta[name], _ = f.String(k)
		}
	}
	return out, meta, nil
}

// shapeOf is a tensor's shape from its ne, trailing sizes of 1 dropped.
func shapeOf(info ggmlcgo.GGUFTensorInfo) []int {
	n := ggmlcgo.MaxDims
	for n > 1 && info.Ne[n-1] == 1 {
		n--
	}
	shape := make([]int, n)
	for i := 0; i < n; i++ {
		shape[n-1-i] = int(info.Ne[i])
	}
	return shape
}

func parseShape(s string) ([]int, error) {
	parts := strings.Split(s, "x")
	shape := make([]int, len(parts))
	for i, p := range parts {
		d, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("bad shape %q", s)
		}
		shape[i] = d
	}
	return shape, nil
}
