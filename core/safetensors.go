package core

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gglua/gglua/ggmlcgo"
)

// Safetensors files are Hugging Face's weight format: 8 bytes (little-endian
// header length N), N bytes of JSON naming each tensor's dtype, shape and
// [begin, end) byte range in the data that follows, then the data, packed.
// An optional "__metadata__" entry maps strings to strings.
//
// The format is small, so it is read and written here rather than through a
// library: the one Go library served (nlpodyssey/safetensors, an untagged
// port) lets duplicate JSON keys collapse, does not tie the data's end to the
// file's size when reading lazily, decodes into its own typed slices (a copy
// more) and has no atomic write or progress hook, all of which gglua needs.
//
// A tensor is named by its entry's path joined by dots, as Hugging Face names
// weights ("model.layers.0.weight"). A path that is not that one name as a
// single string key (a nested table, a number key) is kept in the metadata
// under gglua.path.<name>, so gglua's own files load back nested exactly as
// saved; a file from any other writer loads flat, one key per tensor name, as
// PyTorch's safetensors.torch.load_file returns it and load_state_dict wants
// it.

// maxSafetensorsHeader bounds the JSON header, as the reference
// implementation does (100 MB), before a byte of it is allocated.
const maxSafetensorsHeader = 100_000_000

// SafetensorsMetadataKey is the header entry holding string metadata.
const SafetensorsMetadataKey = "__metadata__"

// stLoadable says which dtypes become gglua tensors, and as what: gglua's
// one integer dtype is i32, so I64 (PyTorch's default integer: position
// ids, labels) loads as i32, each value checked to fit.
var stLoadable = map[string]ggmlcgo.Type{"F32": ggmlcgo.F32, "F16": ggmlcgo.F16, "BF16": ggmlcgo.BF16, "I32": ggmlcgo.I32, "I64": ggmlcgo.I32}

// LoadSafetensors reads a safetensors file into host tensors at their paths
// (see the top of this file) and returns its metadata without gglua's own
// keys. F32, F16, BF16 and I32 keep their dtype; I64 loads as i32, each
// value checked to fit.
// Every other dtype is an error naming the tensor.
func LoadSafetensors(path string, progress Progress) ([]CheckpointEntry, map[string]string, error) {
	entries, meta, err := loadSafetensors(path, progress)
	if err != nil {
		return nil, nil, fmt.Errorf("tensor.load: %s: %w", path, err)
	}
	return entries, meta, nil
}

func loadSafetensors(path string, progress Progress) ([]CheckpointEntry, map[string]string, error) {
	f, st, err := ggmlcgo.OpenRegular(path) // a FIFO or device is refused, not read forever
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size := uint64(st.Size())
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil || size < 8 {
		return nil, nil, fmt.Errorf("not a safetensors file: %d bytes, shorter than its 8-byte header length", size)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxSafetensorsHeader || n > size-8 {
		return nil, nil, fmt.Errorf("not a safetensors file: its header length %d is past the file's %d bytes or the %d-byte limit", n, size, maxSafetensorsHeader)
	}
	hdr := make([]byte, n) // bounded by the file's real size
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, nil, fmt.Errorf("reading the header: %w", err)
	}
	tensors, meta, err := parseSafetensorsHeader(hdr, size-8-n)
	if err != nil {
		return nil, nil, fmt.Errorf("not a valid safetensors file: %w", err)
	}
	// Check every tensor can be loaded before reading gigabytes of data.
	shapes := make([][]int, len(tensors))
	for i, t := range tensors {
		if _, ok := stLoadable[t.dtype]; !ok {
			return nil, nil, argErrorf("tensor %q has dtype %s, which gglua does not read (it reads F32, F16, BF16, I32, and I64 within int32's range as i32)", t.name, t.dtype)
		}
		if shapes[i], err = t.ggluaShape(); err != nil {
			return nil, nil, err
		}
	}
	paths, err := storedPaths(tensors, meta)
	if err != nil {
		return nil, nil, err
	}
	data := io.NewSectionReader(f, int64(8+n), int64(size-8-n))
	total := int64(size - 8 - n)
	out := make([]CheckpointEntry, len(tensors))
	for i, t := range tensors {
		raw := make([]byte, t.end-t.begin) // within the file: no lying-header allocation
		if err := readChunks(io.NewSectionReader(data, int64(t.begin), int64(len(raw))), raw, func(k int64) {
			progress.report("reading", int64(t.begin)+k, total)
		}); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.name, err)
		}
		x, err := stTensorOf(t, raw, shapes[i])
		if err != nil {
			return nil, nil, err
		}
		x.scalar = len(t.shape) == 0 // written back as 0-d
		out[i] = CheckpointEntry{Path: paths[i], Tensor: x}
	}
	progress.report("reading", total, total)
	return out, meta, nil
}

