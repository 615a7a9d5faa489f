package runlog

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// TensorBoard's event files are TFRecord streams: each record is
//
//	uint64 length (little-endian)
//	uint32 masked CRC32C of those 8 bytes
//	length bytes of data (one Event protobuf)
//	uint32 masked CRC32C of the data
//
// and each Event is tensorflow/core/util/event.proto's message.

// castagnoli is CRC32C's table, the checksum TFRecord uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC32C: the checksum rotated right by 15
// bits plus a constant, so that a CRC stored inside checksummed data does
// not make the outer checksum trivial.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendRecord appends data framed as one TFRecord.
func appendRecord(dst, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	dst = append(dst, n[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, maskedCRC(n[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}

// Field numbers of event.proto's Event and summary.proto's Summary and
// Summary.Value, the only fields written.
const (
	eventWallTime    protowire.Number = 1 // double wall_time
	eventStep        protowire.Number = 2 // int64 step
	eventFileVersion protowire.Number = 3 // string file_version (oneof what)
	eventSummary     protowire.Number = 5 // Summary summary (oneof what)
	summaryValue     protowire.Number = 1 // repeated Summary.Value value
	valueTag         protowire.Number = 1 // string tag
	valueSimpleValue protowire.Number = 2 // float simple_value (oneof value)
)

// fileVersion is the first event of every event file; TensorBoard reads
// the version to know how to read the rest.
const fileVersion = "brain.Event:2"

// fileVersionEvent is the Event {wall_time, file_version}.
func fileVersionEvent(wallTime float64) []byte {
	b := appendWallTime(nil, wallTime)
	b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
	return protowire.AppendString(b, fileVersion)
}

// scalarEvent is the Event {wall_time, step, summary {value {tag,
// simple_value}}} of one scalar.
func scalarEvent(wallTime float64, step int64, tag string, value float32) []byte {
	var v []byte
	v = protowire.AppendTag(v, valueTag, protowire.BytesType)
	v = protowire.AppendString(v, tag)
	v = protowire.AppendTag(v, valueSimpleValue, protowire.Fixed32Type)
	v = protowire.AppendFixed32(v, math.Float32bits(value))

	var s []byte
	s = protowire.AppendTag(s, summaryValue, protowire.BytesType)
	s = protowire.AppendBytes(s, v)

	b := appendWallTime(nil, wallTime)
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(step)) // int64 is a plain varint (two's complement)
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	return protowire.AppendBytes(b, s)
}

func appendWallTime(b []byte, wallTime float64) []byte {
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(wallTime))
}
