package residency

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"weak"

	"github.com/gglua/gglua/ggmlcgo"
)

// Arena sizes: the first buffer of a pool is MinArenaBytes, each next one
// twice the last, up to MaxArenaBytes (a larger tensor gets a buffer its own
// size). A pool of many tensors thus holds O(log n) buffers.
const (
	MinArenaBytes = int64(1) << 20
	MaxArenaBytes = int64(1) << 30
	arenaTensors  = 256 // tensor slots of a pool's first metadata context
)

// State is the residency state of one runtime on one backend: both pools, the
// traffic counters and the budget.
type State struct {
	backend *ggmlcgo.Backend
	buft    ggmlcgo.BufferType
	pools   [nScopes]pool
	// cache keeps the pass pool's buffers across a pass reset, for the next
	// step to reuse: a training step allocates the same sizes every time,
	// and fresh memory costs page faults. It counts as held memory (ledger
	// and budget); a full reset or a budget squeeze frees it.
	cache []ggmlcgo.Buffer
	// passUsed are the bytes the last passes gave their tensors (newest at
	// passes % len): the most of them sizes the buffer recycle keeps.
	passUsed [8]int64
	passes   int
	// staging is pinned host memory that uploads to a GPU go through
	// (pageable uploads measured 7-9 GB/s on an H200, pinned 55 GB/s). It
	// grows to the largest upload and is not device memory: not in the ledger.
	staging ggmlcgo.Buffer
	limit   int64
	h2d     int64
	d2h     int64
	closed  bool
	// pinned are the persistent handles whose ggml tensor Tensor handed out
	// (to build a graph) since the last Computed or pass reset: a graph not
	// yet computed may read their memory, so they stay reachable, and their
	// memory theirs, until then. epoch counts those points.
	pinned []*Handle
	epoch  uint64
	// scratch holds what graphs compute and nothing reads afterwards
	// (scratch.go); peak is the pass pool's high-water mark, scratch
	// included, since the last pass reset.
	scratch scratch
	peak    int64
	// reclaimedAt is when reclaim last looked: Go's collections so far,
	// read into gcCycles, and the pass generation.
	reclaimedAt reclaimed
	gcCycles    [1]metrics.Sample
}

type reclaimed struct {
	gc   uint64
	pass int64
}

type pool struct {
	scope  Scope
	gen    int64
	bytes  int64 // buffer bytes held
	used   int64 // bytes of the arenas given to tensors
	arenas []*arena
	// regular is the size of the last arena made by doubling, not one
	// sized for a tensor larger than that: the persistent pool's next
	// doubles it (arenaSize).
	regular int64
	metas   []*meta // the contexts describing the pool's tensors, newest last
	// owned (persistent pool only) are the tensors whose memory goes back
	// to their arena's free list once their handle is unreachable.
	owned []owned
	// The pacing of forced collections (see place): bytes placed since the
	// last one.
	sinceGC int64
}

// arena is one backend buffer and the free regions in it.
type arena struct {
	buf  ggmlcgo.Buffer
	free []span // sorted by offset, neighbours merged
	used int64
}

type span struct{ off, size int64 }

// meta is a ggml context holding tensor descriptions. Its slots are not
// reused: once every tensor it describes is gone, and no graph can still
// point at them (a pass reset since), the context is freed.
type meta struct {
	ctx       *ggmlcgo.Context
	live      int   // tensors described here whose memory is still theirs
	idleSince int64 // the pass generation when live fell to 0
}

// owned is a persistent tensor's memory: the handle that owns it (weak:
// the State does not keep it alive) and where it lies.
type owned struct {
	h         weak.Pointer[Handle]
	a         *arena
	off, size int64
	m         *meta // nil for a tensor described elsewhere (Place)
}

