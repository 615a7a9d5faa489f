package ggmlcgo

// #include <stdlib.h>
// #include <string.h>
// #include "gglua_ggml.h"
import "C"

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// GGUFWriter builds a GGUF file (ggml's checkpoint format) in memory.
type GGUFWriter struct {
	ctx   *C.struct_gguf_context
	hosts []*C.struct_ggml_context // host copies of the tensors, freed by Free
	names map[string]bool
	keys  map[string]bool
	err   error // the first bad Set call, returned by WriteFile
}

// NewGGUFWriter starts an empty GGUF file.
func NewGGUFWriter() *GGUFWriter {
	return &GGUFWriter{ctx: C.gguf_init_empty(), names: map[string]bool{}, keys: map[string]bool{}}
}

func withCString(s string, f func(*C.char)) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	f(cs)
}

// checkKey refuses, before ggml asserts or truncates: an empty key, a NUL
// byte in a key or string value (C would cut it there), and
// general.alignment (ggml aborts on any type but u32, and its writer lays
// tensors out at its default alignment whatever the key says).
func (w *GGUFWriter) checkKey(key string, vals ...string) bool {
	if w.err != nil {
		return false
	}
	switch {
	case key == "":
		w.err = errors.New("gguf: a metadata key is empty")
	case strings.IndexByte(key, 0) >= 0:
		w.err = fmt.Errorf("gguf: metadata key %q holds a NUL byte", key)
	case key == ggufAlignmentKey:
		w.err = fmt.Errorf("gguf: %s cannot be set", ggufAlignmentKey)
	case !w.keys[key] && len(w.keys) >= MaxGGUFValues:
		w.err = fmt.Errorf("gguf: more than %d metadata keys", MaxGGUFValues)
	}
	for _, v := range vals {
		if w.err == nil && strings.IndexByte(v, 0) >= 0 {
			w.err = fmt.Errorf("gguf: the value of %q holds a NUL byte", key)
		}
	}
	if w.err != nil {
		return false
	}
	w.keys[key] = true
	return true
}

// SetString sets a string metadata key. A bad key or value makes WriteFile
// fail.
func (w *GGUFWriter) SetString(key, val string) {
	if !w.checkKey(key, val) {
		return
	}
	withCString(key, func(k *C.char) {
		withCString(val, func(v *C.char) { C.gguf_set_val_str(w.ctx, k, v) })
	})
}

// SetU32 sets a uint32 metadata key. A bad key makes WriteFile fail.
func (w *GGUFWriter) SetU32(key string, val uint32) {
	if !w.checkKey(key) {
		return
	}
	withCString(key, func(k *C.char) { C.gguf_set_val_u32(w.ctx, k, C.uint32_t(val)) })
}

// SetI32 sets an int32 metadata key. A bad key makes WriteFile fail.
func (w *GGUFWriter) SetI32(key string, val int32) {
	if !w.checkKey(key) {
		return
	}
	withCString(key, func(k *C.char) { C.gguf_set_val_i32(w.ctx, k, C.int32_t(val)) })
}

// SetF32 sets a float32 metadata key. A bad key makes WriteFile fail.
func (w *GGUFWriter) SetF32(key string, val float32) {
	if !w.checkKey(key) {
		return
	}
	withCString(key, func(k *C.char) { C.gguf_set_val_f32(w.ctx, k, C.float(val)) })
}

// SetBool sets a bool metadata key. A bad key makes WriteFile fail.
func (w *GGUFWriter) SetBool(key string, val bool) {
	if !w.checkKey(key) {
		return
	}
	withCString(key, func(k *C.char) { C.gguf_set_val_bool(w.ctx, k, C.bool(val)) })
}

