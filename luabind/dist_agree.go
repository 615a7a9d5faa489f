package luabind

import (
	"fmt"
	"hash/fnv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/dist"
	"github.com/gglua/gglua/ggmlcgo"
)

// Before a collective moves data, the ranks check that they make the same
// call on alike tensors. Neither library checks it for us: MPI broadcasts
// rank 0's 3 floats into rank 1's 5 and returns, mixed ops or roots give
// each rank its own answer, and a size mismatch aborts the job with
// MPI_ERR_TRUNCATE (NCCL hangs), naming no op, shape or script line.
//
// The check is one all_reduce (MAX) of a fixed header: every field goes as
// 3 chunks of 22 bits (exact in float32, the one type the collectives are
// given here), each chunk c beside -c, so one call returns every chunk's
// maximum and minimum over the ranks; a field whose maximum and minimum
// differ is held differently somewhere. Every rank learns the same thing
// from it and raises the same way, so a disagreement is an error on every
// rank at once, never a wait for a collective another rank skipped. It is
// a few hundred bytes once per dist call, off the per-step gradient path
// (core sums the gradients without it).

// The header's fields. A shape's dimensions up to ggmlcgo.MaxDims have a
// field each (so a message can say what the other rank holds); the hash
// covers every shape whole.
const (
	fCall     = iota // which dist function (callAllReduce, ...)
	fRefused         // 1: this rank refuses its own call (agree's refuse)
	fElements        // the tensor's element count (data_parallel: all its tensors')
	fShapes          // FNV-1a of the shapes in order
	fNdim
	fDim1  // ... to fDim1+ggmlcgo.MaxDims-1
	fDtype = fDim1 + ggmlcgo.MaxDims
	fOp    = fDtype + 1 // all_reduce's op, plus 1
	fSrc   = fOp + 1    // broadcast's src
	// data_parallel's
	fParams   = fSrc + 1  // parameters to average
	fOthers   = fSrc + 2  // other tensors to broadcast (buffers)
	fAveraged = fSrc + 3  // parameters already averaged by earlier calls
	fBucket   = fSrc + 4  // bucket_cap_mb's bytes (0: default)
	fSums     = fSrc + 5  // 1: gradients summed between computes (GGLUA_DIST_SUMS=between)
	nFields   = fSums + 1 // the header's length
)

// The calls, as fCall holds them.
const (
	callAllReduce = iota + 1
	callBroadcast
	callAllGather
	callBarrier
	callDataParallel
)

var callNames = map[uint64]string{callAllReduce: "dist.all_reduce", callBroadcast: "dist.broadcast",
	callAllGather: "dist.all_gather", callBarrier: "dist.barrier", callDataParallel: "dist.data_parallel"}

// header is what one rank says of its call.
type header [nFields]uint64

const (
	chunkBits = 22 // exact in a float32's 24-bit mantissa
	chunks    = 3  // 66 bits: a whole uint64 (the hash)
	chunkMask = 1<<chunkBits - 1
)

// tensorHeader describes a call on t (nil: none, as when this rank refuses
// an argument that is not a tensor).
func tensorHeader(call int, t *core.Tensor) header {
	var h header
	h[fCall] = uint64(call)
	if t != nil {
		h.setShapes(t.Shape())
		h[fDtype] = uint64(t.Dtype())
	}
	return h
}

// setShapes fills the shape fields from shapes in order: one tensor's
// shape also gets the per-dimension fields.
func (h *header) setShapes(shapes ...[]int) {
	f := fnv.New64a()
	var n uint64
	for _, s := range shapes {
		fmt.Fprint(f, s, ";")
		n += uint64(elements(s))
	}
	h[fShapes], h[fElements] = f.Sum64(), n
	if len(shapes) == 1 {
		h[fNdim] = uint64(len(shapes[0]))
		for i, d := range shapes[0][:min(len(shapes[0]), ggmlcgo.MaxDims)] {
			h[fDim1+i] = uint64(d)
		}
	}
}

// encode is h as the all_reduce(MAX) sends it: chunks, then their negations.
func (h header) encode() []float32 {
	v := make([]float32, 2*chunks*nFields)
	for f, x := range h {
		for k := range chunks {
			c := float32(x >> (chunkBits * (chunks - 1 - k)) & chunkMask)
			v[f*chunks+k], v[(nFields+f)*chunks+k] = c, -c
		}
	}
	return v
}

