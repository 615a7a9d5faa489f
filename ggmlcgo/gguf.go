package ggmlcgo

// #include <stdlib.h>
// #include <string.h>
// #include "gglua_ggml.h"
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"
)

// GGUFWriter builds a GGUF file (ggml's checkpoint format) in memory.
type GGUFWriter struct {
	ctx   *C.struct_gguf_context
	hosts []*C.struct_ggml_context // host copies of the tensors, freed by Free
	names map[string]bool
}

// NewGGUFWriter starts an empty GGUF file.
func NewGGUFWriter() *GGUFWriter {
	return &GGUFWriter{ctx: C.gguf_init_empty(), names: map[string]bool{}}
}

func withCString(s string, f func(*C.char)) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	f(cs)
}

// SetString sets a string metadata key.
func (w *GGUFWriter) SetString(key, val string) {
	withCString(key, func(k *C.char) {
		withCString(val, func(v *C.char) { C.gguf_set_val_str(w.ctx, k, v) })
	})
}

// SetU32 sets a uint32 metadata key.
func (w *GGUFWriter) SetU32(key string, val uint32) {
	withCString(key, func(k *C.char) { C.gguf_set_val_u32(w.ctx, k, C.uint32_t(val)) })
}

// AddTensor adds a tensor of type t and ne (innermost first) whose bytes are
// data. The bytes are copied.
func (w *GGUFWriter) AddTensor(name string, t Type, ne []int64, data []byte) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q must be 1 to %d bytes", name, MaxNameLen)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor name %q", name)
	}
	n, err := CheckShape(t, ne)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if int64(len(data)) != n*t.Size() {
		return fmt.Errorf("gguf: tensor %q: %d bytes given for %d", name, len(data), n*t.Size())
	}
	size := C.ggml_tensor_overhead() + C.size_t(len(data)) + 64
	host := C.ggml_init(C.struct_ggml_init_params{mem_size: size})
	if host == nil {
		return errors.New("gguf: out of host memory")
	}
	w.hosts = append(w.hosts, host)
	var cne [MaxDims]C.int64_t
	for i, d := range ne {
		cne[i] = C.int64_t(d)
	}
	tp := C.ggml_new_tensor(host, C.enum_ggml_type(t), C.int(len(ne)), &cne[0])
	if len(data) > 0 {
		C.memcpy(tp.data, unsafe.Pointer(&data[0]), C.size_t(len(data)))
	}
	if err := (Tensor{p: tp}).SetName(name); err != nil {
		return err
	}
	C.gguf_add_tensor(w.ctx, tp)
	w.names[name] = true
	return nil
}

// WriteFile writes the file atomically: to a temporary file beside path,
// then renamed over it, so a failed save never leaves half a checkpoint.
func (w *GGUFWriter) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gglua-*.gguf")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	ok := false
	withCString(tmpName, func(p *C.char) { ok = bool(C.gguf_write_to_file(w.ctx, p, false)) })
	if !ok {
		os.Remove(tmpName)
		return fmt.Errorf("gguf: could not write %s", path)
	}
	if err := os.Rename(tmpName, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// Free releases the writer.
func (w *GGUFWriter) Free() {
	for _, h := range w.hosts {
		C.ggml_free(h)
	}
	w.hosts = nil
	if w.ctx != nil {
		C.gguf_free(w.ctx)
		w.ctx = nil
	}
}

// GGUFTensorInfo describes one tensor of a GGUF file.
type GGUFTensorInfo struct {
	Name   string
	Type   Type
	Ne     [MaxDims]int64
	Offset int64 // from the start of the file
	Size   int64
}

// GGUFFile is an open GGUF file: its metadata is parsed, tensor data is read
// on demand.
type GGUFFile struct {
	ctx     *C.struct_gguf_context
	meta    *C.struct_ggml_context
	f       *os.File
	tensors []GGUFTensorInfo
}

// OpenGGUF parses the metadata of a GGUF file.
func OpenGGUF(path string) (*GGUFFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if err := checkGGUFHeader(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	g := &GGUFFile{f: f}
	var meta *C.struct_ggml_context // a C-only variable: cgo refuses &g.meta
	withCString(path, func(p *C.char) {
		g.ctx = C.gguf_init_from_file(p, C.struct_gguf_init_params{no_alloc: true, ctx: &meta})
	})
	g.meta = meta
	if g.ctx == nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %s is not a valid GGUF file", path)
	}
	base := int64(C.gguf_get_data_offset(g.ctx))
	n := int64(C.gguf_get_n_tensors(g.ctx))
	for i := int64(0); i < n; i++ {
		id := C.int64_t(i)
		info := GGUFTensorInfo{
			Name:   C.GoString(C.gguf_get_tensor_name(g.ctx, id)),
			Type:   Type(C.gguf_get_tensor_type(g.ctx, id)),
			Offset: base + int64(C.gguf_get_tensor_offset(g.ctx, id)),
			Size:   int64(C.gguf_get_tensor_size(g.ctx, id)),
		}
		if t, ok := (&Context{p: g.meta}).Lookup(info.Name); ok {
			info.Ne = t.Ne()
		}
		if info.Offset+info.Size > st.Size() {
			g.Close()
			return nil, fmt.Errorf("gguf: %s is truncated: tensor %q ends at byte %d of %d", path, info.Name, info.Offset+info.Size, st.Size())
		}
		g.tensors = append(g.tensors, info)
	}
	return g, nil
}

// Tensors lists the file's tensors in file order.
func (g *GGUFFile) Tensors() []GGUFTensorInfo { return g.tensors }

// String returns a string metadata value.
func (g *GGUFFile) String(key string) (string, bool) {
	var id C.int64_t
	withCString(key, func(k *C.char) { id = C.gguf_find_key(g.ctx, k) })
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_STRING {
		return "", false
	}
	return C.GoString(C.gguf_get_val_str(g.ctx, id)), true
}

// U32 returns a uint32 metadata value.
func (g *GGUFFile) U32(key string) (uint32, bool) {
	var id C.int64_t
	withCString(key, func(k *C.char) { id = C.gguf_find_key(g.ctx, k) })
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_UINT32 {
		return 0, false
	}
	return uint32(C.gguf_get_val_u32(g.ctx, id)), true
}

// ReadTensor reads the bytes of tensor info.
func (g *GGUFFile) ReadTensor(info GGUFTensorInfo) ([]byte, error) {
	buf := make([]byte, info.Size)
	if _, err := g.f.ReadAt(buf, info.Offset); err != nil && !(errors.Is(err, io.EOF) && info.Size == 0) {
		return nil, fmt.Errorf("gguf: reading tensor %q: %w", info.Name, err)
	}
	return buf, nil
}

// Close releases the file.
func (g *GGUFFile) Close() {
	if g.ctx != nil {
		C.gguf_free(g.ctx)
		g.ctx = nil
	}
	if g.meta != nil {
		C.ggml_free(g.meta)
		g.meta = nil
	}
	g.f.Close()
}

// Keys lists the metadata keys.
func (g *GGUFFile) Keys() []string {
	n := int64(C.gguf_get_n_kv(g.ctx))
	out := make([]string, 0, n)
	for i := int64(0); i < n; i++ {
		out = append(out, C.GoString(C.gguf_get_key(g.ctx, C.int64_t(i))))
	}
	return out
}
