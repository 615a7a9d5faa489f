package ggmlcgo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GGUF byte builders for hand-made headers.

func gle(parts ...any) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		if err := binary.Write(&b, binary.LittleEndian, p); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

func gstr(s string) []byte { return append(gle(uint64(len(s))), s...) }

func ghead(nt, nkv uint64) []byte { return append([]byte("GGUF"), gle(uint32(3), nt, nkv)...) }

func gcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// gtensor is one tensor info: name, dims, ne..., type, offset.
func gtensor(name string, typ uint32, offset uint64, ne ...uint64) []byte {
	b := gcat(gstr(name), gle(uint32(len(ne))))
	for _, d := range ne {
		b = append(b, gle(d)...)
	}
	return append(b, gle(typ, offset)...)
}

// padTo pads a header to a multiple of 32 and appends n bytes of data.
func withData(header []byte, n int) []byte {
	for len(header)%32 != 0 {
		header = append(header, 0)
	}
	return append(header, make([]byte, n)...)
}

// ggmlAbortCases are headers that passed the Go pre-check and then reached a
// GGML_ASSERT, a GGML_ABORT or undefined behaviour in ggml's parser: each one
// killed the process before the pre-check learned about it.
func ggmlAbortCases() map[string][]byte {
	align := "general.alignment"
	return map[string][]byte{
		// gguf_get_val_u32 asserts the type and a single value.
		"alignment as string":    gcat(ghead(0, 1), gstr(align), gle(uint32(ggufString)), gstr("32")),
		"alignment as u8":        gcat(ghead(0, 1), gstr(align), gle(uint32(0), uint8(32))),
		"alignment as u64":       gcat(ghead(0, 1), gstr(align), gle(uint32(10), uint64(32))),
		"alignment as f32":       gcat(ghead(0, 1), gstr(align), gle(uint32(6), float32(32))),
		"alignment as u32 array": gcat(ghead(0, 1), gstr(align), gle(uint32(ggufArray), uint32(4), uint64(2), uint32(32), uint32(32))),
		"alignment as empty arr": gcat(ghead(0, 1), gstr(align), gle(uint32(ggufArray), uint32(4), uint64(0))),
		// gguf_find_key compares with strcmp: a key with a NUL inside is
		// found as "general.alignment".
		"alignment key with NUL": gcat(ghead(0, 1), gstr(align+"\x00x"), gle(uint32(ggufString)), gstr("32")),
		// gguf_kv's constructor asserts a non-empty key.
		"empty key":       gcat(ghead(0, 1), gstr(""), gle(uint32(4), uint32(1))),
		"empty key array": gcat(ghead(0, 1), gstr(""), gle(uint32(ggufArray), uint32(4), uint64(1), uint32(1))),
		"empty key after": gcat(ghead(0, 2), gstr("a"), gle(uint32(4), uint32(1)), gstr(""), gle(uint32(ggufString)), gstr("x")),
		// A zero in ne[1..3] divides by zero in the element-count check.
		"zero dimension": withData(gcat(ghead(1, 0), gtensor("w", 0, 0, 4, 0)), 0),
		// A negative type is looked up in ggml's type table for the message.
		"negative type": withData(gcat(ghead(1, 0), gtensor("w", 0xffffffff, 0, 4)), 16),
	}
}