// New starts an empty residency state on b. The State does not own b.
func New(b *ggmlcgo.Backend) *State {
	s := &State{backend: b, buft: b.BufferType(), epoch: 1}
	s.gcCycles[0].Name = "/gc/cycles/total:gc-cycles"
	for i := range s.pools {
		s.pools[i].scope = Scope(i)
	}
	return s
}

// Backend is the backend the pools live on.
func (s *State) Backend() *ggmlcgo.Backend { return s.backend }

// Gen is the current generation of a pool.
func (s *State) Gen(scope Scope) int64 { return s.pools[scope].gen }

// Reset frees the named pools (none named: both) and advances their
// generation counters. The other pool is not touched. A pass reset alone
// keeps the pass buffers in the cache for reuse; resetting both frees all.
func (s *State) Reset(scopes ...Scope) {
	all := len(scopes) == 0 || len(scopes) == 2
	if len(scopes) == 0 {
		scopes = []Scope{Pass, Persistent}
	}
	for _, sc := range scopes {
		p := &s.pools[sc]
		if sc == Pass && !all {
			s.recycle(p)
		} else {
			for _, a := range p.arenas {
				a.buf.Free()
			}
		}
		for _, m := range p.metas {
			m.ctx.Free()
		}
		gen := p.gen + 1
		*p = pool{scope: sc, gen: gen}
	}
	// A pass reset drops every graph not computed yet (their nodes are the
	// pass's); a persistent one frees what the pins were for.
	s.Computed()
	if all {
		s.dropCache()
		s.freeScratch()
	}
	s.peak = 0
	s.notePeak()
	// Persistent memory dropped during the pass goes back now (promoted
	// values come and go every step), with the descriptions no graph of
	// the pass freed can use any more.
	s.reclaim()
}

// recycle puts the pass pool's buffers in the cache for the next pass. A
// training step places the same tensors in the same order every time, and
// the pool's arenas double (the last one may be half empty, and each
// leaves the end that its next tensor did not fit): where the pass needed
// several and they hold more than the last passes used, the cache gets one
// buffer of the most of them instead, which the next pass fills from the
// start, with nothing left over, at the same addresses from then on (a
// replayed CUDA graph needs them). The most of the last eight passes: a
// loop of larger and smaller passes (a step, then an evaluation) keeps one
// buffer for both; a single buffer is replaced only when it holds more
// than twice that and a megabyte to spare, so that one large pass before
// the loop (data made on the device) does not set the size for good, and
// smaller changes do not move every address again.
func (s *State) recycle(p *pool) {
	s.passUsed[s.passes%len(s.passUsed)] = p.used
	s.passes++
	need := slices.Max(s.passUsed[:])
	spare := p.bytes - need
	if len(p.arenas) > 1 && spare < max(MinArenaBytes, need/16) || len(p.arenas) <= 1 && spare < max(MinArenaBytes, need) {
		for _, a := range p.arenas {
			s.cache = append(s.cache, a.buf)
		}
		return
	}
	ggmlcgo.WaitDevices() // the buffers are freed: no queued graph may use them
	for _, a := range p.arenas {
		a.buf.Free()
	}
	s.dropCache()
	// Room for the base's alignment, and a little for a pass that places
	// a few tensors more.
	size := s.padded(need + need/64 + s.buft.Alignment())
	if s.CheckBudget(size) != nil {
		return
	}
	if b, err := s.buft.Alloc(size); err == nil {
		s.cache = append(s.cache, b)
	}
}

// Computed tells the State that every graph built from the tensors that
// Handle.Tensor handed out so far has been computed, or will never be: the
// memory of persistent handles dropped since may now go to other tensors.
// Until then (or until the next pass reset) it stays theirs.
func (s *State) Computed() {
	clear(s.pinned)
	s.pinned = s.pinned[:0]
	s.epoch++
}

// pin keeps h's memory its own until the next Computed.
func (s *State) pin(h *Handle) {
	if h.scope != Persistent {
		return // the pass pool is only freed whole, by a reset
	}
	if h.parent != nil {
		h = h.parent
	}
	if h.pinnedAt != s.epoch {
		h.pinnedAt = s.epoch
		s.pinned = append(s.pinned, h)
	}
}

