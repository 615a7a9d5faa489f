package core

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gglua/gglua/ggmlcgo"
)

// Checkpoints are GGUF files: tensors (in their dtype) plus metadata. An
// entry sits at a path of keys in nested tables ({model = {["1.weight"] =
// w}, step = 3}); its name is the path joined by dots ("model.1.weight"),
// which is what the GGUF tensor is called, so other ggml tools see familiar
// names. The path itself is stored too (gglua.path.<tensor name>,
// gglua.vpath.<value name>), so nesting comes back exactly: a flat key with
// dots in it ({["1.weight"] = w}) and a nested table ({["1"] = {weight = w}})
// stay apart. Two entries whose names coincide are an error, not a coin
// toss. Files written before paths were stored (gglua-checkpoint-1) and
// files from other tools load flat, each entry under its name.

// PathKey is one key on an entry's path: a string, or a number (a Lua
// table's number key).
type PathKey struct {
	Str   string
	Num   float64
	IsNum bool
}

// StrKey and NumKey make path keys.
func StrKey(s string) PathKey  { return PathKey{Str: s} }
func NumKey(n float64) PathKey { return PathKey{Num: n, IsNum: true} }

// String is the key as Lua's tostring writes it.
func (k PathKey) String() string {
	if !k.IsNum {
		return k.Str
	}
	if k.Num == math.Trunc(k.Num) && math.Abs(k.Num) < 1<<63 {
		return strconv.FormatInt(int64(k.Num), 10)
	}
	return strconv.FormatFloat(k.Num, 'g', -1, 64)
}

// EmptyTable is the value of an entry that is an empty table.
type EmptyTable struct{}

// CheckpointEntry is one entry of a checkpoint: a tensor, or a Value that
// is a float64, a string, a bool or an EmptyTable.
type CheckpointEntry struct {
	Path   []PathKey
	Tensor *Tensor
	Value  any
}

// Name is the entry's path joined by dots.
func (e CheckpointEntry) Name() string { return dotted(e.Path) }

func dotted(path []PathKey) string {
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = k.String()
	}
	return strings.Join(parts, ".")
}

// pathString shows a path as Lua would index it: ["model"]["1.weight"].
func pathString(path []PathKey) string {
	var b strings.Builder
	for _, k := range path {
		if k.IsNum {
			fmt.Fprintf(&b, "[%s]", k.String())
		} else {
			fmt.Fprintf(&b, "[%q]", k.Str)
		}
	}
	return b.String()
}

// encodePath writes a path as Go-quoted strings and numbers, separated by
// spaces: `"model" "1.weight"`, `1 "weight"`. Every byte comes back.
func encodePath(path []PathKey) string {
	parts := make([]string, len(path))
	for i, k := range path {
		if k.IsNum {
			parts[i] = strconv.FormatFloat(k.Num, 'g', -1, 64)
		} else {
			parts[i] = strconv.Quote(k.Str)
		}
	}
	return strings.Join(parts, " ")
}

func decodePath(s string) ([]PathKey, error) {
	var path []PathKey
	for s != "" {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, fmt.Errorf("bad path %q", s)
			}
			str, _ := strconv.Unquote(q)
			path = append(path, StrKey(str))
			s = s[len(q):]
		} else {
			word, _, _ := strings.Cut(s, " ")
			n, err := strconv.ParseFloat(word, 64)
			if err != nil || math.IsNaN(n) {
				return nil, fmt.Errorf("bad path key %q", word)
			}
			path = append(path, NumKey(n))
			s = s[len(word):]
		}
		if s != "" {
			if s[0] != ' ' {
				return nil, fmt.Errorf("bad path %q", s)
			}
			s = s[1:]
		}
	}
	if len(path) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return path, nil
}

const (
	shapeKey = "gglua.shape." // + tensor name: the exact shape, "2x3" (ggml's n_dims drops sizes of 1)
	pathKey  = "gglua.path."  // + tensor name: the entry's path (encodePath)
	valueKey = "gglua.value." // + name: a number ("n:"), string ("s:"), boolean ("b:") or empty table ("t:")
	vpathKey = "gglua.vpath." // + name: the value's path
	formatKV = "gglua.format" // marks gglua's checkpoints
	formatV2 = "gglua-checkpoint-2"
)

