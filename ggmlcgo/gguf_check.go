package ggmlcgo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxGGUFTensors and MaxGGUFValues bound what a GGUF file may hold, read or
// written. ggml compares every new key and tensor name with all the earlier
// ones: a 3 MB file of 130,000 tiny keys kept its parser busy for 25 s,
// which no context can cancel. At these bounds it takes about a second;
// real files hold hundreds of tensors and tens of keys (gglua writes two
// keys per tensor or value).
const (
	MaxGGUFTensors = 1 << 14
	MaxGGUFValues  = 2*MaxGGUFTensors + 1024
)

// ggufHeaderTensor is a tensor info as the pre-check read it.
type ggufHeaderTensor struct {
	name string
	ne   [MaxDims]int64
}

const ggufAlignmentKey = "general.alignment"

// checkGGUFHeader walks a GGUF file's header in Go, the way ggml's
// gguf_init_from_file will, before ggml's parser sees it. It refuses
//
//   - counts and lengths past what the file holds (a string of 2^40 bytes,
//     2^60 tensors): ggml would try to allocate them;
//   - whatever reaches a GGML_ASSERT, a GGML_ABORT or undefined behaviour in
//     ggml (gguf.cpp, as pinned): an empty key name (gguf_kv's constructor
//     asserts), general.alignment stored as anything but one u32
//     (gguf_get_val_u32 asserts its type and count), a key holding a NUL byte
//     (gguf_find_key uses strcmp, so "general.alignment\x00x" is found as the
//     alignment), a dimension of 0 (ggml divides INT64_MAX by it), a negative
//     tensor type (ggml indexes its type table with it for the message);
//   - a NUL byte in a string value, which String would cut short;
//   - what ggml refuses itself, with a clearer message: duplicate keys or
//     tensor names, tensor names of MaxNameLen bytes or more or holding a
//     NUL byte, bad value or tensor types, alignment not a power of two.
//
// Tensor offsets and sizes are ggml's to check (they need its type table);
// OpenGGUF checks each tensor lies inside the file.
func checkGGUFHeader(f *os.File, size int64) ([]ggufHeaderTensor, error) {
	r := &headerReader{r: bufio.NewReader(io.NewSectionReader(f, 0, size)), left: size}
	magic := r.bytes(4)
	if r.err == nil && string(magic) != "GGUF" {
		return nil, errors.New("not a GGUF file (bad magic)")
	}
	if v := r.u32(); r.err == nil && (v < 2 || v > 3) {
		return nil, fmt.Errorf("unsupported GGUF version %d", v)
	}
	nTensors, nKV := r.u64(), r.u64()
	if r.err == nil {
		// A key-value pair takes at least 14 bytes (a 1-byte key, a type, a
		// 1-byte value), a tensor info at least 32.
		if nTensors > uint64(r.left)/32 || nKV > uint64(r.left)/14 {
			return nil, fmt.Errorf("header claims %d tensors and %d values, more than a file of %d bytes holds", nTensors, nKV, size)
		}
		if nTensors > MaxGGUFTensors {
			return nil, fmt.Errorf("header claims %d tensors: more than the %d gglua reads", nTensors, MaxGGUFTensors)
		}
		if nKV > MaxGGUFValues {
			return nil, fmt.Errorf("header claims %d values: more than the %d gglua reads", nKV, MaxGGUFValues)
		}
	}
	keys := map[string]bool{}
	for i := uint64(0); i < nKV && r.err == nil; i++ {
		key := r.str()
		if r.err != nil {
			break
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("key %d has an empty name", i+1)
		}
		if bytes.IndexByte(key, 0) >= 0 {
			return nil, fmt.Errorf("key %d (%q) holds a NUL byte", i+1, key)
		}
		if keys[string(key)] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		keys[string(key)] = true
		typ := r.u32()
		if r.err != nil {
			break
		}
		if string(key) == ggufAlignmentKey {
			if typ != ggufU32 {
				return nil, fmt.Errorf("%s must be a single u32, not %s", ggufAlignmentKey, ggufTypeName(typ))
			}
			if a := r.u32(); r.err == nil && (a == 0 || a&(a-1) != 0) {
				return nil, fmt.Errorf("%s: alignment %d is not a power of 2", ggufAlignmentKey, a)
			}
			continue
		}
		if typ == ggufArray {
			elem, n := r.u32(), r.u64()
			if r.err != nil {
				break
			}
			if elem == ggufString {
				// Each string takes at least its 8-byte length; Strings
				// returns them through C strings, which end at a NUL.
				if n > uint64(r.left)/8 {
					return nil, fmt.Errorf("key %q: an array of %d strings does not fit the file", key, n)
				}
				for j := uint64(0); j < n && r.err == nil; j++ {
					if v := r.str(); bytes.IndexByte(v, 0) >= 0 {
						return nil, fmt.Errorf("key %q: string %d holds a NUL byte", key, j+1)
					}
				}
				continue
			}
			size, ok := ggufScalarSize[elem]
			if !ok {
				return nil, fmt.Errorf("key %q: bad GGUF array element type %s", key, ggufTypeName(elem))
			}
			if n > uint64(r.left)/uint64(size) {
				return nil, fmt.Errorf("key %q: an array of %d values does not fit the file", key, n)
			}
			r.skip(int64(size) * int64(n))
			continue
		}
		if typ == ggufString {
			// GGUFFile.String returns it through a C string, which would end
			// at the NUL: a shorter value and no error.
			if v := r.str(); bytes.IndexByte(v, 0) >= 0 {
				return nil, fmt.Errorf("key %q: its string value holds a NUL byte", key)
			}
			continue
		}
		size, ok := ggufScalarSize[typ]
		if !ok {
			return nil, fmt.Errorf("key %q: bad GGUF value type %s", key, ggufTypeName(typ))
		}
		r.skip(int64(size))
	}
	names := map[string]bool{}
	var tensors []ggufHeaderTensor
	for i := uint64(0); i < nTensors && r.err == nil; i++ {
		name := r.str()
		if r.err != nil {
			break
		}
		if len(name) > MaxNameLen {
			return nil, fmt.Errorf("tensor %d's name is %d bytes, more than %d", i+1, len(name), MaxNameLen)
		}
		if bytes.IndexByte(name, 0) >= 0 {
			return nil, fmt.Errorf("tensor %d's name %q holds a NUL byte", i+1, name)
		}
		if names[string(name)] {
			return nil, fmt.Errorf("duplicate tensor name %q", name)
		}
		names[string(name)] = true
		info := ggufHeaderTensor{name: string(name), ne: [MaxDims]int64{1, 1, 1, 1}}
		nDims := r.u32()
		if r.err == nil && (nDims < 1 || nDims > MaxDims) {
			return nil, fmt.Errorf("tensor %q has %d dimensions", name, nDims)
		}
		// ggml keeps the element count in an int64; a quantized type packs
		// at most a few elements in a byte, so 8 per byte of file is more
		// than any real tensor holds.
		limit := uint64(size) * 8
		n := uint64(1)
		for d := uint32(0); d < nDims && r.err == nil; d++ {
			ne := r.u64()
			if r.err != nil {
				break
			}
			if ne == 0 {
				return nil, fmt.Errorf("dimension %d of tensor %q has 0 elements", d+1, name)
			}
			if ne > limit || n > limit/ne {
				return nil, fmt.Errorf("tensor %q has a dimension of %d elements: more than the file holds", name, ne)
			}
			n *= ne
			info.ne[d] = int64(ne)
		}
		if typ := r.u32(); r.err == nil && typ >= typeCount {
			return nil, fmt.Errorf("tensor %q has unknown type %d", name, int32(typ))
		}
		r.u64() // offset: ggml checks it against the sizes of the tensors before
		tensors = append(tensors, info)
	}
	if r.err != nil {
		return nil, fmt.Errorf("truncated or corrupt GGUF header: %w", r.err)
	}
	return tensors, nil
}