// spread is what the ranks hold: this rank's header, and each chunk's
// maximum and minimum over the world ranks.
type spread struct {
	mine   header
	hi, lo [nFields][chunks]uint64
	world  int
}

// decodeSpread reads the all_reduce(MAX) of every rank's mine.encode().
func decodeSpread(mine header, maxed []float32, world int) *spread {
	s := &spread{mine: mine, world: world}
	for f := range nFields {
		for k := range chunks {
			s.hi[f][k] = uint64(maxed[f*chunks+k])
			s.lo[f][k] = uint64(-maxed[(nFields+f)*chunks+k])
		}
	}
	return s
}

func (s *spread) differs(f int) bool { return s.hi[f] != s.lo[f] }

// other is a value another rank holds for field f, when one is known: the
// maximum or minimum over the ranks that is not this rank's value. Known
// only when a single chunk varies; chunkwise extremes of a field varying in
// several chunks could join different ranks' chunks into a value no rank
// holds.
func (s *spread) other(f int) (uint64, bool) {
	varying := 0
	var hi, lo uint64
	for k := range chunks {
		if s.hi[f][k] != s.lo[f][k] {
			varying++
		}
		hi, lo = hi<<chunkBits|s.hi[f][k], lo<<chunkBits|s.lo[f][k]
	}
	switch {
	case varying != 1:
		return 0, false
	case hi != s.mine[f]:
		return hi, true
	case lo != s.mine[f]:
		return lo, true
	}
	return 0, false
}

// otherShape is the other rank's shape, known when there is one other rank
// (with more, the dimensions' extremes may come from different ranks).
func (s *spread) otherShape() ([]int, bool) {
	if s.world != 2 {
		return nil, false
	}
	value := func(f int) (uint64, bool) {
		if !s.differs(f) {
			return s.mine[f], true
		}
		return s.other(f)
	}
	n, ok := value(fNdim)
	if !ok || n > ggmlcgo.MaxDims {
		return nil, false
	}
	shape := make([]int, n)
	for i := range shape {
		d, ok := value(fDim1 + i)
		if !ok {
			return nil, false
		}
		shape[i] = int(d)
	}
	return shape, true
}