// ggmlRefusedCases are headers the pre-check refuses with a message naming
// the problem (ggml refuses most of them too, with a log line).
func ggmlRefusedCases() map[string][]byte {
	align := "general.alignment"
	return map[string][]byte{
		"alignment 0":           gcat(ghead(0, 1), gstr(align), gle(uint32(4), uint32(0))),
		"alignment 48":          gcat(ghead(0, 1), gstr(align), gle(uint32(4), uint32(48))),
		"duplicate key":         gcat(ghead(0, 2), gstr("a"), gle(uint32(4), uint32(1)), gstr("a"), gle(uint32(4), uint32(2))),
		"key with NUL":          gcat(ghead(0, 1), gstr("a\x00b"), gle(uint32(4), uint32(1))),
		"string value with NUL": gcat(ghead(0, 1), gstr("a"), gle(uint32(ggufString)), gstr("x\x00y")),
		"array string with NUL": gcat(ghead(0, 1), gstr("a"), gle(uint32(ggufArray), uint32(ggufString), uint64(2)), gstr("x"), gstr("y\x00z")),
		"empty bad-type array":  gcat(ghead(0, 1), gstr("a"), gle(uint32(ggufArray), uint32(77), uint64(0))),
		"nested array":          gcat(ghead(0, 1), gstr("a"), gle(uint32(ggufArray), uint32(ggufArray), uint64(0))),
		"long tensor name":      withData(gcat(ghead(1, 0), gtensor(strings.Repeat("n", 64), 0, 0, 4)), 16),
		"tensor name with NUL":  withData(gcat(ghead(1, 0), gtensor("a\x00b", 0, 0, 4)), 16),
		"duplicate tensors":     withData(gcat(ghead(2, 0), gtensor("a", 0, 0, 4), gtensor("a", 0, 32, 4)), 48),
		"NUL-equal tensors":     withData(gcat(ghead(2, 0), gtensor("a", 0, 0, 4), gtensor("a\x00x", 0, 32, 4)), 48),
		"zero dims":             withData(gcat(ghead(1, 0), gstr("w"), gle(uint32(0), uint32(0), uint64(0))), 4),
		"negative ne":           withData(gcat(ghead(1, 0), gtensor("w", 0, 0, 1<<63)), 4),
		"too many tensors":      gcat(ghead(MaxGGUFTensors+1, 0), make([]byte, 32*(MaxGGUFTensors+1))),
		"too many values":       gcat(ghead(0, MaxGGUFValues+1), make([]byte, 14*(MaxGGUFValues+1))),
	}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.gguf")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// TestGGUFHeadersThatAbortGGMLAreRefused: each case used to kill the process
// in ggml (run one alone to see it: -run 'TestGGUFHeadersThatAbortGGML/empty_key').
func TestGGUFHeadersThatAbortGGMLAreRefused(t *testing.T) {
	for name, data := range ggmlAbortCases() {
		t.Run(name, func(t *testing.T) {
			_, err := OpenGGUF(writeTemp(t, data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "gguf: ")
		})
	}
}

func TestGGUFHeadersGGMLRefusesAreRefused(t *testing.T) {
	for name, data := range ggmlRefusedCases() {
		t.Run(name, func(t *testing.T) {
			_, err := OpenGGUF(writeTemp(t, data))
			require.Error(t, err)
		})
	}
	// The messages name the problem.
	msg := func(data []byte) string {
		_, err := OpenGGUF(writeTemp(t, data))
		require.Error(t, err)
		return err.Error()
	}
	abort, refused := ggmlAbortCases(), ggmlRefusedCases()
	assert.Contains(t, msg(abort["alignment as string"]), "general.alignment must be a single u32")
	assert.Contains(t, msg(abort["empty key"]), "key 1 has an empty name")
	assert.Contains(t, msg(abort["empty key after"]), "key 2 has an empty name")
	assert.Contains(t, msg(abort["zero dimension"]), "dimension 2 of tensor \"w\" has 0 elements")
	assert.Contains(t, msg(refused["alignment 48"]), "alignment 48 is not a power of 2")
	assert.Contains(t, msg(refused["duplicate key"]), "duplicate key \"a\"")
	assert.Contains(t, msg(refused["NUL-equal tensors"]), "NUL byte")
	assert.Contains(t, msg(refused["string value with NUL"]), `key "a": its string value holds a NUL byte`)
	assert.Contains(t, msg(refused["array string with NUL"]), `key "a": string 2 holds a NUL byte`)
	assert.Contains(t, msg(refused["too many tensors"]), fmt.Sprintf("more than the %d gglua reads", MaxGGUFTensors))
	assert.Contains(t, msg(refused["too many values"]), fmt.Sprintf("more than the %d gglua reads", MaxGGUFValues))
}

// alignedGGUF is a valid file laid out at alignment align, with an f32
// tensor "a" = {1, 2, 3} and an f16 tensor "b" of 5x2 zeros.
func alignedGGUF(align uint32) []byte {
	pad := func(n uint64) uint64 { return (n + uint64(align) - 1) / uint64(align) * uint64(align) }
	b := gcat(ghead(2, 1), gstr("general.alignment"), gle(uint32(ggufU32), align),
		gtensor("a", 0, 0, 3), gtensor("b", 1, pad(12), 5, 2))
	b = append(b, make([]byte, pad(uint64(len(b)))-uint64(len(b)))...)
	b = append(b, f32bytes(1, 2, 3)...)
	b = append(b, make([]byte, pad(12)-12+20)...)
	return b
}

// TestGGUFValidAlignmentLoads: the checks refuse only what ggml cannot read.
func TestGGUFValidAlignmentLoads(t *testing.T) {
	for _, align := range []uint32{1, 8, 32, 64, 4096} {
		g, err := OpenGGUF(writeTemp(t, alignedGGUF(align)))
		require.NoError(t, err, "alignment %d", align)
		v, ok := g.U32("general.alignment")
		assert.True(t, ok)
		assert.Equal(t, align, v)
		_, ok = g.U32("general.alignment\x00x") // not cut at the NUL
		assert.False(t, ok)
		require.Len(t, g.Tensors(), 2)
		assert.Equal(t, [4]int64{5, 2, 1, 1}, g.Tensors()[1].Ne)
		data, err := g.ReadTensor(g.Tensors()[0])
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 3}, bytesf32(data))
		g.Close()
	}
}