// stTensorOf makes a host tensor of a tensor's bytes, exactly or not at all.
func stTensorOf(t stTensor, raw []byte, shape []int) (*Tensor, error) {
	dtype := stLoadable[t.dtype]
	if dtype != ggmlcgo.I32 {
		v, err := decode(dtype, raw)
		if err != nil {
			return nil, err
		}
		x, err := FromFloat32(v, shape...)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.name, err)
		}
		x.dtype = dtype // f16/bf16 values are exact in f32 storage
		return x, nil
	}
	width := int(stDtypes[t.dtype]) // I32 or I64
	v := make([]int32, len(raw)/width)
	for i := range v {
		if width == 4 {
			v[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
			continue
		}
		x := int64(binary.LittleEndian.Uint64(raw[8*i:]))
		if x > math.MaxInt32 || x < math.MinInt32 {
			return nil, argErrorf("tensor %q (I64) holds %d at element %d, outside int32's range: gglua's integer dtype is i32", t.name, x, i+1)
		}
		v[i] = int32(x)
	}
	x, err := FromInt32(v, shape...)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.name, err)
	}
	return x, nil
}

// storedPaths is each tensor's path: the one gglua stored, or its name.
// gglua's keys are taken out of meta.
func storedPaths(tensors []stTensor, meta map[string]string) ([][]PathKey, error) {
	paths := make([][]PathKey, len(tensors))
	for i, t := range tensors {
		paths[i] = []PathKey{StrKey(t.name)}
		if s, ok := meta[pathKey+t.name]; ok {
			p, err := decodePath(s)
			if err != nil || dotted(p) != t.name {
				return nil, fmt.Errorf("tensor %q: its stored path %q is not a path to that name", t.name, s)
			}
			paths[i] = p
		}
	}
	for k := range meta {
		if strings.HasPrefix(k, pathKey) {
			delete(meta, k)
		}
	}
	return paths, nil
}

// readChunks fills buf from r a piece at a time, telling done how far it got,
// so a long read shows progress.
func readChunks(r io.Reader, buf []byte, done func(int64)) error {
	const chunk = 8 << 20
	for k := 0; k < len(buf); k += chunk {
		if _, err := io.ReadFull(r, buf[k:min(k+chunk, len(buf))]); err != nil {
			return fmt.Errorf("the file ended early: %w", err)
		}
		done(int64(min(k+chunk, len(buf))))
	}
	return nil
}

// stDtypeNames are the safetensors names of the dtypes gglua writes.
var stDtypeNames = map[ggmlcgo.Type]string{ggmlcgo.F32: "F32", ggmlcgo.F16: "F16", ggmlcgo.BF16: "BF16", ggmlcgo.I32: "I32"}

// SaveSafetensors writes tensor entries and string metadata to path,
// atomically (a temporary file beside it, flushed to disk, renamed over it).
// Every tensor keeps its dtype. A safetensors file holds nothing but tensors
// and string metadata, so any other value is an error, not dropped.
// "format": "pt" is added unless metadata sets format, as PyTorch's
// save_file writes it (transformers checks it).
func SaveSafetensors(path string, entries []CheckpointEntry, metadata map[string]string, progress Progress) error {
	if err := saveSafetensors(path, entries, metadata, progress); err != nil {
		return fmt.Errorf("tensor.save: %s: %w", path, err)
	}
	return nil
}