// problem says how another rank's call differs from this one's ("": it
// does not); mine describes this rank's call, rule what must agree.
func (s *spread) problem(rank int, mine, rule string) string {
	if s.differs(fCall) {
		other, ok := s.other(fCall)
		name := callNames[other]
		if !ok || name == "" {
			name = "another dist function"
		}
		with := ""
		if mine != "" {
			with = " with " + mine
		}
		return fmt.Sprintf("another rank called %s where this rank (%d of %d) called %s%s; every rank must make the same dist calls in the same order",
			name, rank, s.world, callNames[s.mine[fCall]], with)
	}
	if s.hi[fRefused][chunks-1] != 0 { // (agree raised this rank's own refusal)
		return fmt.Sprintf("another rank refused its call (its own error says why), so no rank sent anything; this rank (%d of %d) passed %s", rank, s.world, mine)
	}
	var diffs []string
	say := func(f int, known, unknown string) {
		if !s.differs(f) {
			return
		}
		if v, ok := s.other(f); ok && known != "" {
			diffs = append(diffs, fmt.Sprintf(known, v))
		} else {
			diffs = append(diffs, unknown)
		}
	}
	if s.mine[fCall] == callDataParallel {
		say(fParams, "another rank has %d parameters to average", "another rank has a different number of parameters to average")
		say(fOthers, "another rank has %d other tensors (buffers)", "another rank has a different number of other tensors (buffers)")
		if !s.differs(fParams) && !s.differs(fOthers) && s.differs(fShapes) {
			say(fElements, "another rank's tensors have other shapes, %d elements in all", "another rank's tensors have other shapes")
			if !s.differs(fElements) {
				diffs = append(diffs, "another rank's tensors have other shapes")
			}
		}
		say(fAveraged, "another rank already averages %d parameters from earlier dist.data_parallel calls", "another rank already averages a different number of parameters from earlier dist.data_parallel calls")
		if s.differs(fBucket) {
			diffs = append(diffs, "another rank passed a different bucket_cap_mb")
		}
		if s.differs(fSums) {
			diffs = append(diffs, "another rank sums gradients elsewhere (GGLUA_DIST_SUMS differs)")
		}
	} else {
		if s.differs(fElements) || s.differs(fShapes) || s.differs(fNdim) {
			if shape, ok := s.otherShape(); ok {
				diffs = append(diffs, "the other rank has shape "+shapeText(shape))
			} else {
				say(fElements, "another rank has %d elements", "another rank has a different shape")
				if !s.differs(fElements) {
					diffs = append(diffs, "another rank has a different shape of as many elements")
				}
			}
		}
		if s.differs(fDtype) {
			if v, ok := s.other(fDtype); ok {
				diffs = append(diffs, "another rank's tensor is "+ggmlcgo.Type(v).String())
			} else {
				diffs = append(diffs, "another rank's tensor has another dtype")
			}
		}
		if s.differs(fOp) {
			if v, ok := s.other(fOp); ok && v > 0 {
				diffs = append(diffs, fmt.Sprintf("another rank passed op %q", dist.Op(v-1).String()))
			} else {
				diffs = append(diffs, "another rank passed another op")
			}
		}
		say(fSrc, "another rank passed src %d", "another rank passed another src")
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("the ranks' calls differ, so nothing was sent: this rank (%d of %d) passed %s, and %s (every rank must pass %s)",
		rank, s.world, mine, strings.Join(diffs, "; "), rule)
}

// shapeText is a shape as gglua's errors write it ("2x3"; "scalar").
func shapeText(shape []int) string {
	if len(shape) == 0 {
		return "scalar"
	}
	return core.ShapeString(shape)
}

// agree has every rank of c compare its header h (one small all_reduce)
// and raises, on every rank, the error of the first problem: this rank's
// own objection (refuse, nil when it has none: it raises only once the
// others have heard that this rank refuses, so that they raise too instead
// of waiting in a collective this rank never makes), another rank's, or a
// difference between the calls. mine describes this rank's call and rule
// what must agree, for the message.
func (env *Env) agree(L *lua.LState, fn string, c dist.Comm, h header, refuse func(), mine, rule string) {
	if refuse != nil {
		h[fRefused] = 1
	}
	v := h.encode()
	if err := env.maxAcross(c, v); err != nil {
		argError(L, fn, "comparing this call with the other ranks': %s", err.Error())
	}
	if refuse != nil {
		refuse()
		argError(L, fn, "refused on this rank") // refuse raises; this is a guard
	}
	if msg := decodeSpread(h, v, c.Size()).problem(c.Rank(), mine, rule); msg != "" {
		argError(L, fn, "%s", msg)
	}
}

// maxAcross sets v to its elementwise maximum over the ranks, in the
// memory c reduces (GPU memory for NCCL).
func (env *Env) maxAcross(c dist.Comm, v []float32) error {
	t, err := core.FromFloat32(v, len(v))
	if err == nil && c.OnDevice() {
		t, err = t.ToDevice(env.Engine, residency.Pass, ggmlcgo.F32)
	}
	if err == nil {
		err = env.Engine.WithBuffer(t, true, func(b core.Buffer) error { return c.AllReduce(b.Data, b.Count, dist.Max) })
	}
	if err != nil {
		return err
	}
	got, err := t.Float32s()
	copy(v, got)
	return err
}

// lendable is what lending t to c would refuse (a view, an i32 tensor,
// memory of the wrong kind, with write a tensor the tape needs), nil when
// nothing; it computes pending work but changes nothing. Alone (c nil) the
// tensor is checked as a collective would check it, so that a script does
// not fail only at scale.
func (env *Env) lendable(c dist.Comm, t *core.Tensor, write bool) error {
	// WithBuffer refuses to write a computed tensor before it moves its
	// version on, and a leaf is never refused for writing: so only a
	// computed tensor is lent "for writing" here, where it is refused.
	w := write && !t.IsLeaf()
	return env.Engine.WithBuffer(t, w, func(b core.Buffer) error { return memoryKind(c, t, b) })
}

// memoryKind refuses memory c does not reduce.
func memoryKind(c dist.Comm, t *core.Tensor, b core.Buffer) error {
	switch {
	case c == nil:
		return nil
	case b.OnDevice && !c.OnDevice():
		return fmt.Errorf("MPI reduces host memory, this tensor is on %s", t.Device())
	case !b.OnDevice && c.OnDevice():
		return fmt.Errorf("NCCL reduces GPU memory, this tensor is on the host: move it with to_gpu(t) first")
	}
	return nil
}
