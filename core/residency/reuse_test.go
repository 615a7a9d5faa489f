package residency

import (
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// Persistent tensors that nothing references any more give their memory
// back to the pool, without a reset (issue [11] #12).

const side = 64 // tensors of side x side f32: 16 KiB, 64 to the first arena

func filled(v float32) []byte {
	data := make([]float32, side*side)
	for i := range data {
		data[i] = v + float32(i)
	}
	return f32bytes(data...)
}

func upload(t *testing.T, s *State, v float32) *Handle {
	t.Helper()
	h, err := s.Upload(Request{Shape: []int{side, side}, Scope: Persistent}, filled(v))
	require.NoError(t, err)
	return h
}

// dropOne uploads a tensor and lets it go; where is where its memory lay.
func dropOne(t *testing.T, s *State, v float32) (where owned) {
	t.Helper()
	upload(t, s, v)
	p := &s.pools[Persistent]
	return p.owned[len(p.owned)-1]
}

func readAll(t *testing.T, h *Handle) []byte {
	t.Helper()
	got := make([]byte, h.Nbytes())
	require.NoError(t, h.Read(got))
	return got
}

func TestDroppedPersistentTensorsAreReused(t *testing.T) {
	for _, collect := range []bool{true, false} {
		// Without collections of its own, the pool forces one before it grows.
		name := map[bool]string{true: "collected", false: "forced"}[collect]
		t.Run(name, func(t *testing.T) {
			s := newState(t)
			var kept []*Handle
			for i := 0; i < 400; i++ {
				if i%100 == 7 { // a few kept among the dropped, with values of their own
					kept = append(kept, upload(t, s, float32(10000*(len(kept)+1))))
				}
				dropOne(t, s, float32(i))
				if collect && i%10 == 0 {
					runtime.GC()
				}
			}
			l := s.Ledger()
			// 400 x 16 KiB went through; the first arena held them all.
			assert.Equal(t, MinArenaBytes, l.PBufferBytes)
			assert.Equal(t, int64(1), l.PNBuffers)
			for j, h := range kept {
				assert.Equal(t, filled(float32(10000*(j+1))), readAll(t, h), "kept tensor %d", j)
			}
		})
	}
}

func TestARegionGoesToTheNextTensorAndKeepsItsNeighbours(t *testing.T) {
	s := newState(t)
	before := upload(t, s, 1)
	where := dropOne(t, s, 2)
	after := upload(t, s, 3)
	runtime.GC()
	l := s.Ledger()
	assert.Equal(t, l.PBufferBytes-2*side*side*4, l.PFreeBytes+where.a.buf.FirstOffset(), "two tensors held, one given back")

	h := upload(t, s, 4) // lands where the dropped one was
	p := &s.pools[Persistent]
	got := p.owned[len(p.owned)-1]
	assert.Equal(t, where.a, got.a)
	assert.Equal(t, where.off, got.off)
	assert.Equal(t, l.PFreeBytes-where.size, s.Ledger().PFreeBytes)
	assert.Equal(t, l.PBufferBytes, s.Ledger().PBufferBytes)
	// Its neighbours on either side are intact, and it holds its own values.
	assert.Equal(t, filled(1), readAll(t, before))
	assert.Equal(t, filled(3), readAll(t, after))
	assert.Equal(t, filled(4), readAll(t, h))
}

func TestFreeRegionsMergeWithTheirNeighbours(t *testing.T) {
	a := &arena{free: []span{{0, 1000}}}
	var offs []int64
	for i := 0; i < 10; i++ {
		off, ok := a.take(100)
		require.True(t, ok)
		offs = append(offs, off)
	}
	_, ok := a.take(1)
	require.False(t, ok, "full")
	for _, i := range []int{3, 1, 2, 7, 9, 8, 0} { // before, after, between, at the end
		a.give(offs[i], 100)
	}
	assert.Equal(t, []span{{0, 400}, {700, 300}}, a.free)
	off, ok := a.take(300)
	require.True(t, ok)
	assert.Equal(t, int64(0), off, "first fit")
	_, ok = a.take(400)
	assert.False(t, ok, "no region of 400 bytes left")
	for _, i := range []int{4, 5, 6} {
		a.give(offs[i], 100)
	}
	a.give(0, 300)
	assert.Equal(t, []span{{0, 1000}}, a.free)
}

func TestATensorInAGraphNotYetComputedKeepsItsMemory(t *testing.T) {
	s := newState(t)
	h := upload(t, s, 1)
	_, err := h.Tensor() // as an op building a graph takes it
	require.NoError(t, err)
	free := s.Ledger().PFreeBytes
	h = nil
	runtime.GC()
	assert.Equal(t, free, s.Ledger().PFreeBytes, "a pending graph may still read it")
	s.Computed()
	runtime.GC()
	assert.Equal(t, free+side*side*4, s.Ledger().PFreeBytes, "the graph ran: it goes back")

	// A pass reset drops the graphs too.
	h = upload(t, s, 2)
	_, err = h.Tensor()
	require.NoError(t, err)
	h = nil
	runtime.GC()
	assert.Equal(t, free, s.Ledger().PFreeBytes)
	s.Reset(Pass)
	runtime.GC()
	assert.Equal(t, free+side*side*4, s.Ledger().PFreeBytes)
}

func TestAnAliasKeepsItsParentsMemory(t *testing.T) {
	s := newState(t)
	h := upload(t, s, 5)
	tensor, err := h.Tensor()
	require.NoError(t, err)
	s.Computed()
	alias := h.Alias(tensor, []int{side * side})
	free := s.Ledger().PFreeBytes
	h = nil
	runtime.GC()
	assert.Equal(t, free, s.Ledger().PFreeBytes, "the alias still reads it")
	assert.Equal(t, filled(5), readAll(t, alias))
	alias = nil
	runtime.GC()
	assert.Equal(t, free+side*side*4, s.Ledger().PFreeBytes)
}

func TestEmptiedArenasAreFreedButTheNewest(t *testing.T) {
	s := newState(t)
	var hs []*Handle
	for i := 0; i < 300; i++ { // 4.7 MiB: arenas of 1, 2 and 4 MiB
		hs = append(hs, upload(t, s, float32(i)))
	}
	require.Equal(t, int64(3), s.Ledger().PNBuffers)
	last := s.pools[Persistent].arenas[2].buf.Size()
	hs = hs[:0]
	runtime.GC()
	l := s.Ledger()
	assert.Equal(t, int64(1), l.PNBuffers)
	assert.Equal(t, last, l.PBufferBytes)
	assert.Equal(t, l.PBufferBytes, l.PFreeBytes+s.pools[Persistent].arenas[0].buf.FirstOffset())
	assert.Equal(t, l.PBufferBytes, l.TotalBufferBytes)
	// The kept arena takes new tensors.
	h := upload(t, s, 7)
	assert.Equal(t, last, s.Ledger().PBufferBytes)
	assert.Equal(t, filled(7), readAll(t, h))
}

func TestTensorDescriptionsAreFreedAfterAPassReset(t *testing.T) {
	s := newState(t)
	for round := 0; round < 10; round++ {
		for i := 0; i < 1000; i++ {
			dropOne(t, s, float32(i))
		}
		runtime.GC()
		s.Reset(Pass) // the graphs that might point at them are gone
	}
	s.Ledger()
	p := &s.pools[Persistent]
	assert.LessOrEqual(t, len(p.metas), 3, "10000 tensors went through")
	assert.Empty(t, p.owned)
	assert.Equal(t, MinArenaBytes, p.bytes)
}

func TestFreedMemoryIsReusedWithinTheBudget(t *testing.T) {
	s := newState(t)
	var hs []*Handle
	for i := 0; i < 64; i++ {
		hs = append(hs, upload(t, s, float32(i)))
	}
	_, err := s.SetLimit(s.Ledger().TotalBufferBytes)
	require.NoError(t, err)
	if s.Ledger().PFreeBytes < side*side*4 {
		_, err = s.Alloc(Request{Shape: []int{side, side}, Scope: Persistent})
		require.ErrorIs(t, err, ErrBudget, "the arena is full and the budget allows no other")
	}
	hs[10], hs[20] = nil, nil // dropped: no collection here, the pool runs one
	a := upload(t, s, 100)
	b := upload(t, s, 200)
	assert.Equal(t, s.Limit(), s.Ledger().TotalBufferBytes)
	assert.Equal(t, filled(100), readAll(t, a))
	assert.Equal(t, filled(200), readAll(t, b))
	for i, h := range hs {
		if h != nil {
			assert.Equal(t, filled(float32(i)), readAll(t, h), "tensor %d", i)
		}
	}
}

func TestTheLedgerReportsFreePersistentBytes(t *testing.T) {
	s := newState(t)
	l := s.Ledger()
	assert.Zero(t, l.PFreeBytes)
	h := upload(t, s, 1)
	l = s.Ledger()
	first := s.pools[Persistent].arenas[0].buf.FirstOffset()
	assert.Equal(t, l.PBufferBytes-first-side*side*4, l.PFreeBytes)
	assert.Equal(t, l.PFreeBytes, l.Map()["p_free_bytes"])
	runtime.KeepAlive(h)
	h = nil
	runtime.GC()
	assert.Equal(t, l.PBufferBytes-first, s.Ledger().Map()["p_free_bytes"])
	s.Reset(Persistent)
	assert.Zero(t, s.Ledger().PFreeBytes)
}

// A tensor too large for the next arena gets a buffer of its own size, and
// the arena after it doubles the last regular one, not that buffer: a small
// value placed after a large weight costs a small arena.
func TestALargeTensorsBufferDoesNotSizeTheNextArena(t *testing.T) {
	s := newState(t)
	var kept []*Handle // each stays its memory's owner
	alloc := func(n int) {
		h, err := s.Alloc(Request{Shape: []int{n}, Scope: Persistent})
		require.NoError(t, err)
		kept = append(kept, h)
	}
	alloc(4 << 20) // 16 MiB: its own buffer
	big := s.Ledger().PBufferBytes
	require.Greater(t, big, 16*MinArenaBytes)
	alloc(1024)
	assert.Equal(t, big+MinArenaBytes, s.Ledger().PBufferBytes, "the next arena is the first regular one")
	alloc(int(MinArenaBytes * 3 / 16)) // 3/4 of an arena in bytes: fits
	alloc(int(MinArenaBytes * 3 / 16)) // does not
	assert.Equal(t, big+3*MinArenaBytes, s.Ledger().PBufferBytes, "then it doubles")
	assert.Len(t, kept, 4)
}

// Tensors allocated Alone (a step's promoted values) each describe
// themselves in a context of their own: dropped, they leave no context
// behind, one that lives on pins no other's, and a collection while one is
// being placed does not take its description.
func TestAloneTensorsLeaveNoContextsBehind(t *testing.T) {
	s := newState(t)
	s.Reset(Pass) // a pass generation past the contexts' start: idle ones may go
	long, err := s.Alloc(Request{Shape: []int{1}, Scope: Persistent, Alone: true})
	require.NoError(t, err)
	require.NoError(t, long.Write(make([]byte, 4)))
	const n = 64 << 10 // 256 KiB: a few fill an arena, so placing one reclaims
	raw := make([]byte, 4*n)
	for i := 0; i < 200; i++ {
		h, err := s.Alloc(Request{Shape: []int{n}, Scope: Persistent, Alone: true})
		require.NoError(t, err)
		raw[0], raw[4*n-1] = byte(i), byte(i+1)
		require.NoError(t, h.Write(raw))
		got := make([]byte, 4*n)
		require.NoError(t, h.Read(got))
		require.Equal(t, raw[4*n-1], got[4*n-1], "allocation %d", i)
		for _, o := range s.pools[Persistent].owned { // no live tensor lost its description
			require.True(t, o.m == nil || slices.Contains(s.pools[Persistent].metas, o.m), "allocation %d", i)
		}
		if i%50 == 0 {
			runtime.GC()
		}
	}
	runtime.GC()
	s.Reset(Pass)
	s.Ledger() // reclaims
	assert.Less(t, len(s.pools[Persistent].metas), 5, "the dropped tensors' contexts are freed")
	assert.True(t, long.Live())
}

// A pass reset keeps the pool's buffers in the cache, and the next pass,
// allocating the same sizes, gets the same addresses back, also when some
// tensors are larger than an arena (buffers of their own): a device
// replays a step's graph only if its addresses repeat. The first pass
// needed several arenas, doubling, with room left in each: the second
// gets one buffer of what the first used, and every pass after it the
// same addresses as the second.
func TestEveryPassGetsTheSameAddresses(t *testing.T) {
	s := newState(t)
	sizes := []int{1 << 10, 3 << 18, 1 << 10, 5 << 18, 1 << 16, 9 << 18, 1 << 10}
	pass := func() []uintptr {
		var at []uintptr
		for _, n := range sizes {
			h, err := s.Alloc(Request{Shape: []int{n}})
			require.NoError(t, err)
			tt, err := h.Tensor()
			require.NoError(t, err)
			at = append(at, uintptr(tt.Data()))
		}
		return at
	}
	pass()
	first := s.pools[Pass]
	require.Greater(t, len(first.arenas), 2)
	s.Reset(Pass)
	second := pass()
	p := s.pools[Pass]
	assert.Len(t, p.arenas, 1, "one buffer")
	assert.Less(t, p.bytes, first.bytes, "no arena's spare room (first pass: %d bytes for %d used)", first.bytes, first.used)
	assert.LessOrEqual(t, p.bytes, first.used+first.used/32)
	for i := 0; i < 3; i++ {
		s.Reset(Pass)
		assert.Equal(t, second, pass(), "pass %d", i+3)
	}
}

// A pass that needs less than the most of the last eight keeps the one
// buffer, and one that needs more grows as it must, then the next pass
// gets one buffer of its size: a loop of larger and smaller passes (a
// training step, then an evaluation) frees and allocates nothing once it
// has seen its largest. Eight smaller passes later, the buffer shrinks to
// theirs.
func TestPassesOfOtherSizesKeepTheBuffer(t *testing.T) {
	s := newState(t)
	pass := func(n int) {
		for range n {
			_, err := s.Alloc(Request{Shape: []int{3 << 18}})
			require.NoError(t, err)
		}
		s.Reset(Pass)
	}
	pass(8) // arenas 1, 2, 4, 8 MiB
	pass(8) // one buffer of ~24 MiB
	buf := s.cache[0]
	require.Len(t, s.cache, 1)
	pass(2)
	pass(8)
	require.Len(t, s.cache, 1)
	assert.Equal(t, buf, s.cache[0], "the same buffer, kept")
	pass(12) // more than ever: a new arena
	pass(12) // then one buffer of its size
	require.Len(t, s.cache, 1)
	big := s.cache[0]
	assert.GreaterOrEqual(t, big.Size(), int64(12*(3<<20)))
	pass(8)
	pass(12)
	assert.Equal(t, []ggmlcgo.Buffer{big}, s.cache)
	for range 8 {
		pass(2)
	}
	require.Len(t, s.cache, 1)
	assert.Less(t, s.cache[0].Size(), int64(3*(3<<20)), "the buffer follows the last eight passes")
}
