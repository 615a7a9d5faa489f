// Package runlog records a training run's scalar metrics in a run folder
// and reads them back.
//
// A run folder holds two files written side by side:
//
//	runs/<name>/metrics.jsonl                   one JSON object a line:
//	                                            {"name":"loss","step":1,"value":0.69,"wall_time":1.7e9}
//	runs/<name>/events.out.tfevents.<time>.<host>
//	                                            TensorBoard's event file, so that
//	                                            `tensorboard --logdir runs` shows the curves
//
// metrics.jsonl is the plain record (values as float64; a NaN or an
// infinity, which JSON cannot hold, is written as the string "NaN",
// "Infinity" or "-Infinity"); gglua plot reads it. The event file is
// TensorBoard's TFRecord stream of Event protobufs: a first event carrying
// file_version "brain.Event:2", then one event per scalar with a
// Summary.Value{tag, simple_value}. simple_value is a float32, as TensorBoard
// stores it, so the event file rounds what metrics.jsonl keeps exactly.
//
// The events are encoded with google.golang.org/protobuf's protowire, the
// module's low-level wire-format API, rather than from a compiled .proto:
// an Event here is five fields, so appending them with protowire is a few
// readable lines with no descriptor, generated code or reflection, and
// the tests decode the files with a schema compiled independently
// (protocompile + dynamicpb), which checks the field numbers and types.
//
// Writes are cheap: a Run appends to in-memory buffers and writes each
// file in one call when Flush or Close is called, when a buffer passes
// 64 KiB, and a few seconds after the first unwritten scalar (a timer), so a
// crash loses at most those seconds. Each flush writes whole lines, so two
// processes appending to one metrics.jsonl (O_APPEND) do not split each
// other's lines; each keeps its own event file.
package runlog
