package ggmlcgo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// checkGGUFHeader walks a GGUF file's header in Go, with every count and
// length checked against the bytes the file really has, before ggml's
// parser sees it: a lying header (a string of 2^40 bytes, 2^60 tensors)
// is an error here instead of a huge allocation there.
func checkGGUFHeader(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	r := &headerReader{r: bufio.NewReader(io.NewSectionReader(f, 0, st.Size())), left: st.Size()}
	magic := r.bytes(4)
	if r.err == nil && string(magic) != "GGUF" {
		return errors.New("not a GGUF file (bad magic)")
	}
	if v := r.u32(); r.err == nil && (v < 2 || v > 3) {
		return fmt.Errorf("unsupported GGUF version %d", v)
	}
	nTensors, nKV := r.u64(), r.u64()
	// Every tensor info and key-value pair takes at least 8 bytes.
	if r.err == nil && (nTensors > uint64(r.left)/8 || nKV > uint64(r.left)/8) {
		return fmt.Errorf("header claims %d tensors and %d values, more than a file of %d bytes holds", nTensors, nKV, st.Size())
	}
	for i := uint64(0); i < nKV && r.err == nil; i++ {
		r.str()
		typ := r.u32()
		if typ == ggufArray {
			elem, n := r.u32(), r.u64()
			if r.err == nil && elem == ggufArray {
				return errors.New("nested GGUF arrays are not supported")
			}
			for j := uint64(0); j < n && r.err == nil; j++ {
				if elem == ggufString {
					r.str()
					continue
				}
				size, ok := ggufScalarSize[elem]
				if !ok {
					return fmt.Errorf("bad GGUF value type %d", elem)
				}
				if n > uint64(r.left)/uint64(size) {
					return fmt.Errorf("an array of %d values does not fit the file", n)
				}
				r.skip(int64(size) * int64(n))
				break
			}
			continue
		}
		if typ == ggufString {
			r.str()
			continue
		}
		size, ok := ggufScalarSize[typ]
		if !ok {
			return fmt.Errorf("bad GGUF value type %d", typ)
		}
		r.skip(int64(size))
	}
	for i := uint64(0); i < nTensors && r.err == nil; i++ {
		r.str()
		nDims := r.u32()
		if r.err == nil && (nDims < 1 || nDims > MaxDims) {
			return fmt.Errorf("tensor %d has %d dimensions", i, nDims)
		}
		n := uint64(1)
		for d := uint32(0); d < nDims && r.err == nil; d++ {
			ne := r.u64()
			if ne == 0 || ne > uint64(st.Size()) || n > uint64(st.Size())/ne {
				if r.err == nil {
					return fmt.Errorf("tensor %d has a dimension of %d elements: more than the file holds", i, ne)
				}
			}
			n *= ne
		}
		if typ := r.u32(); r.err == nil && typ >= typeCount {
			return fmt.Errorf("tensor %d has unknown type %d", i, typ)
		}
		r.u64() // offset: checked against the file by OpenGGUF
	}
	if r.err != nil {
		return fmt.Errorf("truncated or corrupt GGUF header: %w", r.err)
	}
	return nil
}

const (
	ggufString = 8
	ggufArray  = 9
)

var ggufScalarSize = map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

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

// str skips a GGUF string (u64 length, bytes), checking the length.
func (h *headerReader) str() {
	n := h.u64()
	if h.err == nil && n > uint64(h.left) {
		h.err = fmt.Errorf("a string of %d bytes runs past the end of the file", n)
		return
	}
	h.skip(int64(n))
}