// TestGGUFWriterRefusesWhatGGMLAborts: keys and names that would abort in
// ggml's writer or be cut at a NUL are errors.
func TestGGUFWriterRefusesWhatGGMLAborts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.gguf")
	cases := map[string]struct {
		set  func(w *GGUFWriter)
		want string
	}{
		"empty key":        {func(w *GGUFWriter) { w.SetString("", "x") }, "key is empty"},
		"empty u32 key":    {func(w *GGUFWriter) { w.SetU32("", 1) }, "key is empty"},
		"alignment string": {func(w *GGUFWriter) { w.SetString("general.alignment", "32") }, "general.alignment cannot be set"},
		"alignment u32":    {func(w *GGUFWriter) { w.SetU32("general.alignment", 3) }, "general.alignment cannot be set"},
		"NUL in key":       {func(w *GGUFWriter) { w.SetString("a\x00b", "x") }, "holds a NUL byte"},
		"NUL in value":     {func(w *GGUFWriter) { w.SetString("a", "x\x00y") }, "holds a NUL byte"},
		"first error kept": {func(w *GGUFWriter) { w.SetString("", "x"); w.SetString("a\x00", "") }, "key is empty"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			w := NewGGUFWriter()
			defer w.Free()
			c.set(w)
			w.SetString("fine", "ok")
			err := w.WriteFile(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NoFileExists(t, path)
		})
	}
	w := NewGGUFWriter()
	defer w.Free()
	require.NoError(t, w.AddTensor("a", F32, []int64{1}, f32bytes(1)))
	err := w.AddTensor("a\x00x", F32, []int64{1}, f32bytes(2))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NUL byte")
	require.NoError(t, w.WriteFile(path))
	assert.Equal(t, float32(1), readOne(t, path))
}

// TestGGUFWriterBounds: the writer refuses what the reader would refuse, so
// every file gglua writes loads again.
func TestGGUFWriterBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("writes the largest file the bounds allow")
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	w := NewGGUFWriter()
	defer w.Free()
	one := f32bytes(1)
	for i := 0; i < MaxGGUFTensors; i++ {
		require.NoError(t, w.AddTensor(fmt.Sprintf("t%d", i), F32, []int64{1}, one))
	}
	err := w.AddTensor("one-more", F32, []int64{1}, one)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("more than %d tensors", MaxGGUFTensors))
	for i := 0; i < MaxGGUFValues; i++ {
		w.SetString(fmt.Sprintf("k%d", i), "v")
	}
	w.SetString("k0", "again") // replacing a key is not one more
	require.NoError(t, w.WriteFile(path))
	g, err := OpenGGUF(path)
	require.NoError(t, err)
	assert.Len(t, g.Tensors(), MaxGGUFTensors)
	v, ok := g.String("k0")
	assert.True(t, ok)
	assert.Equal(t, "again", v)
	g.Close()
	w.SetString("one-more", "v")
	err = w.WriteFile(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("more than %d metadata keys", MaxGGUFValues))
}

