package core

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// stExpect is what scripts/reference/safetensors_ref.py writes as a file's
// contents: each tensor's dtype, shape and values, floats as f32 bit
// patterns, integers as themselves.
type stExpect struct {
	Metadata map[string]string `json:"metadata"`
	Tensors  map[string]struct {
		Dtype string   `json:"dtype"`
		Shape []int    `json:"shape"`
		Bits  []uint32 `json:"bits"`
		Ints  []int64  `json:"ints"`
	} `json:"tensors"`
}

func readExpect(t *testing.T, path string) stExpect {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var e stExpect
	require.NoError(t, json.Unmarshal(raw, &e))
	return e
}

// bitsOf is a float tensor's values as f32 bits, nil for an i32 tensor.
func bitsOf(t *testing.T, x *Tensor) []uint32 {
	t.Helper()
	if x.Dtype() == ggmlcgo.I32 {
		return nil
	}
	out := []uint32{}
	for _, v := range values(t, x) {
		out = append(out, math.Float32bits(v))
	}
	return out
}

// intsOf is an i32 tensor's values, exactly, nil for a float tensor.
func intsOf(t *testing.T, x *Tensor) []int64 {
	t.Helper()
	if x.Dtype() != ggmlcgo.I32 {
		return nil
	}
	v, err := x.int32s()
	require.NoError(t, err)
	out := []int64{}
	for _, i := range v {
		out = append(out, int64(i))
	}
	return out
}

// ggluaDtype is the dtype a safetensors dtype loads as.
var ggluaDtype = map[string]ggmlcgo.Type{"F32": ggmlcgo.F32, "F16": ggmlcgo.F16, "BF16": ggmlcgo.BF16, "I32": ggmlcgo.I32, "I64": ggmlcgo.I32}

// A file from an independent writer (PyTorch's bytes, the header written by
// hand from the spec, tensors unaligned and out of name order) loads with
// every value bit for bit, each tensor flat under its dotted name.
func TestSafetensorsReadsReferenceFile(t *testing.T) {
	want := readExpect(t, "testdata/safetensors_ref.json")
	entries, meta, err := LoadSafetensors("testdata/safetensors_ref.safetensors", nil)
	require.NoError(t, err)
	assert.Equal(t, want.Metadata, meta)
	require.Len(t, entries, len(want.Tensors))
	for _, e := range entries {
		require.Len(t, e.Path, 1, "a file from another writer loads flat")
		w, ok := want.Tensors[e.Path[0].Str]
		require.True(t, ok, e.Name())
		shape := w.Shape
		if len(shape) == 0 {
			shape = []int{1} // a scalar is a 1-element tensor
		}
		assert.Equal(t, shape, e.Tensor.Shape(), e.Name())
		assert.Equal(t, ggluaDtype[w.Dtype], e.Tensor.Dtype(), e.Name())
		assert.Equal(t, w.Bits, bitsOf(t, e.Tensor), e.Name())
		assert.Equal(t, w.Ints, intsOf(t, e.Tensor), e.Name())
	}
}

// writtenEntries is what TestSafetensorsWrittenFileReadsInPython saves:
// nested tables, a number key, a flat dotted key, every dtype gglua writes.
func writtenEntries(t *testing.T) ([]CheckpointEntry, map[string]string) {
	half := func(dtype ggmlcgo.Type, shape []int, v ...float32) *Tensor {
		x := host(t, shape, v...)
		x.dtype = dtype // exact: every value below is one of dtype's
		return x
	}
	inf := float32(math.Inf(1))
	labels, err := FromInt32([]int32{0, -1 << 31, 1<<31 - 1, 1<<24 + 1}, 2, 2)
	require.NoError(t, err)
	return []CheckpointEntry{
		{Path: keyPath("model", "layers", 1, "weight"), Tensor: host(t, []int{2, 3}, 0, -1.5, 1.0/3, inf, -inf, float32(math.Copysign(0, -1)))},
		{Path: keyPath("model", "norm", "bias"), Tensor: half(ggmlcgo.F16, []int{3}, 1, -2.5, 65504)},
		{Path: keyPath("model.embed.weight"), Tensor: half(ggmlcgo.BF16, []int{2, 1, 2}, 1, -3.140625, math.Float32frombits(0x7e960000), 0.5)},
		{Path: keyPath("head"), Tensor: host(t, []int{1}, 1e-45)},
		{Path: keyPath("labels"), Tensor: labels},
	}, map[string]string{"note": "from gglua"}
}

