package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// Tensor is an N-dimensional array (1 to 4 dims) on the host or on an
// engine's device. A device tensor made by an op is pending until a value is
// needed: its node is then computed with everything else pending.
type Tensor struct {
	shape  []int
	dtype  ggmlcgo.Type
	engine *Engine

	host []float32 // host storage
	ints []int32   // host storage of an i32 tensor (ints.go)
	// indices marks gglua's own i32 index uploads, the only i32 tensors an
	// op takes as an input (user i32 tensors are read on the host).
	indices bool
	// scalar: a 1-element tensor that a checkpoint writes as 0-d (shape
	// []), as PyTorch's scalars are (see Scalar).
	scalar bool

	handle  *residency.Handle // device memory, once placed
	node    ggmlcgo.Tensor    // while pending: the op node that computes the value
	pending bool
	passGen int64 // while pending: the pass generation of node's metadata
	queued  int   // while pending: its place in the engine's pending list
	dropped bool  // its pending work was dropped by a reset before it ran
	inTape  bool  // made by an op while a tape was recording (an activation)
	held    bool  // a caller holds it: see Hold
	carried bool  // detached to be carried into later steps: see Carry
	// scratch: nothing reads it after the graph that computes it (made by
	// Backward for its own use, an activation's gradient; or Transient);
	// freed: it was so computed, in scratch memory (lazy.go's Realize).
	scratch bool
	freed   bool

	// A view (base != nil) has no storage of its own: element (i_1..i_n)
	// is its base's element offset + Σ i_k·strides[k] (see views.go).
	base    *Tensor
	offset  int64
	strides []int64
	version int64 // in-place writes to this storage so far (a base's; see views.go)
	// A graph's result (result) is written only by graphs that queue it
	// (written: the last one's Backend.Launches number), so a read after
	// that graph finished need not wait for the later ones. Other memory
	// (weights, optimizer moments) is also written as a side effect of
	// ops on other tensors (ggml's fused AdamW writes the moments).
	result  bool
	written int64

	requiresGrad bool
	frozen       bool // requires_grad was turned off by SetRequiresGrad: an optimizer leaves it off
	param        bool // made a parameter (MarkParam): one still when frozen
	gradFn       *gradFn
	accumulate   *gradFn // a leaf's place in the tape (tapeNode)
	grad         *Tensor
	gradZero     bool // zero_grad ran: the next backward sets .grad instead of adding
}

var errDropped = fmt.Errorf("%w: this value was never computed: a reset of the pass pool dropped the work that made it", residency.ErrStale)

// errFreed is a read of a scratch result (a gradient Backward made for its
// own use, a Transient one), whose memory went to later nodes of its
// graph: a gglua bug, never a script's.
var errFreed = fmt.Errorf("%w: internal error: an intermediate value was read after its graph (its memory was reused)", residency.ErrStale)

// FromFloat32 makes a host tensor of shape holding data (not copied).
func FromFloat32(data []float32, shape ...int) (*Tensor, error) {
	n, err := checkShape(shape)
	if err != nil {
		return nil, fmt.Errorf("tensor: %w", err)
	}
	if int64(len(data)) != n {
		return nil, shapeErrorf("tensor: %d values given for shape %s (%d elements)", len(data), ShapeString(shape), n)
	}
	if data == nil { // an empty tensor still holds (no) host values
		data = []float32{}
	}
	return &Tensor{shape: append([]int(nil), shape...), dtype: ggmlcgo.F32, host: data}, nil
}

// Full makes a host tensor filled with v.
func Full(v float32, shape ...int) (*Tensor, error) {
	n, err := checkShape(shape)
	if err != nil {
		return nil, fmt.Errorf("tensor: %w", err)
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = v
	}
	return FromFloat32(data, shape...)
}

// Zeros makes a host tensor of zeros.
func Zeros(shape ...int) (*Tensor, error) { return Full(0, shape...) }

// Shape is the tensor's shape, outermost first.
func (t *Tensor) Shape() []int { return append([]int(nil), t.shape...) }

// Dim is the number of dimensions.
func (t *Tensor) Dim() int { return len(t.shape) }

// Numel is the number of elements.
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= int64(d)
	}
	return n
}

// Dtype is the storage type.
func (t *Tensor) Dtype() ggmlcgo.Type { return t.dtype }

