package core

import (
	"math"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

func keyPath(keys ...any) []PathKey {
	out := make([]PathKey, len(keys))
	for i, k := range keys {
		switch x := k.(type) {
		case string:
			out[i] = StrKey(x)
		case float64:
			out[i] = NumKey(x)
		case int:
			out[i] = NumKey(float64(x))
		}
	}
	return out
}

// byName indexes loaded entries by their path, written with pathString.
func byPath(entries []CheckpointEntry) map[string]CheckpointEntry {
	out := map[string]CheckpointEntry{}
	for _, e := range entries {
		out[pathString(e.Path)] = e
	}
	return out
}

// TestCheckpointPathsRoundTrip: nested entries come back at their paths,
// string and number keys apart, a flat key with dots apart from nesting,
// and every value exactly.
func TestCheckpointPathsRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ck.gguf")
	w := host(t, []int{2, 1}, 1, 2)
	b := host(t, []int{3}, 3, 4, 5)
	long := "a-name-longer-than-ggml-allows-for-a-tensor-name-which-is-63-bytes"
	numbers := []float64{0.1, 1e300, math.Copysign(0, -1), 1 << 62, -(1 << 53) - 2, 5e-324, math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	entries := []CheckpointEntry{
		{Path: keyPath("model", "1.weight"), Tensor: w},
		{Path: keyPath("model", 1, "bias"), Tensor: b},
		{Path: keyPath(long, long), Tensor: b},
		{Path: keyPath(""), Tensor: w},
		{Path: keyPath("note"), Value: "bytes \xff\x01 and \"quotes\" and spaces"},
		{Path: keyPath("flag"), Value: false},
		{Path: keyPath("empty"), Value: EmptyTable{}},
		{Path: keyPath(2.5), Value: true},
	}
	for i, n := range numbers {
		entries = append(entries, CheckpointEntry{Path: keyPath("numbers", i+1), Value: n})
	}
	require.NoError(t, SaveCheckpoint(file, entries))
	loaded, err := LoadCheckpoint(file)
	require.NoError(t, err)
	require.Len(t, loaded, len(entries))
	got := byPath(loaded)
	for _, e := range entries {
		g, ok := got[pathString(e.Path)]
		require.True(t, ok, "entry %s", pathString(e.Path))
		if e.Tensor != nil {
			require.NotNil(t, g.Tensor)
			assert.Equal(t, e.Tensor.Shape(), g.Tensor.Shape())
			assert.Equal(t, values(t, e.Tensor), values(t, g.Tensor))
			continue
		}
		if n, ok := e.Value.(float64); ok {
			m, ok := g.Value.(float64)
			require.True(t, ok)
			assert.Equal(t, math.Float64bits(n), math.Float64bits(m), "%v comes back bit for bit", n)
			continue
		}
		assert.Equal(t, e.Value, g.Value)
	}
	assert.True(t, got[`["model"][1]["bias"]`].Path[1].IsNum, "a number key stays a number")
	assert.False(t, got[`["model"]["1.weight"]`].Path[1].IsNum)

	// Other ggml tools see the dotted names.
	f, err := ggmlcgo.OpenGGUF(file)
	require.NoError(t, err)
	defer f.Close()
	var names []string
	for _, info := range f.Tensors() {
		names = append(names, info.Name)
	}
	sort.Strings(names)
	assert.Contains(t, names, "model.1.weight")
	assert.Contains(t, names, "model.1.bias")
}

// TestCheckpointRefusesWhatItCannotWrite: two entries of one name, NUL
// bytes in names or strings: errors naming them, and no file.
func TestCheckpointRefusesWhatItCannotWrite(t *testing.T) {
	a, b := host(t, []int{1}, 1), host(t, []int{1}, 2)
	for _, c := range []struct {
		entries []CheckpointEntry
		want    string
	}{
		{[]CheckpointEntry{{Path: keyPath("1.weight"), Tensor: a}, {Path: keyPath("1", "weight"), Tensor: b}}, `"1.weight"`},
		{[]CheckpointEntry{{Path: keyPath("a", "b"), Tensor: a}, {Path: keyPath("a.b"), Value: 3.0}}, `"a.b"`},
		{[]CheckpointEntry{{Path: keyPath(1, "x"), Tensor: a}, {Path: keyPath("1", "x"), Tensor: b}}, `"1.x"`},
		{[]CheckpointEntry{{Path: keyPath("a"), Tensor: a}, {Path: keyPath("a\x00x"), Tensor: b}}, `"a\x00x"`},
		{[]CheckpointEntry{{Path: keyPath("s"), Value: "a\x00b"}}, `["s"]`},
		{[]CheckpointEntry{{Path: keyPath("k\x00"), Value: 1.0}}, "NUL"},
	} {
		file := filepath.Join(t.TempDir(), "ck.gguf")
		err := SaveCheckpoint(file, c.entries)
		assert.ErrorIs(t, err, ErrArgument)
		assert.ErrorContains(t, err, c.want)
		assert.NoFileExists(t, file)
	}
}

// TestCheckpointV1FilesLoadFlat: a file written by gglua's first format
// (testdata/checkpoint_v1.gguf, by scripts/reference/checkpoint_v1.lua run
// with the gglua of commit 6b064b6) loads as it always did: every entry
// under its dotted name, one key.
func TestCheckpointV1FilesLoadFlat(t *testing.T) {
	loaded, err := LoadCheckpoint("testdata/checkpoint_v1.gguf")
	require.NoError(t, err)
	got := byPath(loaded)
	require.Len(t, got, 7)
	assertClose(t, []float64{1, 2, 3, 4}, values(t, got[`["model.weight"]`].Tensor), 0, "model.weight")
	assert.Equal(t, []int{2, 2}, got[`["model.weight"]`].Tensor.Shape())
	assertClose(t, []float64{0.5, -0.25}, values(t, got[`["model.1.bias"]`].Tensor), 0, "model.1.bias")
	assert.Equal(t, ggmlcgo.F16, got[`["half"]`].Tensor.Dtype())
	assert.Equal(t, 3.0, got[`["step"]`].Value)
	assert.Equal(t, 0.1, got[`["lr"]`].Value)
	assert.Equal(t, "hello", got[`["note"]`].Value)
	assert.Equal(t, true, got[`["flag"]`].Value)
}

func TestPathEncoding(t *testing.T) {
	for _, p := range [][]PathKey{
		keyPath("a"), keyPath("a b", "c\"d", ""), keyPath(1, -2.5, "x"), keyPath("\xff\x00", math.Inf(1)),
	} {
		back, err := decodePath(encodePath(p))
		require.NoError(t, err)
		assert.Equal(t, p, back)
	}
	for _, bad := range []string{"", `"a`, `"a"x`, "nan", "1 2x"} {
		_, err := decodePath(bad)
		assert.Error(t, err, bad)
	}
}

// TestCheckpointI32RoundTrip: i32 tensors (a host one, a device one, one
// nested in a table) are saved as GGML_TYPE_I32 and come back as i32 with
// every value exact, past 2^24 (where an f32 would round) and at int32's
// ends included.
func TestCheckpointI32RoundTrip(t *testing.T) {
	e := newEngine(t)
	file := filepath.Join(t.TempDir(), "ints.gguf")
	want := []int32{1<<24 + 1, math.MaxInt32, math.MinInt32, 0, -5, 1<<24 + 3}
	labels, err := FromInt32(want, 2, 3)
	require.NoError(t, err)
	col, err := FromInt32([]int32{7, -(1<<24 + 1)}, 2, 1)
	require.NoError(t, err)
	onDevice, err := col.ToDevice(e, residency.Pass, ggmlcgo.I32)
	require.NoError(t, err)
	require.True(t, onDevice.OnDevice())
	entries := []CheckpointEntry{
		{Path: keyPath("labels"), Tensor: labels},
		{Path: keyPath("data", "split", 1), Tensor: onDevice},
		{Path: keyPath("weights"), Tensor: host(t, []int{2}, 0.5, -1)},
	}
	require.NoError(t, SaveCheckpoint(file, entries))

	// Other ggml tools see an I32 tensor.
	f, err := ggmlcgo.OpenGGUF(file)
	require.NoError(t, err)
	types := map[string]ggmlcgo.Type{}
	for _, info := range f.Tensors() {
		types[info.Name] = info.Type
	}
	f.Close()
	assert.Equal(t, map[string]ggmlcgo.Type{"labels": ggmlcgo.I32, "data.split.1": ggmlcgo.I32, "weights": ggmlcgo.F32}, types)

	loaded, err := LoadCheckpoint(file)
	require.NoError(t, err)
	got := byPath(loaded)
	require.Len(t, got, 3)
	for _, c := range []struct {
		path  string
		shape []int
		ints  []int64
	}{
		{`["labels"]`, []int{2, 3}, []int64{1<<24 + 1, math.MaxInt32, math.MinInt32, 0, -5, 1<<24 + 3}},
		{`["data"]["split"][1]`, []int{2, 1}, []int64{7, -(1<<24 + 1)}},
	} {
		x := got[c.path].Tensor
		require.NotNil(t, x, c.path)
		assert.Equal(t, ggmlcgo.I32, x.Dtype(), c.path)
		assert.Equal(t, c.shape, x.Shape(), c.path)
		assert.Equal(t, c.ints, intsOf(t, x), c.path)
	}
	assert.Equal(t, ggmlcgo.F32, got[`["weights"]`].Tensor.Dtype())
	assert.Equal(t, []float32{0.5, -1}, values(t, got[`["weights"]`].Tensor))
}
