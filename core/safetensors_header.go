package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"unicode/utf8"

	"github.com/gglua/gglua/ggmlcgo"
)

// A safetensors header, parsed and validated in full before any data is
// trusted (safetensors.go reads and writes the files).

// stDtypes are the safetensors dtypes and their element sizes. Only F32, F16,
// BF16, I32 and I64 (values within int32's range) load; the others are known
// so that their files validate and the error names the dtype.
var stDtypes = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "C64": 8,
}

// stTensor is one tensor's header entry, validated.
type stTensor struct {
	name       string
	dtype      string
	shape      []int64
	begin, end uint64 // byte range within the data
}

// stHeaderEntry is the JSON form of a tensor entry. Pointers tell a missing
// field from an empty one (shape [] is a scalar).
type stHeaderEntry struct {
	Dtype       *string   `json:"dtype"`
	Shape       *[]int64  `json:"shape"`
	DataOffsets *[]uint64 `json:"data_offsets"`
}

// parseSafetensorsHeader checks a header (the JSON, of a file whose data part
// is dataLen bytes) fully: valid UTF-8, one JSON object with no duplicate
// keys and nothing after it but spaces, string metadata, known dtypes,
// shapes whose element count times the dtype size (overflow-checked) is the
// entry's byte length, and byte ranges that tile the data exactly, from 0 to
// its end, without gaps or overlaps.
func parseSafetensorsHeader(hdr []byte, dataLen uint64) ([]stTensor, map[string]string, error) {
	if !utf8.Valid(hdr) {
		return nil, nil, errors.New("the header is not valid UTF-8")
	}
	if err := noDuplicateKeys(hdr); err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("the header is not a JSON object")
	}
	var tensors []stTensor
	meta := map[string]string{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("bad header JSON: %v", err)
		}
		name := tok.(string) // an object's keys are strings
		if seen[name] {
			return nil, nil, fmt.Errorf("the header names %q twice", name)
		}
		seen[name] = true
		if name == SafetensorsMetadataKey {
			var raw map[string]*string // a null value is not a string
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, fmt.Errorf("__metadata__ must map strings to strings: %v", err)
			}
			for k, v := range raw {
				if v == nil {
					return nil, nil, fmt.Errorf("__metadata__: %q is null, not a string", k)
				}
				meta[k] = *v
			}
			continue
		}
		var e stHeaderEntry
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: bad header entry: %v", name, err)
		}
		t, err := checkHeaderEntry(name, e)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, fmt.Errorf("bad header JSON: %v", err)
	}
	if rest := hdr[dec.InputOffset():]; len(bytes.Trim(rest, " \t\r\n")) != 0 {
		return nil, nil, errors.New("the header has bytes after its JSON object")
	}
	sort.Slice(tensors, func(i, j int) bool {
		a, b := tensors[i], tensors[j]
		return a.begin < b.begin || (a.begin == b.begin && a.end < b.end)
	})
	next := uint64(0)
	for _, t := range tensors {
		if t.begin != next {
			if t.begin < next {
				return nil, nil, fmt.Errorf("tensor %q: its bytes [%d, %d) overlap another tensor's", t.name, t.begin, t.end)
			}
			return nil, nil, fmt.Errorf("tensor %q: its bytes start at %d, leaving a gap after byte %d", t.name, t.begin, next)
		}
		next = t.end
	}
	if next != dataLen {
		return nil, nil, fmt.Errorf("the tensors hold %d bytes of data but the file has %d after its header", next, dataLen)
	}
	return tensors, meta, nil
}

// noDuplicateKeys refuses a JSON text in which an object, at any depth,
// names a key twice: Go's decoder keeps the last value, other readers (the
// reference Rust one) refuse, and two readers must not disagree on a
// tensor's dtype or place.
// maxHeaderDepth is deeper than any safetensors header nests.
const maxHeaderDepth = 8

func noDuplicateKeys(text []byte) error {
	dec := json.NewDecoder(bytes.NewReader(text))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next token of an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // bad JSON: the parser after this says what is wrong
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if stack = stack[:len(stack)-1]; len(stack) == 0 {
				return nil // the first value ends; what follows is the parser's
			}
			if stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object && top.key {
			k := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("the header names %q twice in one object", k)
			}
			top.keys[k], top.key = true, false
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') && len(stack) >= maxHeaderDepth {
			// A header nests three deep ({name: {shape: [...]}}): a deeper one
			// is no header, and 50 MB of '[' cost 3.5 GB of frames.
			return fmt.Errorf("the header nests more than %d deep: not a safetensors header", maxHeaderDepth)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		default:
			if top == nil {
				return nil // not an object: the parser refuses it
			}
			if top.object {
				top.key = true // a value ends; a key comes next
			}
		}
	}
}

// checkHeaderEntry validates one tensor entry on its own.
func checkHeaderEntry(name string, e stHeaderEntry) (stTensor, error) {
	if e.Dtype == nil || e.Shape == nil || e.DataOffsets == nil {
		return stTensor{}, fmt.Errorf("tensor %q: the header entry needs dtype, shape and data_offsets", name)
	}
	size, ok := stDtypes[*e.Dtype]
	if !ok {
		return stTensor{}, fmt.Errorf("tensor %q has the unknown dtype %q", name, *e.Dtype)
	}
	off := *e.DataOffsets
	if len(off) != 2 || off[1] < off[0] {
		return stTensor{}, fmt.Errorf("tensor %q: data_offsets must be [begin, end] with begin <= end, got %v", name, off)
	}
	n := uint64(1)
	for _, d := range *e.Shape {
		if d < 0 {
			return stTensor{}, fmt.Errorf("tensor %q: shape %v has a negative size", name, *e.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 {
			return stTensor{}, fmt.Errorf("tensor %q: shape %v overflows", name, *e.Shape)
		}
		n = lo
	}
	hi, nbytes := bits.Mul64(n, uint64(size))
	if hi != 0 || nbytes != off[1]-off[0] {
		return stTensor{}, fmt.Errorf("tensor %q: shape %v of %s needs %d bytes, but data_offsets %v hold %d",
			name, *e.Shape, *e.Dtype, nbytes, off, off[1]-off[0])
	}
	return stTensor{name: name, dtype: *e.Dtype, shape: *e.Shape, begin: off[0], end: off[1]}, nil
}

// gglua's shape for a safetensors shape: a scalar is a 1-element tensor
// (gglua has no 0-d tensors); a size of 0 an empty tensor; more than 4
// dims an error.
func (t stTensor) ggluaShape() ([]int, error) {
	if len(t.shape) == 0 {
		return []int{1}, nil
	}
	if len(t.shape) > ggmlcgo.MaxDims {
		return nil, argErrorf("tensor %q has %d dims %v; gglua tensors have at most %d", t.name, len(t.shape), t.shape, ggmlcgo.MaxDims)
	}
	shape := make([]int, len(t.shape))
	for i, d := range t.shape {
		shape[i] = int(d) // bounded: d * size <= the file's length (or d is 0)
	}
	if _, err := checkShape(shape); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.name, err)
	}
	return shape, nil
}