// stagingFor returns pinned memory of at least n bytes for an upload, or no
// buffer (a direct copy) on the CPU or when none can be had.
func (s *State) stagingFor(n int) ggmlcgo.Buffer {
	bt, ok := s.backend.PinnedBufferType()
	if !ok || n < 1<<16 { // small uploads: the extra copy is not worth it
		return ggmlcgo.Buffer{}
	}
	if s.staging.IsNil() || s.staging.Size() < int64(n) {
		s.staging.Free()
		s.staging = ggmlcgo.Buffer{}
		size := int64(1) << 20
		for size < int64(n) {
			size *= 2
		}
		b, err := bt.Alloc(size)
		if err != nil {
			return ggmlcgo.Buffer{}
		}
		s.staging = b
	}
	return s.staging
}

func (s *State) dropCache() {
	for _, b := range s.cache {
		b.Free()
	}
	s.cache = nil
}

func (s *State) cached() int64 {
	n := int64(0)
	for _, b := range s.cache {
		n += b.Size()
	}
	return n
}

// fromCache takes the smallest cached buffer of at least size bytes.
func (s *State) fromCache(size int64) (ggmlcgo.Buffer, bool) {
	best := -1
	for i, b := range s.cache {
		if b.Size() >= size && (best < 0 || b.Size() < s.cache[best].Size()) {
			best = i
		}
	}
	if best < 0 {
		return ggmlcgo.Buffer{}, false
	}
	b := s.cache[best]
	s.cache = append(s.cache[:best], s.cache[best+1:]...)
	return b, true
}

// Close frees both pools; later allocations are errors.
func (s *State) Close() {
	if !s.closed {
		s.Reset()
		s.staging.Free()
		s.staging = ggmlcgo.Buffer{}
		s.closed = true
	}
}

// SetLimit sets the budget in bytes for both pools together (0: none) and
// returns the previous one. Memory already held is not freed by a lower limit;
// further allocations are refused until it fits.
func (s *State) SetLimit(bytes int64) (int64, error) {
	if bytes < 0 {
		return s.limit, fmt.Errorf("memory limit must be >= 0 bytes, got %d", bytes)
	}
	prev := s.limit
	s.limit = bytes
	return prev, nil
}

// Limit is the current budget (0: none).
func (s *State) Limit() int64 { return s.limit }

// held is the device memory held: the pools' buffers, free regions in them
// included, and the cache. The budget counts it; a tensor placed in a free
// region takes nothing more.
func (s *State) held() int64 {
	return s.pools[Pass].bytes + s.pools[Persistent].bytes + s.cached() + s.scratch.bytes
}

// CheckBudget returns an error wrapping ErrBudget if allocating extra more
// bytes would pass the limit.
func (s *State) CheckBudget(extra int64) error {
	if s.limit > 0 && s.held()+extra > s.limit {
		pers := &s.pools[Persistent]
		return fmt.Errorf("residency: %w: %d bytes requested, %d held (pass %d + persistent %d, %d of them free + cached %d + scratch %d), limit %d", ErrBudget,
			extra, s.held(), s.pools[Pass].bytes, pers.bytes, pers.bytes-pers.used, s.cached(), s.scratch.bytes, s.limit)
	}
	return nil
}

// Request describes a tensor to allocate. Its zero values are the defaults:
// f32, in the pass pool.
type Request struct {
	Shape []int // outermost first, 1 to 4 dims
	Type  ggmlcgo.Type
	Scope Scope
	Name  string
	// Alone gives the tensor's description a context of its own, freed
	// once the tensor is gone: for the many tensors made and dropped every
	// step (core's promoted values), whose slots in a shared context are
	// never reused, so that one long-lived among them pins no whole context.
	Alone bool
}