// encodeValue is a value's metadata string; numbers are written so that
// every float64 (-0, Inf and NaN too) reads back exactly.
func encodeValue(v any) (string, error) {
	switch x := v.(type) {
	case float64:
		return "n:" + strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return "b:" + strconv.FormatBool(x), nil
	case string:
		return "s:" + x, nil
	case EmptyTable:
		return "t:", nil
	}
	return "", fmt.Errorf("a %T cannot be saved", v)
}

func decodeValue(s string) (any, error) {
	if len(s) < 2 {
		return nil, fmt.Errorf("bad value %q", s)
	}
	switch s[:2] {
	case "n:":
		f, err := strconv.ParseFloat(s[2:], 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", s[2:])
		}
		return f, nil
	case "b:":
		return s[2:] == "true", nil
	case "t:":
		return EmptyTable{}, nil
	}
	return s[2:], nil // "s:", and anything older
}

// checkEntries refuses what cannot be written exactly: NUL bytes (C strings
// end there), and two entries of one name.
func checkEntries(entries []CheckpointEntry) error {
	seen := map[string][]PathKey{}
	for _, e := range entries {
		if len(e.Path) == 0 {
			return argErrorf("tensor.save: an entry has an empty path")
		}
		for _, k := range e.Path {
			if !k.IsNum && strings.IndexByte(k.Str, 0) >= 0 {
				return argErrorf("tensor.save: the name %q holds a NUL byte, which GGUF cannot store", k.Str)
			}
			if k.IsNum && math.IsNaN(k.Num) {
				return argErrorf("tensor.save: %s: a NaN key cannot be saved", pathString(e.Path))
			}
		}
		if s, ok := e.Value.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return argErrorf("tensor.save: the string at %s holds a NUL byte, which GGUF cannot store", pathString(e.Path))
		}
		name := e.Name()
		if other, ok := seen[name]; ok {
			return argErrorf("tensor.save: two entries are both named %q: %s and %s; rename one", name, pathString(other), pathString(e.Path))
		}
		seen[name] = e.Path
	}
	return nil
}

// Progress is told how far a long checkpoint read or write has come: its
// phase ("reading", "preparing", "writing") and bytes done of total. A nil
// Progress is told nothing.
type Progress func(phase string, done, total int64)

func (p Progress) report(phase string, done, total int64) {
	if p != nil {
		p(phase, done, total)
	}
}

// SaveCheckpoint writes entries to a GGUF file, atomically.
func SaveCheckpoint(path string, entries []CheckpointEntry) error {
	return SaveCheckpointProgress(path, entries, nil)
}

// SaveCheckpointProgress is SaveCheckpoint telling progress how far it is:
// "preparing" while tensors are copied into ggml's writer (device tensors
// read back), then "writing" once before and once after ggml writes the
// file, which it does in one call.
func SaveCheckpointProgress(path string, entries []CheckpointEntry, progress Progress) error {
	if err := checkEntries(entries); err != nil {
		return err
	}
	entries = append([]CheckpointEntry(nil), entries...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	w := ggmlcgo.NewGGUFWriter()
	defer w.Free()
	w.SetString("general.architecture", "gglua")
	w.SetString(formatKV, formatV2)
	spare := 0
	var done, total int64
	for _, e := range entries {
		if e.Tensor != nil {
			total += e.Tensor.Numel() * e.Tensor.Dtype().Size()
		}
	}
	for _, e := range entries {
		name := e.Name()
		if e.Tensor == nil {
			s, err := encodeValue(e.Value)
			if err != nil {
				return fmt.Errorf("tensor.save: %s: %w", name, err)
			}
			w.SetString(valueKey+name, s)
			w.SetString(vpathKey+name, encodePath(e.Path))
			continue
		}
		// The GGUF tensor is called by the entry's name, or, when that is
		// too long for ggml, by a spare name (its path says where it goes).
		tname := name
		if tname == "" || len(tname) > ggmlcgo.MaxNameLen {
			for {
				spare++
				tname = "gglua#" + strconv.Itoa(spare)
				if !names[tname] {
					break
				}
			}
		}
		// stEncode writes the tensor's own dtype: i32 as GGML_TYPE_I32,
		// exactly (not through f32, which rounds past 2^24).
		raw, err := stEncode(e.Tensor)
		if err != nil {
			return fmt.Errorf("tensor.save: %s: %w", name, err)
		}
		ne := ne4(e.Tensor.shape)
		if err := w.AddTensor(tname, e.Tensor.Dtype(), ne[:len(e.Tensor.shape)], raw); err != nil {
			return fmt.Errorf("tensor.save: %w", err)
		}
		w.SetString(shapeKey+tname, ShapeString(e.Tensor.shape))
		w.SetString(pathKey+tname, encodePath(e.Path))
		done += int64(len(raw))
		progress.report("preparing", done, total)
	}
	progress.report("writing", 0, total)
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("tensor.save: %w", err)
	}
	progress.report("writing", total, total)
	return nil
}