const (
	ggufU32    = 4
	ggufString = 8
	ggufArray  = 9
)

var ggufScalarSize = map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

var ggufTypeNames = []string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "a string", "an array", "u64", "i64", "f64"}

func ggufTypeName(t uint32) string {
	if int(t) < len(ggufTypeNames) {
		return ggufTypeNames[t]
	}
	return fmt.Sprintf("type %d", int32(t))
}

// headerReader reads little-endian values, keeping count of the bytes left
// and the first error.
type headerReader struct {
	r    *bufio.Reader
	left int64
	err  error
}

func (h *headerReader) bytes(n int64) []byte {
	if h.err != nil {
		return nil
	}
	if n < 0 || n > h.left {
		h.err = fmt.Errorf("a length of %d bytes runs past the end of the file", n)
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(h.r, b); err != nil {
		h.err = err
		return nil
	}
	h.left -= n
	return b
}

func (h *headerReader) skip(n int64) {
	if h.err == nil && (n < 0 || n > h.left) {
		h.err = fmt.Errorf("a value of %d bytes runs past the end of the file", n)
		return
	}
	if h.err == nil {
		if _, err := h.r.Discard(int(n)); err != nil {
			h.err = err
		}
		h.left -= n
	}
}

func (h *headerReader) u32() uint32 {
	if b := h.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (h *headerReader) u64() uint64 {
	if b := h.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// strLen reads a GGUF string's u64 length, checking it against the file.
func (h *headerReader) strLen() int64 {
	n := h.u64()
	if h.err == nil && n > uint64(h.left) {
		h.err = fmt.Errorf("a string of %d bytes runs past the end of the file", n)
	}
	return int64(n)
}

// str reads a GGUF string (u64 length, bytes).
func (h *headerReader) str() []byte {
	n := h.strLen()
	return h.bytes(n)
}