// OnDevice reports whether the data lives (or will live) on a device.
func (t *Tensor) OnDevice() bool { return !t.storage().onHost() }

// onHost reports whether t holds host storage (f32 values or i32 ints).
func (t *Tensor) onHost() bool { return t.host != nil || t.ints != nil }

// Pending reports whether the value is still to be computed.
func (t *Tensor) Pending() bool { return t.pending }

// Device is "host" for host tensors, else the engine's device ("cpu", "cuda0").
func (t *Tensor) Device() string {
	t = t.storage()
	if t.onHost() {
		return "host"
	}
	return t.engine.DeviceName()
}

// Scope is the pool of a device tensor ("pass" or "persistent"), "host" for
// host tensors. Op results live in the pass pool.
func (t *Tensor) Scope() string {
	t = t.storage()
	switch {
	case t.onHost():
		return "host"
	case t.handle != nil:
		return t.handle.Scope().String()
	}
	return residency.Pass.String()
}

func (t *Tensor) persistent() bool {
	t = t.storage()
	return t.handle != nil && t.handle.Scope() == residency.Persistent
}

// RequiresGrad reports whether backward computes a gradient for t.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks a leaf as a parameter (or not).
func (t *Tensor) SetRequiresGrad(on bool) error {
	if t.gradFn != nil {
		return errors.New("requires_grad: only leaf tensors can be marked; this one was computed by an op")
	}
	if on && t.storage().dtype == ggmlcgo.I32 {
		return argErrorf("requires_grad: an i32 tensor has no gradient (only floating-point tensors do, as in PyTorch)")
	}
	if on && t.IsQuantized() {
		return errQuantizedGrad(t)
	}
	t.requiresGrad, t.frozen = on, !on
	return nil
}

// MarkParam marks t a parameter (tensor.param): a module keeps it among
// its parameters when requires_grad is turned off (frozen), as PyTorch's
// nn.Parameter stays one.
func (t *Tensor) MarkParam() { t.param = true }

// IsParam reports whether t is a parameter: a leaf that requires grad, or
// one marked so (a frozen parameter).
func (t *Tensor) IsParam() bool { return t.gradFn == nil && (t.requiresGrad || t.param) }

// Grad is the accumulated gradient (nil before any backward).
func (t *Tensor) Grad() *Tensor {
	if t.gradZero {
		return nil
	}
	return t.grad
}

// IsLeaf reports whether t was made by the user rather than by a recorded op.
func (t *Tensor) IsLeaf() bool { return t.gradFn == nil }

// ToDevice copies the tensor into a pool of e's device, stored as dtype.
func (t *Tensor) ToDevice(e *Engine, scope residency.Scope, dtype ggmlcgo.Type) (*Tensor, error) {
	var h *residency.Handle
	if (t.storage().dtype == ggmlcgo.I32) != (dtype == ggmlcgo.I32) {
		return nil, argErrorf("to_gpu: an i32 tensor moves as i32 and only as i32; convert with x:float() or x:int() first")
	}
	if t.Numel() == 0 { // no memory anywhere: an empty tensor stays on the host
		return emptyTyped(t.shape, dtype), nil
	}
	if dtype == ggmlcgo.I32 {
		ints, err := t.int32s()
		if err != nil {
			return nil, err
		}
		h, err = e.res.Upload(residency.Request{Shape: t.shape, Type: dtype, Scope: scope}, encodeInt32s(ints))
		if err != nil {
			return nil, err
		}
	} else {
		data, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		if h, err = e.upload(data, t.shape, dtype, scope); err != nil {
			return nil, err
		}
	}
	out := &Tensor{shape: t.Shape(), dtype: dtype, handle: h, engine: e, scalar: t.scalar}
	if scope == residency.Pass {
		e.trackPass(out)
	}
	return out, nil
}

// MoveToDevice moves a leaf tensor itself to a pool of e's device: the same
// *Tensor, requires_grad kept, now resident. Modules and optimizers hold
// their parameters this way.
func (t *Tensor) MoveToDevice(e *Engine, scope residency.Scope) error {
	return t.MoveToDeviceAs(e, scope, t.dtype)
}