// TestOpenGGUFRefusesNonRegularFiles: a FIFO used to block open() forever.
func TestOpenGGUFRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	link := filepath.Join(dir, "fifo-link")
	require.NoError(t, os.Symlink("fifo", link))
	for _, p := range []string{fifo, link, dir, "/dev/null", "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			_, err := OpenGGUF(p)
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err, p)
			assert.Contains(t, err.Error(), "not a regular file", p)
		case <-time.After(5 * time.Second):
			t.Fatalf("OpenGGUF(%s) blocked", p)
		}
	}

	// A symlink to a regular file is fine.
	real := filepath.Join(dir, "real.gguf")
	w := NewGGUFWriter()
	require.NoError(t, w.AddTensor("a", F32, []int64{1}, f32bytes(7)))
	require.NoError(t, w.WriteFile(real))
	w.Free()
	require.NoError(t, os.Symlink("real.gguf", filepath.Join(dir, "real-link")))
	g, err := OpenGGUF(filepath.Join(dir, "real-link"))
	require.NoError(t, err)
	require.Len(t, g.Tensors(), 1)
	g.Close()
}

func writeOne(t *testing.T, path string, v float32) error {
	t.Helper()
	w := NewGGUFWriter()
	defer w.Free()
	require.NoError(t, w.AddTensor("a", F32, []int64{1}, f32bytes(v)))
	return w.WriteFile(path)
}

func readOne(t *testing.T, path string) float32 {
	t.Helper()
	g, err := OpenGGUF(path)
	require.NoError(t, err)
	defer g.Close()
	require.Len(t, g.Tensors(), 1)
	data, err := g.ReadTensor(g.Tensors()[0])
	require.NoError(t, err)
	return bytesf32(data)[0]
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestGGUFWriteFileMode: a new file gets 0666 less the umask, as any
// program's; an existing file keeps its mode.
func TestGGUFWriteFileMode(t *testing.T) {
	for _, c := range []struct{ umask, want int }{{0o022, 0o644}, {0o027, 0o640}, {0o002, 0o664}} {
		old := syscall.Umask(c.umask)
		path := filepath.Join(t.TempDir(), "m.gguf")
		err := writeOne(t, path, 1)
		syscall.Umask(old)
		require.NoError(t, err)
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(c.want), st.Mode().Perm(), "umask %03o", c.umask)
	}
	path := filepath.Join(t.TempDir(), "keep.gguf")
	require.NoError(t, writeOne(t, path, 1))
	for i, mode := range []os.FileMode{0o600, 0o640, 0o444} {
		require.NoError(t, os.Chmod(path, mode))
		require.NoError(t, writeOne(t, path, float32(i+2)))
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, mode, st.Mode().Perm())
		assert.Equal(t, float32(i+2), readOne(t, path))
	}
}

// TestGGUFWriteFileFollowsSymlinks: saving through a link writes its target
// and leaves the link a link.
func TestGGUFWriteFileFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	target := filepath.Join(sub, "real.gguf")
	require.NoError(t, writeOne(t, target, 1))
	link := filepath.Join(dir, "link.gguf")
	require.NoError(t, os.Symlink("sub/real.gguf", link))
	chain := filepath.Join(dir, "chain.gguf")
	require.NoError(t, os.Symlink("link.gguf", chain))

	require.NoError(t, writeOne(t, chain, 2))
	for _, l := range []string{link, chain} {
		st, err := os.Lstat(l)
		require.NoError(t, err)
		assert.True(t, st.Mode()&os.ModeSymlink != 0, "%s is still a symlink", l)
	}
	assert.Equal(t, float32(2), readOne(t, target))
	assert.ElementsMatch(t, []string{"real.gguf"}, dirNames(t, sub), "no temporary file left")

	// A dangling link is written through too: the target is created.
	dangling := filepath.Join(dir, "dangling.gguf")
	require.NoError(t, os.Symlink("sub/new.gguf", dangling))
	require.NoError(t, writeOne(t, dangling, 3))
	assert.Equal(t, float32(3), readOne(t, filepath.Join(sub, "new.gguf")))
	st, err := os.Lstat(dangling)
	require.NoError(t, err)
	assert.True(t, st.Mode()&os.ModeSymlink != 0)

	// A loop of links is an error, not a hang.
	require.NoError(t, os.Symlink("loop2", filepath.Join(dir, "loop1")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(dir, "loop2")))
	assert.Error(t, writeOne(t, filepath.Join(dir, "loop1"), 4))
}