func saveSafetensors(path string, entries []CheckpointEntry, metadata map[string]string, progress Progress) error {
	meta := map[string]string{"format": "pt"}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return argErrorf("metadata %q: safetensors metadata must be valid UTF-8", k)
		}
		if strings.HasPrefix(k, pathKey) {
			return argErrorf("metadata %q: keys starting with %q are gglua's own", k, pathKey)
		}
		meta[k] = v
	}
	entries = append([]CheckpointEntry(nil), entries...)
	seen := map[string][]PathKey{}
	for _, e := range entries {
		name := e.Name()
		if e.Tensor == nil {
			return argErrorf("%s is not a tensor: a safetensors file holds only tensors (and string metadata, given as {metadata = {...}}); save other values in a .gguf checkpoint", pathString(e.Path))
		}
		if _, ok := stDtypeNames[e.Tensor.Dtype()]; !ok {
			return argErrorf("%s has dtype %v, which safetensors files from gglua do not hold", pathString(e.Path), e.Tensor.Dtype())
		}
		for _, k := range e.Path {
			if k.IsNum && math.IsNaN(k.Num) {
				return argErrorf("%s: a NaN key cannot be saved", pathString(e.Path))
			}
		}
		if !utf8.ValidString(name) || name == SafetensorsMetadataKey {
			return argErrorf("%s: a safetensors tensor name must be valid UTF-8 and not %q", pathString(e.Path), SafetensorsMetadataKey)
		}
		if other, ok := seen[name]; ok {
			return argErrorf("two entries are both named %q: %s and %s; rename one", name, pathString(other), pathString(e.Path))
		}
		seen[name] = e.Path
		if len(e.Path) != 1 || e.Path[0].IsNum {
			meta[pathKey+name] = encodePath(e.Path)
		}
	}
	// As the reference writer: widest dtype first, then by name, so every
	// tensor's bytes start aligned to its element size.
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		sa, sb := a.Tensor.Dtype().Size(), b.Tensor.Dtype().Size()
		return sa > sb || (sa == sb && a.Name() < b.Name())
	})
	header := map[string]any{SafetensorsMetadataKey: meta}
	var offset uint64
	for _, e := range entries {
		t := e.Tensor
		nbytes := uint64(t.Numel() * t.Dtype().Size())
		shape := make([]int64, len(t.shape))
		for i, d := range t.shape {
			shape[i] = int64(d)
		}
		if t.scalar {
			shape = []int64{} // 0-d, as PyTorch wrote it
		}
		header[e.Name()] = map[string]any{"dtype": stDtypeNames[t.Dtype()], "shape": shape, "data_offsets": []uint64{offset, offset + nbytes}}
		offset += nbytes
	}
	var hdr bytes.Buffer
	enc := json.NewEncoder(&hdr)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header); err != nil {
		return err
	}
	hdr.Truncate(hdr.Len() - 1) // Encode's newline
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ') // the data starts 8-byte aligned, as the reference writer pads it
	}
	if hdr.Len() > maxSafetensorsHeader { // no file its readers (ours included) refuse
		return argErrorf("the header would be %d bytes, past safetensors' %d-byte limit (%d entries): save fewer or shorter names, or a .gguf checkpoint", hdr.Len(), maxSafetensorsHeader, len(entries))
	}
	total := int64(offset)
	return writeFileAtomic(path, func(w io.Writer) error {
		var lenBuf [8]byte
		binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
		if _, err := w.Write(lenBuf[:]); err != nil {
			return err
		}
		if _, err := w.Write(hdr.Bytes()); err != nil {
			return err
		}
		var done int64
		for _, e := range entries {
			raw, err := stEncode(e.Tensor)
			if err != nil {
				return fmt.Errorf("%s: %w", pathString(e.Path), err)
			}
			const chunk = 8 << 20
			for k := 0; k < len(raw); k += chunk {
				m, err := w.Write(raw[k:min(k+chunk, len(raw))])
				if err != nil {
					return err
				}
				done += int64(m)
				progress.report("writing", done, total)
			}
		}
		return nil
	})
}

// stEncode is a tensor's bytes in its dtype (device tensors are read back).
func stEncode(t *Tensor) ([]byte, error) {
	if t.Dtype() == ggmlcgo.I32 {
		v, err := t.int32s()
		if err != nil {
			return nil, err
		}
		return encodeInt32s(v), nil
	}
	v, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	return encode(t.Dtype(), v)
}

// writeFileAtomic writes a file so that a failed save never leaves half a
// file where a good one was, as GGUF checkpoints are written
// (ggmlcgo.GGUFWriter.WriteFile): a temporary file beside the target,
// flushed to disk, renamed over it, the folder flushed. A symbolic link is
// followed (its target replaced, the link kept); a replaced file keeps its
// mode; what is not a regular file is not replaced.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	target, err := followLinks(path)
	if err != nil {
		return err
	}
	perm, keepMode := os.FileMode(0o666), false // a new file: less the umask
	if st, err := os.Stat(target); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		perm, keepMode = st.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(target)
	var tmp *os.File
	for {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return err
		}
		base := filepath.Base(target)
		if len(base) > 64 {
			base = base[:64] // room for the suffix within a name's 255 bytes
		}
		tmp, err = os.OpenFile(filepath.Join(dir, "."+base+".tmp"+hex.EncodeToString(rnd[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if keepMode {
		if err := tmp.Chmod(perm); err != nil { // exact, without the umask
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	done = true
	if d, err := os.Open(dir); err == nil { // flush the rename where the file system can
		d.Sync()
		d.Close()
	}
	return nil
}

// followLinks resolves path while it is a symbolic link (at most 40, as the
// kernel's ELOOP); a path that does not exist yet is itself.
func followLinks(path string) (string, error) {
	for range 40 {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			return path, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}