// MoveToDeviceAs is MoveToDevice with a storage dtype (f16/bf16 weights keep
// f32 gradients and optimizer state).
func (t *Tensor) MoveToDeviceAs(e *Engine, scope residency.Scope, dtype ggmlcgo.Type) error {
	if t.gradFn != nil {
		return errors.New("to_gpu: only leaf tensors move in place")
	}
	if t.base != nil {
		return errors.New("to_gpu: a view shares its base's storage and cannot move in place; move the base, or copy it with clone()")
	}
	if t.handle != nil && t.engine == e && t.handle.Scope() == scope && t.handle.Live() && !t.pending && t.dtype == dtype {
		return nil
	}
	moved, err := t.ToDevice(e, scope, dtype)
	if err != nil {
		return err
	}
	if t.Numel() == 0 { // no memory anywhere: an empty tensor stays on the host
		t.host, t.ints, t.dtype = moved.host, moved.ints, dtype
		return nil
	}
	// The gradient moves too (as f32, beside its weight): an optimizer step
	// after the move must see what backward computed.
	var grad *Tensor
	if g := t.Grad(); g != nil {
		if grad, err = g.ToHost(); err == nil && scope == residency.Persistent {
			grad, err = grad.ToDevice(e, residency.Persistent, ggmlcgo.F32)
		}
		if err != nil {
			return fmt.Errorf("to_gpu: moving the gradient: %w", err)
		}
	}
	t.host, t.ints, t.handle, t.engine, t.dtype = nil, nil, moved.handle, e, dtype
	t.grad, t.gradZero = grad, false
	t.version++
	return nil
}

// ToHost copies the tensor's values to a host f32 tensor.
func (t *Tensor) ToHost() (*Tensor, error) {
	var out *Tensor
	var err error
	if t.storage().dtype == ggmlcgo.I32 {
		var ints []int32
		if ints, err = t.int32s(); err == nil {
			out, err = FromInt32(append([]int32(nil), ints...), t.shape...)
		}
	} else {
		var data []float32
		if data, err = t.Float32s(); err == nil {
			out, err = FromFloat32(append([]float32(nil), data...), t.shape...)
		}
	}
	if err != nil {
		return nil, err
	}
	out.scalar = t.scalar
	return out, nil
}

// Scalar reports whether t is written to a checkpoint as 0-d (shape []).
// gglua has no 0-d tensors: a PyTorch scalar (a BatchNorm's
// num_batches_tracked) is a 1-element tensor so marked, by the safetensors
// reader or by MarkScalar; the mark moves with it to and from a device and
// to its copies (clone, detach, casts), not to op results.
func (t *Tensor) Scalar() bool { return t.scalar }

// MarkScalar marks the 1-element t to be written as 0-d.
func (t *Tensor) MarkScalar() error {
	if t.Numel() != 1 || t.base != nil {
		return argErrorf("scalar_tensor: a scalar has one element of its own, got shape %s", ShapeString(t.shape))
	}
	t.scalar = true
	return nil
}

// Float32s returns the values, outermost dimension slowest, computing
// pending work first. The slice of a host tensor is its storage; a device
// tensor's, and a view's, is a fresh copy.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.storage().dtype == ggmlcgo.I32 {
		return t.int32sAsFloat32()
	}
	if t.IsQuantized() {
		d, err := t.engine.dequantized(t)
		if err != nil {
			return nil, err
		}
		return d.Float32s()
	}
	if t.base != nil {
		return t.gather()
	}
	if t.host != nil {
		return t.host, nil
	}
	if t.dropped {
		return nil, errDropped
	}
	if t.freed {
		return nil, errFreed
	}
	e := t.engine
	// Under in-graph data parallelism a gradient is a bucket slice whose
	// sum may still be pending while the slice itself is not
	// (data_parallel_sums.go).
	if t.pending || (e.overlapsReads() && len(e.pending) > 0) || e.sumPendingFor(t) {
		// On an asynchronous device a read queues everything pending (a
		// step's backward and update, after its loss was computed with the
		// forward) and waits only for the graph that wrote t: the host
		// then builds the next step while the device runs this one.
		if err := e.Realize(); err != nil {
			return nil, err
		}
		if t.host != nil { // a compaction after the compute moved it to the host
			return t.host, nil
		}
	}
	raw := make([]byte, t.handle.Nbytes())
	read := t.handle.Read
	if t.readsItsWriter() {
		e.backend.WaitFor(t.storage().written)
		read = t.handle.ReadNow
	}
	if err := read(raw); err != nil {
		return nil, err
	}
	if t.handle.Scope() == residency.Pass && t.handle.Live() {
		// Keep what was read: after the next pass reset (the next step) the
		// value stays readable, e.g. last step's loss.
		if err := t.handle.KeepHostCopy(raw); err != nil {
			return nil, err
		}
	}
	return decode(t.dtype, raw)
}

