// Package eventcheck reads TensorBoard event files for tests, sharing no
// code with runlog's writer: it frames TFRecords and checks their CRC32C
// checksums itself, and decodes each Event with dynamicpb against
// TensorBoard's schema (event.proto here, copied from TensorBoard's),
// compiled at run time by protocompile.
package eventcheck

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

//go:embed event.proto
var eventProto string

// Event is one decoded event: the file-version event or one scalar.
type Event struct {
	WallTime    float64
	Step        int64
	FileVersion string // set on the first event only
	Scalars     []Scalar
}

// Scalar is one Summary.Value with a simple_value.
type Scalar struct {
	Tag   string
	Value float32
}

// MaskedCRC32C is TFRecord's masked checksum, written out here from
// TensorFlow's definition (crc32c rotated right by 15, plus 0xa282ead8).
func MaskedCRC32C(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// Records splits a TFRecord stream, checking both checksums of every
// record and that nothing trails the last one.
func Records(b []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			return nil, fmt.Errorf("record at byte %d: %d bytes left, fewer than a header", off, len(b)-off)
		}
		head := b[off : off+8]
		n := binary.LittleEndian.Uint64(head)
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), MaskedCRC32C(head); got != want {
			return nil, fmt.Errorf("record at byte %d: length CRC %#x, want %#x", off, got, want)
		}
		start := off + 12
		if n > uint64(len(b)-start-4) {
			return nil, fmt.Errorf("record at byte %d: length %d runs past the end", off, n)
		}
		data := b[start : start+int(n)]
		if got, want := binary.LittleEndian.Uint32(b[start+int(n):]), MaskedCRC32C(data); got != want {
			return nil, fmt.Errorf("record at byte %d: data CRC %#x, want %#x", off, got, want)
		}
		out = append(out, data)
		off = start + int(n) + 4
	}
	return out, nil
}

// eventDescriptor compiles event.proto and returns its Event message.
func eventDescriptor() (protoreflect.MessageDescriptor, error) {
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"event.proto": eventProto}),
	}}
	files, err := c.Compile(context.Background(), "event.proto")
	if err != nil {
		return nil, err
	}
	return files[0].Messages().ByName("Event"), nil
}

// ReadFile reads every event of an event file. Fields the schema does not
// know (a wrong field number or wire type) are an error.
func ReadFile(path string) ([]Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := Records(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	md, err := eventDescriptor()
	if err != nil {
		return nil, err
	}
	var out []Event
	for i, r := range recs {
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(r, m); err != nil {
			return nil, fmt.Errorf("%s: event %d: %v", path, i, err)
		}
		if err := noUnknown(m); err != nil {
			return nil, fmt.Errorf("%s: event %d: %v", path, i, err)
		}
		out = append(out, decode(m))
	}
	return out, nil
}

func decode(m protoreflect.Message) Event {
	f := m.Descriptor().Fields()
	e := Event{
		WallTime:    m.Get(f.ByName("wall_time")).Float(),
		Step:        m.Get(f.ByName("step")).Int(),
		FileVersion: m.Get(f.ByName("file_version")).String(),
	}
	if sum := f.ByName("summary"); m.Has(sum) {
		s := m.Get(sum).Message()
		vals := s.Get(s.Descriptor().Fields().ByName("value")).List()
		for i := 0; i < vals.Len(); i++ {
			v := vals.Get(i).Message()
			vf := v.Descriptor().Fields()
			e.Scalars = append(e.Scalars, Scalar{
				Tag:   v.Get(vf.ByName("tag")).String(),
				Value: float32(v.Get(vf.ByName("simple_value")).Float()),
			})
		}
	}
	return e
}

// noUnknown refuses a message (or a nested one) with fields its schema
// does not name.
func noUnknown(m protoreflect.Message) error {
	if len(m.GetUnknown()) > 0 {
		return fmt.Errorf("%s has fields the schema does not know: % x", m.Descriptor().FullName(), m.GetUnknown())
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil:
		case fd.IsList():
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = noUnknown(v.List().Get(i).Message())
			}
		default:
			err = noUnknown(v.Message())
		}
		return err == nil
	})
	return err
}