// ne turns an outermost-first shape into ggml's innermost-first ne.
func ne(shape []int) []int64 {
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[len(shape)-1-i] = int64(d)
	}
	return out
}

func (s *State) check(r Request) (int64, error) {
	if s.closed {
		return 0, errors.New("residency: state is closed")
	}
	if r.Scope >= nScopes {
		return 0, fmt.Errorf("residency: unknown scope %v", r.Scope)
	}
	n, err := ggmlcgo.TensorBytes(r.Type, ne(r.Shape))
	if err != nil {
		return 0, fmt.Errorf("residency: shape %v: %w", r.Shape, err)
	}
	if len(r.Name) > ggmlcgo.MaxNameLen {
		return 0, fmt.Errorf("residency: name %q is longer than %d bytes", r.Name, ggmlcgo.MaxNameLen)
	}
	return n, nil
}

// Alloc places a new tensor in its pool. Nothing is allocated when it fails.
// Its memory is not cleared: it may have been another tensor's.
func (s *State) Alloc(r Request) (*Handle, error) {
	if _, err := s.check(r); err != nil {
		return nil, err
	}
	p := &s.pools[r.Scope]
	m, err := s.metaFor(p)
	if r.Alone && err == nil {
		m, err = s.aloneMeta(p)
	}
	if err != nil {
		return nil, err
	}
	t, err := m.ctx.NewTensor(r.Type, ne(r.Shape))
	if err == nil && r.Name != "" {
		err = t.SetName(r.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	// A tensor that gets no memory leaves an unused slot in m, no more.
	return s.place(p, t, m, r.Shape)
}

// Place gives memory in a pool to t, a tensor described elsewhere (an op
// node of a graph), whose shape outermost first is shape. The description
// must outlive the handle.
func (s *State) Place(scope Scope, t ggmlcgo.Tensor, shape []int) (*Handle, error) {
	if s.closed {
		return nil, errors.New("residency: state is closed")
	}
	if scope >= nScopes || t.IsNil() || t.Allocated() || t.IsView() {
		return nil, fmt.Errorf("residency: cannot place this tensor in scope %v", scope)
	}
	return s.place(&s.pools[scope], t, nil, shape)
}

func (s *State) padded(nbytes int64) int64 {
	align := s.buft.Alignment()
	return (nbytes + align - 1) / align * align
}

// metaFor returns the pool's newest metadata context if it has a free
// slot, or a new one, larger than the last up to 16 times the first.
func (s *State) metaFor(p *pool) (*meta, error) {
	if n := len(p.metas); n > 0 && p.metas[n-1].ctx.Room() > 0 {
		return p.metas[n-1], nil
	}
	ctx, err := ggmlcgo.NewContext(arenaTensors<<min(len(p.metas), 4), 0)
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	m := &meta{ctx: ctx}
	p.metas = append(p.metas, m)
	return m, nil
}

// aloneMeta is a context for one tensor, placed before p's newest (which
// metaFor keeps filling).
func (s *State) aloneMeta(p *pool) (*meta, error) {
	ctx, err := ggmlcgo.NewContext(1, 0)
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	// Idle since now: a reclaim before its tensor is placed keeps it.
	m := &meta{ctx: ctx, idleSince: s.pools[Pass].gen}
	p.metas = slices.Insert(p.metas, max(len(p.metas)-1, 0), m)
	return m, nil
}

// place gives t memory in p: the first free region that fits, in the
// oldest arena first; failing that, in the persistent pool, the memory of
// tensors no longer reachable (a garbage collection is forced when enough
// was placed since the last one: device memory is invisible to Go's
// pacer); failing that, a new arena, within the budget.
func (s *State) place(p *pool, t ggmlcgo.Tensor, m *meta, shape []int) (*Handle, error) {
	need := s.padded(s.buft.AllocSize(t))
	a, off, ok := p.fit(need)
	if !ok && p.scope == Persistent {
		s.reclaim()
		a, off, ok = p.fit(need)
		// A collection costs about a millisecond: one is forced only when
		// enough was placed since the last for garbage to be likely.
		// A pool with no memory yet has nothing to give back.
		if !ok && p.bytes > 0 && p.sinceGC+need >= min(MinArenaBytes, p.bytes/8) {
			s.collect()
			a, off, ok = p.fit(need)
		}
	}
	if !ok {
		var err error
		if a, err = s.grow(p, need); err != nil {
			return nil, err
		}
		if a, off, ok = p.fit(need); !ok {
			return nil, fmt.Errorf("residency: internal error: %d bytes do not fit in a new arena", need)
		}
	}
	if err := a.buf.PlaceAt(t, off); err != nil {
		a.give(off, need)
		return nil, fmt.Errorf("residency: %w", err)
	}
	a.used += need
	p.used += need
	h := &Handle{state: s, scope: p.scope, gen: p.gen, tensor: t, shape: append([]int(nil), shape...), typ: t.Type()}
	if p.scope == Persistent {
		p.sinceGC += need
		if m != nil {
			m.live++
		}
		p.owned = append(p.owned, owned{h: weak.Make(h), a: a, off: off, size: need, m: m})
	}
	return h, nil
}

// fit takes need bytes from the first free region, oldest arena first,
// that holds them.
func (p *pool) fit(need int64) (*arena, int64, bool) {
	for _, a := range p.arenas {
		if off, ok := a.take(need); ok {
			return a, off, true
		}
	}
	return nil, 0, false
}

func (a *arena) take(need int64) (int64, bool) {
	for i := range a.free {
		sp := &a.free[i]
		if sp.size < need {
			continue
		}
		off := sp.off
		sp.off += need
		sp.size -= need
		if sp.size == 0 {
			a.free = slices.Delete(a.free, i, i+1)
		}
		return off, true
	}
	return 0, false
}

// give returns a region to the free list, merged with its free neighbours.
func (a *arena) give(off, size int64) {
	i, _ := slices.BinarySearchFunc(a.free, off, func(sp span, off int64) int { return cmp.Compare(sp.off, off) })
	if i > 0 && a.free[i-1].off+a.free[i-1].size == off { // joins the one before
		a.free[i-1].size += size
		if i < len(a.free) && off+size == a.free[i].off { // and the one after
			a.free[i-1].size += a.free[i].size
			a.free = slices.Delete(a.free, i, i+1)
		}
		return
	}
	if i < len(a.free) && off+size == a.free[i].off { // joins the one after
		a.free[i].off, a.free[i].size = off, a.free[i].size+size
		return
	}
	a.free = slices.Insert(a.free, i, span{off, size})
}

// reclaim gives the memory of persistent tensors whose handle the garbage
// collector found unreachable back to their arenas; then frees the arenas
// left empty (but the newest) and the metadata contexts no tensor and no
// graph can use any more (but the newest). It looks only after a
// collection or a pass reset since its last look: nothing else can free
// anything, and the pool may hold thousands of tensors (a step's promoted
// values), which a look per compute would scan every time.
func (s *State) reclaim() {
	metrics.Read(s.gcCycles[:])
	last := s.reclaimedAt
	s.reclaimedAt = reclaimed{pass: s.pools[Pass].gen}
	if v := s.gcCycles[0].Value; v.Kind() == metrics.KindUint64 {
		s.reclaimedAt.gc = v.Uint64()
	}
	p := &s.pools[Persistent]
	if s.reclaimedAt.gc != 0 && s.reclaimedAt.gc == last.gc { // no collection since: no handle was freed
		if s.reclaimedAt.pass != last.pass {
			s.freeIdleMetas(p) // but after a pass reset, idle descriptions may go
		}
		return
	}
	kept := p.owned[:0]
	for _, o := range p.owned {
		if o.h.Value() != nil {
			kept = append(kept, o)
			continue
		}
		o.a.give(o.off, o.size)
		o.a.used -= o.size
		p.used -= o.size
		if o.m != nil {
			if o.m.live--; o.m.live == 0 {
				o.m.idleSince = s.pools[Pass].gen
			}
		}
	}
	clear(p.owned[len(kept):])
	p.owned = kept
	if n := len(p.arenas); n > 1 {
		last := p.arenas[n-1]
		p.arenas = slices.DeleteFunc(p.arenas, func(a *arena) bool {
			if a == last || a.used > 0 {
				return false
			}
			p.bytes -= a.buf.Size()
			a.buf.Free()
			return true
		})
	}
	s.freeIdleMetas(p)
}

// freeIdleMetas frees p's metadata contexts that no tensor and no graph
// can use any more (but the newest).
func (s *State) freeIdleMetas(p *pool) {
	if n := len(p.metas); n > 1 {
		last, passGen := p.metas[n-1], s.pools[Pass].gen
		p.metas = slices.DeleteFunc(p.metas, func(m *meta) bool {
			// Graph nodes may point at a dead tensor's description until the
			// pass they were built in is reset.
			if m == last || m.live > 0 || m.idleSince >= passGen {
				return false
			}
			m.ctx.Free()
			return true
		})
	}
}

// collect runs a garbage collection, so that the weak pointers of every
// unreachable handle are cleared, and reclaims their memory.
func (s *State) collect() {
	runtime.GC()
	s.reclaim()
	s.pools[Persistent].sinceGC = 0
}

// grow adds an arena with room for need bytes to p, checked against the
// budget: before refusing, cached pass buffers are dropped and persistent
// memory nothing references is reclaimed.
func (s *State) grow(p *pool, need int64) (*arena, error) {
	size, doubled := s.arenaSize(p, need)
	buf, reused := ggmlcgo.Buffer{}, false
	if p.scope == Pass {
		if buf, reused = s.fromCache(size); !reused {
			buf, reused = s.fromCache(need + s.buft.Alignment())
		}
	}
	if !reused {
		if err := s.CheckBudget(size); err != nil {
			s.dropCache()
			s.collect()
			if a, off, ok := p.fit(need); ok { // the collection made room
				a.give(off, need)
				return a, nil
			}
			size, doubled = s.arenaSize(p, need)
			if err := s.CheckBudget(size); err != nil {
				return nil, err
			}
		}
		var err error
		if buf, err = s.buft.Alloc(size); err != nil {
			return nil, fmt.Errorf("residency: %s pool: %w", p.scope, err)
		}
	}
	if doubled {
		p.regular = size
	}
	a := &arena{buf: buf}
	if first := buf.FirstOffset(); buf.Size() > first {
		a.free = []span{{first, buf.Size() - first}}
	}
	p.arenas = append(p.arenas, a)
	p.bytes += buf.Size()
	s.notePeak()
	return a, nil
}

// arenaSize is the size of p's next arena: twice the last (up to
// MaxArenaBytes), shrunk to what the budget allows, or a larger tensor's
// own size; doubled reports the first. In the persistent pool "the last"
// is the last made by doubling: a large weight's own buffer does not set
// the next size, or the one-number value placed after a 221 MiB weight
// would get a 442 MiB arena. The pass pool doubles its last arena, own
// buffers included: its sizes then only grow, so every step takes its
// buffers back from the cache in the same order, at the same addresses
// (a replayed CUDA graph needs them).
func (s *State) arenaSize(p *pool, need int64) (size int64, doubled bool) {
	last := p.regular
	if n := len(p.arenas); p.scope == Pass && n > 0 {
		last = p.arenas[n-1].buf.Size()
	}
	size = MinArenaBytes
	if last > 0 {
		size = min(2*last, MaxArenaBytes)
	}
	if s.limit > 0 {
		size = min(size, s.limit-s.held())
	}
	if own := need + s.buft.Alignment(); own > size { // room for the base's alignment too
		return own, false
	}
	return size, true
}