// LoadCheckpoint reads a GGUF file into host tensors (f32, f16, bf16 or
// i32, as stored) and values, each at its path. An entry without a stored
// path (older gglua files, other ggml tools' tensors) sits at its name, as
// one key.
func LoadCheckpoint(path string) ([]CheckpointEntry, error) {
	return LoadCheckpointProgress(path, nil)
}

// LoadCheckpointProgress is LoadCheckpoint telling progress the bytes of
// tensors read so far ("reading").
func LoadCheckpointProgress(path string, progress Progress) ([]CheckpointEntry, error) {
	f, err := ggmlcgo.OpenGGUF(path)
	if err != nil {
		return nil, fmt.Errorf("tensor.load: %w", err)
	}
	defer f.Close()
	var out []CheckpointEntry
	pathOf := func(key, name string) ([]PathKey, error) {
		s, ok := f.String(key + name)
		if !ok {
			return []PathKey{StrKey(name)}, nil
		}
		p, err := decodePath(s)
		if err != nil {
			return nil, fmt.Errorf("tensor.load: %s: entry %q: %w", path, name, err)
		}
		return p, nil
	}
	var done, total int64
	for _, info := range f.Tensors() {
		total += info.Size
	}
	for _, info := range f.Tensors() {
		if !info.Type.Valid() {
			return nil, fmt.Errorf("tensor.load: %s: tensor %q has type %v, which gglua does not read", path, info.Name, info.Type)
		}
		shape := shapeOf(info)
		if s, ok := f.String(shapeKey + info.Name); ok {
			if shape, err = parseShape(s); err != nil {
				return nil, fmt.Errorf("tensor.load: %s: tensor %q: %w", path, info.Name, err)
			}
		}
		n, err := checkShape(shape)
		if err != nil || n*info.Type.Size() != info.Size {
			return nil, fmt.Errorf("tensor.load: %s: tensor %q: shape %v does not match its %d bytes", path, info.Name, shape, info.Size)
		}
		raw, err := f.ReadTensor(info)
		if err != nil {
			return nil, fmt.Errorf("tensor.load: %w", err)
		}
		done += info.Size
		progress.report("reading", done, total)
		t, err := tensorFromGGUF(info.Type, raw, shape)
		if err != nil {
			return nil, fmt.Errorf("tensor.load: %w", err)
		}
		p, err := pathOf(pathKey, info.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, CheckpointEntry{Path: p, Tensor: t})
	}
	for _, k := range f.Keys() {
		name, ok := strings.CutPrefix(k, valueKey)
		if !ok {
			continue
		}
		s, _ := f.String(k)
		v, err := decodeValue(s)
		if err != nil {
			return nil, fmt.Errorf("tensor.load: %s: %s: %w", path, name, err)
		}
		p, err := pathOf(vpathKey, name)
		if err != nil {
			return nil, err
		}
		out = append(out, CheckpointEntry{Path: p, Value: v})
	}
	return out, nil
}

// tensorFromGGUF is a host tensor of a GGUF tensor's bytes in its type:
// i32 as []int32 (exact), the float types as f32 values of that dtype.
func tensorFromGGUF(dtype ggmlcgo.Type, raw []byte, shape []int) (*Tensor, error) {
	if dtype == ggmlcgo.I32 {
		return FromInt32(decodeInt32s(raw), shape...)
	}
	v, err := decode(dtype, raw)
	if err != nil {
		return nil, err
	}
	t, err := FromFloat32(v, shape...)
	if err != nil {
		return nil, err
	}
	t.dtype = dtype
	return t, nil
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