// TestGGUFWriteFileFailureKeepsOldFile: a save that fails part-way leaves the
// previous checkpoint as it was, and no temporary file.
func TestGGUFWriteFileFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.gguf")
	require.NoError(t, writeOne(t, path, 1))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	for _, stage := range []string{"written", "synced"} {
		injected := errors.New("injected failure " + stage)
		ggufWriteHook = func(s string) error {
			if s == stage {
				return injected
			}
			return nil
		}
		err = writeOne(t, path, 2)
		ggufWriteHook = nil
		require.ErrorIs(t, err, injected)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after, "the old file is untouched")
		assert.Equal(t, []string{"ckpt.gguf"}, dirNames(t, dir), "no temporary file left")
	}

	// An unwritable folder (root writes anyway).
	if os.Geteuid() != 0 {
		ro := filepath.Join(t.TempDir(), "ro")
		require.NoError(t, os.Mkdir(ro, 0o755))
		p := filepath.Join(ro, "c.gguf")
		require.NoError(t, writeOne(t, p, 1))
		require.NoError(t, os.Chmod(ro, 0o555))
		defer os.Chmod(ro, 0o755)
		require.Error(t, writeOne(t, p, 2))
		assert.Equal(t, float32(1), readOne(t, p))
	}

	// Saving over something that is not a regular file is refused.
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	err = writeOne(t, fifo, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
	st, err := os.Lstat(fifo)
	require.NoError(t, err)
	assert.True(t, st.Mode()&os.ModeNamedPipe != 0, "the FIFO is still there")
	require.Error(t, writeOne(t, dir, 1), "a folder")
}