// A file gglua writes is read by the independent Python reader
// (safetensors_ref.py read), whose output is committed: the test checks that
// gglua still writes that very file, byte for byte, and that what Python
// read from it is what was saved. GGLUA_WRITE_TESTDATA=1 rewrites the file
// (then run the Python reader by hand, as its doc says).
func TestSafetensorsWrittenFileReadsInPython(t *testing.T) {
	entries, meta := writtenEntries(t)
	file := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, SaveSafetensors(file, entries, meta, nil))
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	if os.Getenv("GGLUA_WRITE_TESTDATA") == "1" {
		require.NoError(t, os.WriteFile("testdata/gglua_written.safetensors", got, 0o644))
	}
	committed, err := os.ReadFile("testdata/gglua_written.safetensors")
	require.NoError(t, err)
	require.Equal(t, committed, got, "gglua no longer writes the file the Python reader checked")

	py := readExpect(t, "testdata/gglua_written.json")
	assert.Equal(t, "pt", py.Metadata["format"])
	assert.Equal(t, "from gglua", py.Metadata["note"])
	require.Len(t, py.Tensors, len(entries))
	for _, e := range entries {
		w, ok := py.Tensors[e.Name()]
		require.True(t, ok, "Python sees %q", e.Name())
		assert.Equal(t, stDtypeNames[e.Tensor.Dtype()], w.Dtype, e.Name())
		assert.Equal(t, e.Tensor.Shape(), w.Shape, e.Name())
		assert.Equal(t, bitsOf(t, e.Tensor), w.Bits, e.Name())
		assert.Equal(t, intsOf(t, e.Tensor), w.Ints, e.Name())
		if len(e.Path) > 1 {
			assert.Equal(t, encodePath(e.Path), py.Metadata[pathKey+e.Name()], "the path of %q is in the metadata", e.Name())
		}
	}
}

// Saved and loaded back, entries keep their paths (nested tables, number
// keys, flat dotted keys), dtypes, shapes and every bit; the metadata comes
// back without gglua's own keys.
func TestSafetensorsRoundTrip(t *testing.T) {
	entries, meta := writtenEntries(t)
	file := filepath.Join(t.TempDir(), "rt.safetensors")
	var phases []string
	var last int64
	require.NoError(t, SaveSafetensors(file, entries, meta, func(phase string, done, total int64) {
		phases = append(phases, phase)
		assert.GreaterOrEqual(t, done, last, "progress only grows")
		last = done
		assert.LessOrEqual(t, done, total)
	}))
	assert.Contains(t, phases, "writing")
	loaded, gotMeta, err := LoadSafetensors(file, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"format": "pt", "note": "from gglua"}, gotMeta)
	require.Len(t, loaded, len(entries))
	got := byPath(loaded)
	for _, e := range entries {
		l, ok := got[pathString(e.Path)]
		require.True(t, ok, pathString(e.Path))
		assert.Equal(t, e.Tensor.Dtype(), l.Tensor.Dtype())
		assert.Equal(t, e.Tensor.Shape(), l.Tensor.Shape())
		assert.Equal(t, bitsOf(t, e.Tensor), bitsOf(t, l.Tensor))
		assert.Equal(t, intsOf(t, e.Tensor), intsOf(t, l.Tensor))
	}
	// The file is replaced atomically and keeps the mode it had.
	require.NoError(t, os.Chmod(file, 0o640))
	require.NoError(t, SaveSafetensors(file, entries[:1], nil, nil))
	st, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm())
	left, err := filepath.Glob(filepath.Join(filepath.Dir(file), ".*tmp*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left")
}