// SetStrings sets an array-of-strings metadata key (a vocabulary's
// tokens). A bad key or value makes WriteFile fail.
func (w *GGUFWriter) SetStrings(key string, vals []string) {
	if !w.checkKey(key, vals...) {
		return
	}
	cs := make([]*C.char, len(vals))
	for i, v := range vals {
		cs[i] = C.CString(v)
	}
	defer func() {
		for _, c := range cs {
			C.free(unsafe.Pointer(c))
		}
	}()
	// The array of pointers lives in C memory: cgo refuses Go memory that
	// holds Go pointers, and these point at C memory anyway.
	arr := (**C.char)(C.malloc(C.size_t(max(len(cs), 1)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(arr))
	copy(unsafe.Slice(arr, len(cs)), cs)
	withCString(key, func(k *C.char) { C.gguf_set_arr_str(w.ctx, k, arr, C.size_t(len(cs))) })
}

// SetF32s and SetI32s set arrays of numbers (a vocabulary's scores and
// token types). A bad key makes WriteFile fail.
func (w *GGUFWriter) SetF32s(key string, vals []float32) {
	w.setArray(key, C.GGUF_TYPE_FLOAT32, unsafe.Pointer(unsafe.SliceData(vals)), len(vals))
}

func (w *GGUFWriter) SetI32s(key string, vals []int32) {
	w.setArray(key, C.GGUF_TYPE_INT32, unsafe.Pointer(unsafe.SliceData(vals)), len(vals))
}

func (w *GGUFWriter) setArray(key string, typ C.enum_gguf_type, data unsafe.Pointer, n int) {
	if !w.checkKey(key) {
		return
	}
	if n == 0 {
		data = nil
	}
	withCString(key, func(k *C.char) { C.gguf_set_arr_data(w.ctx, k, typ, data, C.size_t(n)) })
}

// AddTensor adds a tensor of type t (unquantized, or one of the quantized
// types gglua reads) and ne (innermost first) whose bytes are data. The
// bytes are copied.
func (w *GGUFWriter) AddTensor(name string, t Type, ne []int64, data []byte) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q must be 1 to %d bytes", name, MaxNameLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		// ggml would cut the name at the NUL: "a\x00x" and "a" collide.
		return fmt.Errorf("gguf: tensor name %q holds a NUL byte", name)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor name %q", name)
	}
	if len(w.names) >= MaxGGUFTensors {
		return fmt.Errorf("gguf: more than %d tensors", MaxGGUFTensors)
	}
	n, err := TensorBytes(t, ne)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if int64(len(data)) != n {
		return fmt.Errorf("gguf: tensor %q: %d bytes given for %d", name, len(data), n)
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

// ggufWriteHook, set by tests, fails WriteFile at a stage: "written" (the
// temporary file is complete) or "synced" (and flushed to disk).
var ggufWriteHook func(stage string) error

func writeHook(stage string) error {
	if ggufWriteHook == nil {
		return nil
	}
	return ggufWriteHook(stage)
}

// maxSymlinks is how many links WriteFile follows, as the kernel's ELOOP.
const maxSymlinks = 40

// resolveSymlinks follows path while it is a symbolic link and returns the
// file it ends at (which may not exist yet).
func resolveSymlinks(path string) (string, error) {
	for i := 0; i < maxSymlinks; i++ {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			return path, nil
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// WriteFile writes the file atomically, so that a failed save never leaves
// half a checkpoint where a good one was: the bytes go to a temporary file
// beside the target, are flushed to disk, and the temporary file is then
// renamed over the target (and the folder flushed). A symbolic link is
// followed: its target is replaced and the link stays. A new file gets mode
// 0666 less the umask, as any program's; a file replaced keeps its mode.
// Something that is not a regular file (a folder, a FIFO, a device) is not
// replaced.
func (w *GGUFWriter) WriteFile(path string) error {
	if w.err != nil {
		return w.err
	}
	target, err := resolveSymlinks(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	perm := os.FileMode(0o666) // less the umask, applied by open(2)
	keepMode := false
	if st, err := os.Stat(target); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("gguf: %s is not a regular file", path)
		}
		perm, keepMode = st.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("gguf: %w", err)
	}
	dir := filepath.Dir(target)
	createPerm := perm
	if keepMode {
		createPerm = 0o600 // ggml opens it again by name to write
	}
	tmp, tmpName, err := createTemp(dir, filepath.Base(target), createPerm)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	ok := false
	withCString(tmpName, func(p *C.char) { ok = bool(C.gguf_write_to_file(w.ctx, p, false)) })
	if !ok {
		return fmt.Errorf("gguf: could not write %s", path)
	}
	if keepMode {
		// open(2) applied the umask; the file replaced had its own mode
		// (set after writing: ggml could not open a read-only file).
		if err := tmp.Chmod(perm); err != nil {
			return fmt.Errorf("gguf: %w", err)
		}
	}
	if err := writeHook("written"); err != nil {
		return err
	}
	// ggml wrote through its own handle to the same file: flush it.
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := writeHook("synced"); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := os.Rename(tmpName, target); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	done = true
	// Flush the rename. Some file systems cannot sync a folder; the file
	// is in place either way.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// createTemp makes a new file beside base in dir, with mode perm (less the
// umask): unlike os.CreateTemp, which always uses 0600.
func createTemp(dir, base string, perm os.FileMode) (*os.File, string, error) {
	for i := 0; ; i++ {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, "", err
		}
		if len(base) > 64 {
			base = base[:64] // room for the suffix within a name's 255 bytes
		}
		name := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(rnd[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, fs.ErrExist) || i == 100 {
			return nil, "", err
		}
	}
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

// OpenGGUF parses the metadata of a GGUF file. path must name a regular
// file (a symbolic link to one is fine): a FIFO or a device would block or
// never end, a folder is no checkpoint.
func OpenGGUF(path string) (*GGUFFile, error) {
	f, st, err := OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	parsed, err := checkGGUFHeader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	// ggml opens the file again by name: give it this very file, so that a
	// file renamed over path in between is not parsed unchecked.
	cpath, err := samePath(f, path, st)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	g := &GGUFFile{f: f}
	var meta *C.struct_ggml_context // a C-only variable: cgo refuses &g.meta
	withCString(cpath, func(p *C.char) {
		g.ctx = C.gguf_init_from_file(p, C.struct_gguf_init_params{no_alloc: true, ctx: &meta})
	})
	g.meta = meta
	if g.ctx == nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %s is not a valid GGUF file", path)
	}
	base := int64(C.gguf_get_data_offset(g.ctx))
	n := int64(C.gguf_get_n_tensors(g.ctx))
	if n != int64(len(parsed)) {
		g.Close()
		return nil, fmt.Errorf("gguf: %s: ggml read %d tensors, the check %d", path, n, len(parsed))
	}
	for i := int64(0); i < n; i++ {
		id := C.int64_t(i)
		off, size := uint64(C.gguf_get_tensor_offset(g.ctx, id)), uint64(C.gguf_get_tensor_size(g.ctx, id))
		info := GGUFTensorInfo{
			Name: C.GoString(C.gguf_get_tensor_name(g.ctx, id)),
			Type: Type(C.gguf_get_tensor_type(g.ctx, id)),
		}
		// The shape as the check read it (ggml_get_tensor would search
		// all the tensors for each one).
		if parsed[i].name != info.Name {
			g.Close()
			return nil, fmt.Errorf("gguf: %s: ggml read tensor %d as %q, the check as %q", path, i+1, info.Name, parsed[i].name)
		}
		info.Ne = parsed[i].ne
		// Compared without overflowing: offset and size come from the file.
		fileSize := uint64(st.Size())
		if base < 0 || uint64(base) > fileSize || off > fileSize-uint64(base) || size > fileSize-uint64(base)-off {
			g.Close()
			return nil, fmt.Errorf("gguf: %s is truncated: tensor %q (%d bytes at %d) ends past byte %d", path, info.Name, size, uint64(base)+off, st.Size())
		}
		info.Offset, info.Size = base+int64(off), int64(size)
		g.tensors = append(g.tensors, info)
	}
	return g, nil
}

// samePath is a path by which ggml can open f: /proc/self/fd/N where there
// is /proc, otherwise path itself if it still names the file f is.
func samePath(f *os.File, path string, st os.FileInfo) (string, error) {
	p := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if st2, err := os.Stat(p); err == nil && os.SameFile(st, st2) {
		return p, nil
	}
	if st2, err := os.Stat(path); err == nil && os.SameFile(st, st2) {
		return path, nil
	}
	return "", fmt.Errorf("%s changed while it was being opened", path)
}

// OpenRegular opens path for reading if it names a regular file (a symbolic
// link to one is fine): a FIFO would block open() until a writer comes, a
// device may never end, a folder is no file to read. O_NONBLOCK lets open()
// return at once on a FIFO; the type is then checked on the open handle, so
// a file swapped in between is not read unchecked. (For a regular file
// O_NONBLOCK changes nothing.)
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file (%s)", path, fileKind(st.Mode()))
	}
	return f, st, nil
}

// fileKind names what a non-regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// Tensors lists the file's tensors in file order.
func (g *GGUFFile) Tensors() []GGUFTensorInfo { return g.tensors }

// String returns a string metadata value.
func (g *GGUFFile) String(key string) (string, bool) {
	id := g.find(key)
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_STRING {
		return "", false
	}
	return C.GoString(C.gguf_get_val_str(g.ctx, id)), true
}

// U32 returns a uint32 metadata value.
func (g *GGUFFile) U32(key string) (uint32, bool) {
	id := g.find(key)
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_UINT32 {
		return 0, false
	}
	return uint32(C.gguf_get_val_u32(g.ctx, id)), true
}

// find is key's id, or -1.
func (g *GGUFFile) find(key string) C.int64_t {
	if strings.IndexByte(key, 0) >= 0 { // C would look up the key cut at the NUL
		return -1
	}
	var id C.int64_t
	withCString(key, func(k *C.char) { id = C.gguf_find_key(g.ctx, k) })
	return id
}

// Int returns an integer metadata value of any integer type (llama.cpp's
// files store counts as u32, ids as u32 or i32); false where the key is
// absent, another type, or a u64 past int64's range.
func (g *GGUFFile) Int(key string) (int64, bool) {
	id := g.find(key)
	if id < 0 {
		return 0, false
	}
	typ := C.gguf_get_kv_type(g.ctx, id)
	if typ == C.GGUF_TYPE_STRING || typ == C.GGUF_TYPE_ARRAY { // gguf_get_val_data asserts on these
		return 0, false
	}
	return ggufInt(typ, C.gguf_get_val_data(g.ctx, id), 0)
}

// Float returns an f32 or f64 metadata value.
func (g *GGUFFile) Float(key string) (float64, bool) {
	id := g.find(key)
	if id < 0 {
		return 0, false
	}
	switch C.gguf_get_kv_type(g.ctx, id) {
	case C.GGUF_TYPE_FLOAT32:
		return float64(*(*float32)(C.gguf_get_val_data(g.ctx, id))), true
	case C.GGUF_TYPE_FLOAT64:
		return *(*float64)(C.gguf_get_val_data(g.ctx, id)), true
	}
	return 0, false
}

// Bool returns a bool metadata value.
func (g *GGUFFile) Bool(key string) (bool, bool) {
	id := g.find(key)
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_BOOL {
		return false, false
	}
	return *(*byte)(C.gguf_get_val_data(g.ctx, id)) != 0, true
}

// Strings returns an array-of-strings metadata value.
func (g *GGUFFile) Strings(key string) ([]string, bool) {
	id := g.find(key)
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_ARRAY || C.gguf_get_arr_type(g.ctx, id) != C.GGUF_TYPE_STRING {
		return nil, false
	}
	out := make([]string, int(C.gguf_get_arr_n(g.ctx, id)))
	for i := range out {
		out[i] = C.GoString(C.gguf_get_arr_str(g.ctx, id, C.size_t(i)))
	}
	return out, true
}

// Floats returns an array of f32 or f64 metadata values.
func (g *GGUFFile) Floats(key string) ([]float64, bool) {
	id := g.find(key)
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_ARRAY {
		return nil, false
	}
	n, p := int(C.gguf_get_arr_n(g.ctx, id)), C.gguf_get_arr_data(g.ctx, id)
	out := make([]float64, n)
	switch C.gguf_get_arr_type(g.ctx, id) {
	case C.GGUF_TYPE_FLOAT32:
		for i, v := range unsafe.Slice((*float32)(p), n) {
			out[i] = float64(v)
		}
	case C.GGUF_TYPE_FLOAT64:
		copy(out, unsafe.Slice((*float64)(p), n))
	default:
		return nil, false
	}
	return out, true
}

// Ints returns an array of integers of any integer type.
func (g *GGUFFile) Ints(key string) ([]int64, bool) {
	id := g.find(key)
	if id < 0 || C.gguf_get_kv_type(g.ctx, id) != C.GGUF_TYPE_ARRAY {
		return nil, false
	}
	typ, n, p := C.gguf_get_arr_type(g.ctx, id), int(C.gguf_get_arr_n(g.ctx, id)), C.gguf_get_arr_data(g.ctx, id)
	out := make([]int64, n)
	for i := range out {
		v, ok := ggufInt(typ, p, i)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// ggufInt is element i of integers of GGUF type typ at p.
func ggufInt(typ C.enum_gguf_type, p unsafe.Pointer, i int) (int64, bool) {
	switch typ {
	case C.GGUF_TYPE_UINT8:
		return int64(unsafe.Slice((*uint8)(p), i+1)[i]), true
	case C.GGUF_TYPE_INT8:
		return int64(unsafe.Slice((*int8)(p), i+1)[i]), true
	case C.GGUF_TYPE_UINT16:
		return int64(unsafe.Slice((*uint16)(p), i+1)[i]), true
	case C.GGUF_TYPE_INT16:
		return int64(unsafe.Slice((*int16)(p), i+1)[i]), true
	case C.GGUF_TYPE_UINT32:
		return int64(unsafe.Slice((*uint32)(p), i+1)[i]), true
	case C.GGUF_TYPE_INT32:
		return int64(unsafe.Slice((*int32)(p), i+1)[i]), true
	case C.GGUF_TYPE_INT64:
		return unsafe.Slice((*int64)(p), i+1)[i], true
	case C.GGUF_TYPE_UINT64:
		v := unsafe.Slice((*uint64)(p), i+1)[i]
		return int64(v), v <= math.MaxInt64
	}
	return 0, false
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