// readsItsWriter reports whether a read of t waits only for the graph
// that wrote it (and those before it), not for the device's later queued
// graphs: a graph's result, which no later graph writes.
func (t *Tensor) readsItsWriter() bool {
	return t.storage().result && t.engine.overlapsReads()
}

// overlapsReads reports whether reads queue pending work and wait only for
// what they read (an asynchronous device). Under data parallelism with the
// gradients' sums in the graph (data_parallel_sums.go) they do too: the
// host takes no part in those sums, and at one rank on an H200 (run 51)
// the GPT benchmark then runs as fast as without data parallelism (673k
// tokens/s against 678-694k) where reads waiting for everything gave
// 613-635k. With the sums between computes, run by the host, reads wait:
// on two H200s letting them overlap had one rank wait on its device twice
// as long as the other each step (run 30: 610-667k tokens/s against 790k).
// GGLUA_DIST_READS=wait makes reads wait with the sums in the graph too,
// to compare on several GPUs.
func (e *Engine) overlapsReads() bool {
	return e.backend.Async() && (e.dp == nil || (!distReadsWait && e.dp.inGraph(e)))
}

var distReadsWait = os.Getenv("GGLUA_DIST_READS") == "wait"

// Item is the value of a one-element tensor.
func (t *Tensor) Item() (float32, error) {
	if t.Numel() != 1 {
		return 0, shapeErrorf("item: tensor of shape %s has %d elements, not 1", ShapeString(t.shape), t.Numel())
	}
	v, err := t.Float32s()
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

func encode(dtype ggmlcgo.Type, v []float32) ([]byte, error) {
	switch dtype {
	case ggmlcgo.F32:
		if len(v) == 0 {
			return nil, nil
		}
		// ggml's f32 is the machine's float: the bytes of v, not a copy.
		// Callers copy them (uploads, files) and never keep them.
		return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)), nil
	case ggmlcgo.F16, ggmlcgo.BF16:
		return ggmlcgo.Encode(dtype, v, int64(len(v)))
	}
	return nil, fmt.Errorf("tensor: unsupported storage dtype %v (expected f32, f16 or bf16)", dtype)
}

func encodeInts(v []int) []byte {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(x)))
	}
	return raw
}

func decode(dtype ggmlcgo.Type, raw []byte) ([]float32, error) {
	switch dtype {
	case ggmlcgo.F32:
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v, nil
	case ggmlcgo.F16, ggmlcgo.BF16:
		half := make([]uint16, len(raw)/2)
		for i := range half {
			half[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		v := make([]float32, len(half))
		ggmlcgo.HalfToF32(dtype, half, v)
		return v, nil
	}
	return nil, errors.New("tensor: unsupported storage dtype " + dtype.String())
}

// Hold marks a tensor that a caller (a script, an embedding host) holds:
// made outside a tape, it outlives its step (pass_memory.go's promote
// moves it at the pass reset if it is still reachable then). The results
// of ops that only Go code inside the engine sees are never held: they
// go with their pass.
func (t *Tensor) Hold() {
	t.held = true
	t.storage().held = true // a view's values are its base's
}

// Carry marks t, a value detached from its step's graph to be carried into
// later steps (an RNN's state), as one that outlives its step: if the next
// pass reset finds it still reachable, it moves to the persistent pool
// (pass_memory.go's promote) instead of going with the step.
func (t *Tensor) Carry() { t.storage().carried = true }

// SetHostDtype gives a host tensor a storage dtype (f16/bf16): its values
// are rounded to it, and to_gpu stores it so.
func (t *Tensor) SetHostDtype(dtype ggmlcgo.Type) error {
	if t.host == nil {
		return errors.New("dtype: only a host tensor's dtype can be set; use to_gpu(x, {dtype=...})")
	}
	raw, err := encode(dtype, t.host)
	if err != nil {
		return err
	}
	v, err := decode(dtype, raw)
	if err != nil {
		return err
	}
	copy(t.host, v)
	t.dtype = dtype
	t.version++ // its uploads are out of date
	return nil
}