// stFile is a safetensors file of header and data.
func stFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func withLength(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

// corruptSafetensors are files that must be refused, each with a word of
// its error.
func corruptSafetensors() map[string]struct {
	data []byte
	want string
} {
	f4 := make([]byte, 4)
	type c = struct {
		data []byte
		want string
	}
	return map[string]c{
		"empty":                {nil, "shorter than"},
		"short length":         {[]byte{1, 0, 0}, "shorter than"},
		"length past the file": {withLength(1000, "{}"), "past the file"},
		"length past 2^63":     {withLength(math.MaxUint64, "{}"), "past the file"},
		"length over the limit": {append(withLength(maxSafetensorsHeader+1, ""), make([]byte, maxSafetensorsHeader+2)...),
			"limit"},
		"not JSON":             {stFile("nope", nil), "not a JSON object"},
		"a JSON array":         {stFile("[]", nil), "not a JSON object"},
		"truncated JSON":       {stFile(`{"a":{"dtype":"F32"`, nil), "bad header"},
		"bytes after JSON":     {stFile(`{} x`, nil), "after its JSON"},
		"bad UTF-8":            {stFile("{\"\xff\":1}", nil), "UTF-8"},
		"duplicate names":      {stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4), "twice"},
		"metadata not strings": {stFile(`{"__metadata__":{"a":1}}`, nil), "strings to strings"},
		"missing shape":        {stFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, f4), "needs dtype"},
		"unknown dtype":        {stFile(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}}`, f4), "unknown dtype"},
		"negative size":        {stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f4), "negative"},
		"fractional size":      {stFile(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, f4), "bad header entry"},
		"three offsets":        {stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, f4), "data_offsets"},
		"end before begin":     {stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, f4), "begin <= end"},
		"shape overflows":      {stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, f4), "overflows"},
		"bytes overflow":       {stFile(`{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}}`, f4), "needs"},
		"size mismatch":        {stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, f4), "needs 8 bytes"},
		"gap":                  {stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "gap"},
		"overlap": {stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)),
			"overlap"},
		"data short":  {stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f4), "the file has 4"},
		"data longer": {stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)), "the file has 8"},
		"huge lying tensor": {stFile(`{"a":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]}}`, f4),
			"the file has 4"},
		"bad stored path": {stFile(`{"__metadata__":{"gglua.path.a":"\"b\""},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4),
			"stored path"},
		// Go's decoder would keep the last of two fields; other readers refuse.
		"field twice in an entry": {stFile(`{"a":{"dtype":"I32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4), "twice"},
		// [19] 9: 50 MB of '[' cost 3.5 GB before it was refused.
		"nested too deep":     {stFile(`{"a":`+strings.Repeat("[", 1<<20), f4), "nests more than 8 deep"},
		"metadata key twice":  {stFile(`{"__metadata__":{"k":"1","k":"2"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4), "twice"},
		"null metadata value": {stFile(`{"__metadata__":{"k":null},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4), "null"},
	}
}

// Corrupt and lying files are refused with a clear error before any data
// is trusted: no panic, no allocation the file's size does not back.
func TestSafetensorsRefusesCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	for name, c := range corruptSafetensors() {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, "bad.safetensors")
			require.NoError(t, os.WriteFile(file, c.data, 0o644))
			_, _, err := LoadSafetensors(file, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "tensor.load: "+file)
		})
	}
}

// Dtypes and shapes gglua cannot hold exactly are errors naming the tensor.
func TestSafetensorsRefusesWhatGgluaCannotHold(t *testing.T) {
	i64 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	cases := map[string]struct {
		data []byte
		want string
	}{
		"f64":            {stFile(`{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)), `"w" has dtype F64`},
		"u8":             {stFile(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)), `"w" has dtype U8`},
		"bool":           {stFile(`{"w":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)), `"w" has dtype BOOL`},
		"i64 past int32": {stFile(`{"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}`, append(i64(1), i64(1<<31)...)), `"ids" (I64) holds 2147483648 at element 2`},
		"i64 below":      {stFile(`{"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, i64(-1<<31-1)), "outside int32's range"},
		"five dims":      {stFile(`{"d":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}}`, make([]byte, 4)), `"d" has 5 dims`},
	}
	dir := t.TempDir()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, "x.safetensors")
			require.NoError(t, os.WriteFile(file, c.data, 0o644))
			_, _, err := LoadSafetensors(file, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.ErrorIs(t, err, ErrArgument)
		})
	}
	// A size of 0 is an empty tensor, as PyTorch saves one.
	empty := filepath.Join(dir, "empty.safetensors")
	require.NoError(t, os.WriteFile(empty, stFile(`{"e":{"dtype":"F32","shape":[3,0],"data_offsets":[0,0]}}`, nil), 0o644))
	got, _, err := LoadSafetensors(empty, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, []int{3, 0}, got[0].Tensor.Shape())
	// Within int32's range, I64 loads exactly, as i32.
	file := filepath.Join(dir, "ok.safetensors")
	require.NoError(t, os.WriteFile(file, stFile(`{"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}`, append(i64(-1<<31), i64(1<<31-1)...)), 0o644))
	entries, _, err := LoadSafetensors(file, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{-1 << 31, 1<<31 - 1}, intsOf(t, entries[0].Tensor))
}

// A FIFO is refused, not waited on forever, by both load and save.
func TestSafetensorsRefusesFIFOs(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, _, err := LoadSafetensors(fifo, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "FIFO")
	err = SaveSafetensors(fifo, []CheckpointEntry{{Path: keyPath("a"), Tensor: host(t, []int{1}, 1)}}, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
}

// What a safetensors file cannot hold is an error on save, never dropped.
func TestSafetensorsSaveRefuses(t *testing.T) {
	w := host(t, []int{1}, 1)
	cases := map[string]struct {
		entries []CheckpointEntry
		meta    map[string]string
		want    string
	}{
		"a number":       {[]CheckpointEntry{{Path: keyPath("step"), Value: 3.0}}, nil, `["step"] is not a tensor`},
		"an empty table": {[]CheckpointEntry{{Path: keyPath("opt"), Value: EmptyTable{}}}, nil, "only tensors"},
		"one name twice": {[]CheckpointEntry{{Path: keyPath("a.b"), Tensor: w}, {Path: keyPath("a", "b"), Tensor: w}}, nil, `both named "a.b"`},
		"bad UTF-8 name": {[]CheckpointEntry{{Path: keyPath("\xff"), Tensor: w}}, nil, "UTF-8"},
		"metadata name":  {[]CheckpointEntry{{Path: keyPath("__metadata__"), Tensor: w}}, nil, "__metadata__"},
		"NaN key":        {[]CheckpointEntry{{Path: keyPath(math.NaN()), Tensor: w}}, nil, "NaN"},
		"bad metadata":   {nil, map[string]string{"k": "\xff"}, "UTF-8"},
		"gglua's keys":   {nil, map[string]string{"gglua.path.x": "1"}, "gglua's own"},
		// A header past the readers' limit (ours refused what it wrote).
		"a 100 MB header": {nil, map[string]string{"big": strings.Repeat("x", 100_000_000)}, "past safetensors' 100000000-byte limit"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "x.safetensors")
			err := SaveSafetensors(file, c.entries, c.meta, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, statErr := os.Stat(file)
			assert.True(t, os.IsNotExist(statErr), "nothing written")
		})
	}
}

// FuzzSafetensors feeds arbitrary bytes to the reader: any input loads or
// is an error, never a panic, and what loads fits in the file.
func FuzzSafetensors(f *testing.F) {
	for _, c := range corruptSafetensors() {
		if len(c.data) < 1<<16 {
			f.Add(c.data)
		}
	}
	for _, name := range []string{"testdata/safetensors_ref.safetensors", "testdata/gglua_written.safetensors"} {
		data, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(data)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "fuzz.safetensors")
		require.NoError(t, os.WriteFile(file, data, 0o644))
		entries, _, err := LoadSafetensors(file, nil)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "tensor.load: "), err.Error())
			return
		}
		var n int64
		for _, e := range entries {
			n += e.Tensor.Numel()
		}
		if n > int64(len(data)) {
			t.Fatalf("%d elements loaded from a %d-byte file", n, len(data))
		}
	})
}

// A 0-d tensor's copies are 0-d, as PyTorch's: clone, detach and casts
// keep the scalar mark, and a checkpoint writes each with shape [].
func TestScalarMarkFollowsCopies(t *testing.T) {
	e := newEngine(t)
	s := host(t, []int{1}, 7)
	require.NoError(t, s.MarkScalar())
	copies := map[string]func() (*Tensor, error){
		"clone":  func() (*Tensor, error) { return e.Clone(s) },
		"detach": func() (*Tensor, error) { return s.Detach(), nil },
		"f16":    func() (*Tensor, error) { return e.To(s, ggmlcgo.F16) },
		"i32":    func() (*Tensor, error) { return e.To(s, ggmlcgo.I32) },
		"i32 f32": func() (*Tensor, error) {
			i, err := e.To(s, ggmlcgo.I32)
			if err != nil {
				return nil, err
			}
			return e.To(i, ggmlcgo.F32)
		},
	}
	var entries []CheckpointEntry
	for name, f := range copies {
		c, err := f()
		require.NoError(t, err, name)
		assert.True(t, c.Scalar(), name)
		entries = append(entries, CheckpointEntry{Path: []PathKey{{Str: name}}, Tensor: c})
	}
	sum, err := e.Add(s, s) // an op's result is not a copy: written as [1]
	require.NoError(t, err)
	assert.False(t, sum.Scalar())
	entries = append(entries, CheckpointEntry{Path: []PathKey{{Str: "sum"}}, Tensor: sum})
	file := filepath.Join(t.TempDir(), "s.safetensors")
	require.NoError(t, SaveSafetensors(file, entries, nil, nil))
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var header map[string]struct {
		Shape []int `json:"shape"`
	}
	require.NoError(t, json.Unmarshal(raw[8:8+binary.LittleEndian.Uint64(raw)], &header))
	loaded, _, err := LoadSafetensors(file, nil)
	require.NoError(t, err)
	require.Len(t, loaded, len(entries))
	for _, l := range loaded {
		want := []int{} // 0-d in the file, and a scalar read back
		if l.Name() == "sum" {
			want = []int{1}
		}
		assert.Equal(t, want, header[l.Name()].Shape, l.Name())
		assert.Equal(t, len(want) == 0, l.Tensor.Scalar(), l.Name())
	}
}