// validGGUFSeeds are files the writer makes: the fuzzer mutates real layouts.
func validGGUFSeeds(t testing.TB) [][]byte {
	var out [][]byte
	dir := t.TempDir()
	build := func(f func(w *GGUFWriter)) {
		w := NewGGUFWriter()
		defer w.Free()
		f(w)
		path := filepath.Join(dir, "seed.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	build(func(w *GGUFWriter) {})
	build(func(w *GGUFWriter) {
		w.SetString("general.architecture", "gglua")
		if err := w.AddTensor("w", F32, []int64{3, 2}, f32bytes(1, 2, 3, 4, 5, 6)); err != nil {
			t.Fatal(err)
		}
	})
	build(func(w *GGUFWriter) {
		w.SetString("gglua.shape.a", "2x2")
		w.SetU32("n", 3)
		for i, ty := range []Type{F32, F16, BF16, I32} {
			name := string(rune('a' + i))
			if err := w.AddTensor(name, ty, []int64{2, 2}, make([]byte, 4*ty.Size())); err != nil {
				t.Fatal(err)
			}
		}
	})
	return append(out, alignedGGUF(8), alignedGGUF(64))
}

// FuzzGGUF feeds arbitrary bytes to the GGUF reader, as tensor.load does:
// any input is a GGUFFile or an error, never a crash, a hang or a huge
// allocation. The seed corpus (testdata/fuzz/FuzzGGUF) holds the writer's
// files and the lying or aborting headers above.
func FuzzGGUF(f *testing.F) {
	SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Cleanup(func() { SetLogger(nil) })
	for _, data := range validGGUFSeeds(f) {
		f.Add(data)
	}
	for _, m := range []map[string][]byte{ggmlAbortCases(), ggmlRefusedCases(), lyingGGUFHeaders()} {
		for _, data := range m {
			if len(data) < 1<<16 {
				f.Add(data)
			}
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.gguf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := OpenGGUF(path)
		if err != nil {
			return
		}
		defer g.Close()
		for _, info := range g.Tensors() {
			if info.Offset < 0 || info.Size < 0 || info.Offset+info.Size > int64(len(data)) {
				t.Fatalf("tensor %q at %d+%d is outside the %d-byte file", info.Name, info.Offset, info.Size, len(data))
			}
			if _, err := g.ReadTensor(info); err != nil {
				t.Fatalf("tensor %q: %v", info.Name, err)
			}
		}
		for _, k := range g.Keys() { // every reader on every key: false, never an abort
			g.String(k)
			g.U32(k)
			g.Int(k)
			g.Float(k)
			g.Bool(k)
			g.Strings(k)
			g.Floats(k)
			g.Ints(k)
		}
	})
}

// lyingGGUFHeaders are headers whose counts and lengths promise far more
// than the file holds.
func lyingGGUFHeaders() map[string][]byte {
	return map[string][]byte{
		"empty":            {},
		"bad magic":        []byte("GGML0000000000000000000000"),
		"bad version":      append([]byte("GGUF"), gle(uint32(99), uint64(0), uint64(0))...),
		"2^60 tensors":     ghead(1<<60, 0),
		"2^60 values":      ghead(0, 1<<60),
		"huge key":         append(ghead(0, 1), gle(uint64(1<<40))...),
		"huge string":      gcat(ghead(0, 1), gstr("k"), gle(uint32(8), uint64(1<<40))),
		"huge array":       gcat(ghead(0, 1), gstr("k"), gle(uint32(9), uint32(6), uint64(1<<50))),
		"huge str array":   gcat(ghead(0, 1), gstr("k"), gle(uint32(9), uint32(8), uint64(1<<50))),
		"bad type":         gcat(ghead(0, 1), gstr("k"), gle(uint32(77))),
		"tensor dims":      gcat(ghead(1, 0), gstr("w"), gle(uint32(9))),
		"tensor ne":        gcat(ghead(1, 0), gstr("w"), gle(uint32(2), uint64(1<<40), uint64(1<<40), uint32(0), uint64(0))),
		"tensor type":      gcat(ghead(1, 0), gstr("w"), gle(uint32(1), uint64(4), uint32(1000), uint64(0))),
		"truncated tensor": gcat(ghead(1, 0), gstr("w"), gle(uint32(1))),
		"tensor past end":  withData(gcat(ghead(1, 0), gtensor("w", 0, 0, 1000)), 16),
	}
}

// TestLyingGGUFHeadersAreRefused: each is an error before ggml's parser
// could allocate what the header claims.
func TestLyingGGUFHeadersAreRefused(t *testing.T) {
	for name, data := range lyingGGUFHeaders() {
		_, err := OpenGGUF(writeTemp(t, data))
		assert.Error(t, err, name)
	}
}

// TestWriteGGUFSeedCorpus rewrites testdata/fuzz/FuzzGGUF from the cases
// above when GGLUA_WRITE_FUZZ_SEEDS=1 (after adding a case).
func TestWriteGGUFSeedCorpus(t *testing.T) {
	if os.Getenv("GGLUA_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set GGLUA_WRITE_FUZZ_SEEDS=1 to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzGGUF")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write := func(name string, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		name = "seed-" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(name))
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	for i, data := range validGGUFSeeds(t) {
		write(fmt.Sprintf("valid %d", i+1), data)
	}
	for prefix, m := range map[string]map[string][]byte{"abort": ggmlAbortCases(), "refused": ggmlRefusedCases(), "lying": lyingGGUFHeaders()} {
		for name, data := range m {
			write(prefix+" "+name, data)
		}
	}
}

// TestGGUFMetadataAndQuantizedTensorsRoundTrip: every kind of value a
// llama.cpp model file holds (counts, ids, floats, flags, a vocabulary's
// token strings, scores and types) and tensors of the quantized types
// gglua reads come back as written; typed readers refuse other types.
func TestGGUFMetadataAndQuantizedTensorsRoundTrip(t *testing.T) {
	w := NewGGUFWriter()
	defer w.Free()
	w.SetString("general.architecture", "llama")
	w.SetU32("llama.block_count", 2)
	w.SetI32("tokenizer.ggml.padding_token_id", -1)
	w.SetF32("llama.rope.freq_base", 10000.5)
	w.SetBool("tokenizer.ggml.add_bos_token", true)
	tokens := []string{"<unk>", "<s>", "</s>", "▁a", "é", ""}
	w.SetStrings("tokenizer.ggml.tokens", tokens)
	w.SetF32s("tokenizer.ggml.scores", []float32{0, -1.5, 2, 3.25, -4, 5})
	w.SetI32s("tokenizer.ggml.token_type", []int32{2, 3, 3, 1, 1, 6})
	w.SetI32s("empty", nil)
	rng := rand.New(rand.NewSource(1))
	want := map[string][]byte{}
	types := []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K}
	for _, typ := range types {
		ne := []int64{2 * typ.BlockSize(), 3}
		n, err := TensorBytes(typ, ne)
		require.NoError(t, err)
		assert.Equal(t, 2*3*typ.TypeBytes(), n, "%v", typ)
		data := make([]byte, n)
		rng.Read(data)
		require.NoError(t, w.AddTensor("w."+typ.String(), typ, ne, data))
		want["w."+typ.String()] = data
	}
	err := w.AddTensor("bad", Q4_0, []int64{16, 2}, make([]byte, 18))
	assert.ErrorContains(t, err, "whole blocks of 32", "a row of half a block")
	err = w.AddTensor("short", Q8_0, []int64{32}, make([]byte, 33))
	assert.ErrorContains(t, err, "33 bytes given for 34")
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, w.WriteFile(path))

	g, err := OpenGGUF(path)
	require.NoError(t, err)
	defer g.Close()
	n, ok := g.Int("llama.block_count")
	assert.True(t, ok)
	assert.Equal(t, int64(2), n)
	n, ok = g.Int("tokenizer.ggml.padding_token_id")
	assert.True(t, ok)
	assert.Equal(t, int64(-1), n)
	f, ok := g.Float("llama.rope.freq_base")
	assert.True(t, ok)
	assert.Equal(t, 10000.5, f)
	b, ok := g.Bool("tokenizer.ggml.add_bos_token")
	assert.True(t, ok && b)
	got, ok := g.Strings("tokenizer.ggml.tokens")
	assert.True(t, ok)
	assert.Equal(t, tokens, got)
	scores, ok := g.Floats("tokenizer.ggml.scores")
	assert.True(t, ok)
	assert.Equal(t, []float64{0, -1.5, 2, 3.25, -4, 5}, scores)
	kinds, ok := g.Ints("tokenizer.ggml.token_type")
	assert.True(t, ok)
	assert.Equal(t, []int64{2, 3, 3, 1, 1, 6}, kinds)
	empty, ok := g.Ints("empty")
	assert.True(t, ok)
	assert.Empty(t, empty)
	// Another type, or a key that is not there: false, never an abort.
	for _, key := range []string{"general.architecture", "tokenizer.ggml.tokens", "nope", "llama.block_count\x00"} {
		_, ok := g.Int(key)
		assert.False(t, ok, "Int(%q)", key)
		_, ok = g.Float(key)
		assert.False(t, ok, "Float(%q)", key)
		_, ok = g.Bool(key)
		assert.False(t, ok, "Bool(%q)", key)
	}
	_, ok = g.Strings("tokenizer.ggml.scores")
	assert.False(t, ok)
	_, ok = g.Floats("tokenizer.ggml.tokens")
	assert.False(t, ok)
	_, ok = g.Ints("tokenizer.ggml.scores")
	assert.False(t, ok)
	require.Len(t, g.Tensors(), len(types))
	for i, info := range g.Tensors() {
		assert.Equal(t, types[i], info.Type)
		assert.Equal(t, [MaxDims]int64{2 * types[i].BlockSize(), 3, 1, 1}, info.Ne)
		data, err := g.ReadTensor(info)
		require.NoError(t, err)
		assert.Equal(t, want[info.Name], data, info.Name)
	}
}
