package residency

import (
	"errors"
	"fmt"

	"github.com/gglua/gglua/ggmlcgo"
)

// Arena sizes: the first buffer of a pool is MinArenaBytes, each next one
// twice the last, up to MaxArenaBytes (a larger tensor gets a buffer its own
// size). A pool of many tensors thus holds O(log n) buffers.
const (
	MinArenaBytes = int64(1) << 20
	MaxArenaBytes = int64(1) << 30
	arenaTensors  = 256 // tensor slots of the first arena's context
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
	// staging is pinned host memory that uploads to a GPU go through
	// (pageable uploads measured 7-9 GB/s on an H200, pinned 55 GB/s). It
	// grows to the largest upload and is not device memory: not in the ledger.
	staging ggmlcgo.Buffer
	limit   int64
	h2d     int64
	d2h     int64
	closed  bool
}

type pool struct {
	scope  Scope
	gen    int64
	bytes  int64
	arenas []*arena
}

// arena is one backend buffer with the context that describes its tensors.
type arena struct {
	ctx *ggmlcgo.Context
	buf ggmlcgo.Buffer
	ta  *ggmlcgo.Tallocr
}

// New starts an empty residency state on b. The State does not own b.
func New(b *ggmlcgo.Backend) *State {
	s := &State{backend: b, buft: b.BufferType()}
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
		for _, a := range p.arenas {
			if sc == Pass && !all {
				s.cache = append(s.cache, a.buf)
			} else {
				a.buf.Free()
			}
			a.ctx.Free()
		}
		p.arenas = nil
		p.bytes = 0
		p.gen++
	}
	if all {
		s.dropCache()
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

func (s *State) held() int64 { return s.pools[Pass].bytes + s.pools[Persistent].bytes + s.cached() }

// CheckBudget returns an error wrapping ErrBudget if allocating extra more
// bytes would pass the limit.
func (s *State) CheckBudget(extra int64) error {
	if s.limit > 0 && s.held()+extra > s.limit {
		return fmt.Errorf("residency: %w: %d bytes requested, %d held (pass %d + persistent %d + cached %d), limit %d", ErrBudget,
			extra, s.held(), s.pools[Pass].bytes, s.pools[Persistent].bytes, s.cached(), s.limit)
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
	n, err := ggmlcgo.CheckShape(r.Type, ne(r.Shape))
	if err != nil {
		return 0, fmt.Errorf("residency: shape %v: %w", r.Shape, err)
	}
	if len(r.Name) > ggmlcgo.MaxNameLen {
		return 0, fmt.Errorf("residency: name %q is longer than %d bytes", r.Name, ggmlcgo.MaxNameLen)
	}
	return n * r.Type.Size(), nil
}

// Alloc places a new tensor in its pool. Nothing is allocated when it fails.
func (s *State) Alloc(r Request) (*Handle, error) {
	nbytes, err := s.check(r)
	if err != nil {
		return nil, err
	}
	p := &s.pools[r.Scope]
	a, err := s.arenaFor(p, s.padded(nbytes))
	if err != nil {
		return nil, err
	}
	t, err := a.ctx.NewTensor(r.Type, ne(r.Shape))
	if err == nil && r.Name != "" {
		err = t.SetName(r.Name)
	}
	if err == nil {
		err = a.ta.Alloc(t)
	}
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	return &Handle{state: s, scope: r.Scope, gen: p.gen, tensor: t, shape: append([]int(nil), r.Shape...), typ: r.Type}, nil
}

// Place gives memory in a pool to t, a tensor described elsewhere (an op
// node of a graph), whose shape outermost first is shape.
func (s *State) Place(scope Scope, t ggmlcgo.Tensor, shape []int) (*Handle, error) {
	if s.closed {
		return nil, errors.New("residency: state is closed")
	}
	if scope >= nScopes || t.IsNil() || t.Allocated() || t.IsView() {
		return nil, fmt.Errorf("residency: cannot place this tensor in scope %v", scope)
	}
	p := &s.pools[scope]
	a, err := s.arenaFor(p, s.padded(t.Nbytes()))
	if err != nil {
		return nil, err
	}
	if err := a.ta.Alloc(t); err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	return &Handle{state: s, scope: scope, gen: p.gen, tensor: t, shape: append([]int(nil), shape...), typ: t.Type()}, nil
}

func (s *State) padded(nbytes int64) int64 {
	align := s.buft.Alignment()
	return (nbytes + align - 1) / align * align
}

// arenaFor returns the pool's last arena if it has room for need bytes and
// one more tensor, or a new arena (checked against the budget) that does.
func (s *State) arenaFor(p *pool, need int64) (*arena, error) {
	if n := len(p.arenas); n > 0 {
		a := p.arenas[n-1]
		if a.ctx.Room() > 0 && a.room() >= need {
			return a, nil
		}
	}
	size := MinArenaBytes
	if n := len(p.arenas); n > 0 {
		size = min(2*p.arenas[n-1].buf.Size(), MaxArenaBytes)
	}
	if s.limit > 0 {
		size = min(size, s.limit-s.held()) // shrink the arena to what the budget allows
	}
	size = max(size, need+s.buft.Alignment()) // room for the base's alignment too
	buf, reused := ggmlcgo.Buffer{}, false
	if p.scope == Pass {
		if buf, reused = s.fromCache(size); !reused {
			buf, reused = s.fromCache(need + s.buft.Alignment())
		}
	}
	if !reused {
		if err := s.CheckBudget(size); err != nil {
			if len(s.cache) == 0 {
				return nil, err
			}
			s.dropCache() // cached buffers give way before an allocation fails
			if err := s.CheckBudget(size); err != nil {
				return nil, err
			}
		}
	}
	ctx, err := ggmlcgo.NewContext(arenaTensors<<min(len(p.arenas), 4), 0)
	if err != nil {
		if reused {
			s.cache = append(s.cache, buf)
		}
		return nil, fmt.Errorf("residency: %w", err)
	}
	if !reused {
		if buf, err = s.buft.Alloc(size); err != nil {
			ctx.Free()
			return nil, fmt.Errorf("residency: %s pool: %w", p.scope, err)
		}
	}
	a := &arena{ctx: ctx, buf: buf, ta: ggmlcgo.NewTallocr(buf)}
	p.arenas = append(p.arenas, a)
	p.bytes += buf.Size()
	return a, nil
}

func (a *arena) room() int64 { return a.buf.Size() - a.ta.Offset() }
