package residency

import (
	"encoding/binary"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// The first ten tests port, one each, the test_that blocks of the seed
// (seed/test-ag-residency-scopes.R) and carry their names. Like the seed, they
// run on the CPU backend: residency is bookkeeping, and any backend will do.

func newState(t *testing.T) *State {
	t.Helper()
	b, err := ggmlcgo.NewCPU(1)
	require.NoError(t, err)
	s := New(b)
	t.Cleanup(func() {
		s.Close()
		b.Close()
	})
	return s
}

func zeros32x32(t *testing.T, s *State, scope Scope) *Handle {
	t.Helper()
	h, err := s.Upload(Request{Shape: []int{32, 32}, Scope: scope}, make([]byte, 32*32*4))
	require.NoError(t, err)
	return h
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestBothPoolsStartCleanAndIndependent(t *testing.T) {
	s := newState(t)
	s.Reset()
	l := s.Ledger()
	assert.Zero(t, l.NBuffers)
	assert.Zero(t, l.PNBuffers)
	assert.Zero(t, l.TotalBufferBytes)
	// Two counters, one per pool.
	assert.IsType(t, int64(0), l.PassGen)
	assert.IsType(t, int64(0), l.PersistentGen)
	assert.Empty(t, s.pools[Pass].arenas)
	assert.Empty(t, s.pools[Persistent].arenas)
}

func TestAPassResetLeavesThePersistentPoolUntouched(t *testing.T) {
	s := newState(t)
	zeros32x32(t, s, Persistent)
	zeros32x32(t, s, Pass)
	before := s.Ledger()
	assert.Positive(t, before.BufferBytes)
	assert.Positive(t, before.PBufferBytes)

	s.Reset(Pass)

	after := s.Ledger()
	// The pass pool is gone; the persistent one is byte-for-byte what it was.
	assert.Zero(t, after.BufferBytes)
	assert.Equal(t, before.PBufferBytes, after.PBufferBytes)
	assert.Positive(t, after.PNBuffers)
}

func TestAPersistentResetLeavesThePassPoolUntouched(t *testing.T) {
	s := newState(t)
	zeros32x32(t, s, Persistent)
	zeros32x32(t, s, Pass)
	before := s.Ledger()

	s.Reset(Persistent)

	after := s.Ledger()
	assert.Zero(t, after.PBufferBytes)
	assert.Equal(t, before.BufferBytes, after.BufferBytes)
}

func TestGenerationCountersAdvanceIndependently(t *testing.T) {
	s := newState(t)
	s.Reset()
	g0, p0 := s.Gen(Pass), s.Gen(Persistent)

	s.Reset(Pass)
	assert.Equal(t, g0+1, s.Gen(Pass))
	assert.Equal(t, p0, s.Gen(Persistent)) // persistent stood still

	s.Reset(Persistent)
	assert.Equal(t, g0+1, s.Gen(Pass)) // pass stood still
	assert.Equal(t, p0+1, s.Gen(Persistent))

	s.Reset() // "all" bumps both
	assert.Equal(t, g0+2, s.Gen(Pass))
	assert.Equal(t, p0+2, s.Gen(Persistent))
}

func TestABareResetStillFreesEverything(t *testing.T) {
	s := newState(t)
	zeros32x32(t, s, Persistent)
	zeros32x32(t, s, Pass)
	assert.Positive(t, s.Ledger().TotalBufferBytes)

	// The default is "all" so that every caller that wants a clean slate gets it.
	s.Reset()

	l := s.Ledger()
	assert.Zero(t, l.BufferBytes)
	assert.Zero(t, l.PBufferBytes)
	assert.Zero(t, l.TotalBufferBytes)
}

func TestAPersistentHandleSurvivesAPassResetAPassHandleDoesNot(t *testing.T) {
	s := newState(t)
	hp, err := s.Alloc(Request{Shape: []int{4, 4}, Scope: Persistent})
	require.NoError(t, err)
	ha, err := s.Alloc(Request{Shape: []int{4, 4}, Scope: Pass})
	require.NoError(t, err)
	assert.True(t, hp.Live())
	assert.True(t, ha.Live())

	s.Reset(Pass)

	// The whole point of the split: the weight is still addressable after the
	// event that happens once per training step, and the activation is not.
	assert.True(t, hp.Live())
	assert.False(t, ha.Live())

	s.Reset()
	assert.False(t, hp.Live())
}

func TestAHandleIsCheckedAgainstItsOwnPoolNotTheOtherOne(t *testing.T) {
	s := newState(t)
	// Bump the pass counter well past the persistent one. A handle checked
	// against the wrong counter would now be declared stale while its memory is
	// perfectly alive.
	for i := 0; i < 3; i++ {
		s.Reset(Pass)
	}
	hp, err := s.Alloc(Request{Shape: []int{4, 4}, Scope: Persistent})
	require.NoError(t, err)
	assert.NotEqual(t, s.Gen(Pass), s.Gen(Persistent))
	assert.True(t, hp.Live())
	_, err = hp.Tensor()
	assert.NoError(t, err)
}

func TestHandlesDefaultToThePassPool(t *testing.T) {
	s := newState(t)
	s.Reset()
	h, err := s.Alloc(Request{Shape: []int{2, 2}})
	require.NoError(t, err)
	assert.Equal(t, Pass, h.Scope())
	assert.Equal(t, s.Gen(Pass), h.Gen())
	assert.Equal(t, ggmlcgo.F32, h.Type())
}

func TestTheMemoryBudgetCountsBothPools(t *testing.T) {
	s := newState(t)
	// A resident weight occupies device memory exactly as an activation does,
	// so a budget blind to the persistent pool would let memory fill unreported.
	_, err := s.Upload(Request{Shape: []int{64, 64}, Scope: Persistent}, make([]byte, 64*64*4))
	require.NoError(t, err)
	held := s.Ledger().TotalBufferBytes
	assert.Positive(t, held)

	old, err := s.SetLimit(held / 2)
	require.NoError(t, err)
	defer s.SetLimit(old)

	assert.ErrorContains(t, s.CheckBudget(1024), "budget exceeded")
}

func TestAResidentTensorIsValidatedAgainstItsOwnPool(t *testing.T) {
	s := newState(t)
	h, err := s.Upload(Request{Shape: []int{2, 2}, Scope: Persistent}, f32bytes(1, 2, 3, 4))
	require.NoError(t, err)
	assert.Equal(t, Persistent, h.Scope())
	assert.True(t, h.Live())

	// The pass reset that runs every training step must not invalidate it.
	s.Reset(Pass)
	assert.True(t, h.Live())
	got := make([]byte, 16)
	require.NoError(t, h.Read(got))
	assert.Equal(t, f32bytes(1, 2, 3, 4), got)
}

// What the seed leaves out.

func TestAStaleHandleReadIsAnErrorNamingItsPool(t *testing.T) {
	s := newState(t)
	for _, scope := range []Scope{Pass, Persistent} {
		h, err := s.Upload(Request{Shape: []int{2}, Scope: scope}, f32bytes(5, 6))
		require.NoError(t, err)
		s.Reset(scope)
		err = h.Read(make([]byte, 8))
		require.ErrorIs(t, err, ErrStale)
		assert.ErrorContains(t, err, "reset of the "+scope.String()+" pool")
		_, err = h.Tensor()
		assert.ErrorIs(t, err, ErrStale)
		assert.ErrorIs(t, h.Write(f32bytes(1, 2)), ErrStale)
	}
}

func TestAStaleHandleFallsBackToItsHostCopy(t *testing.T) {
	s := newState(t)
	data := f32bytes(7, 8, 9)
	h, err := s.Upload(Request{Shape: []int{3}}, data)
	require.NoError(t, err)
	require.NoError(t, h.KeepHostCopy(data))
	s.Reset(Pass)
	got := make([]byte, 12)
	require.NoError(t, h.Read(got))
	assert.Equal(t, data, got)
	assert.Error(t, h.KeepHostCopy(data[:4]))
}

func TestHostDeviceTrafficIsCounted(t *testing.T) {
	s := newState(t)
	l0 := s.Ledger()
	h, err := s.Upload(Request{Shape: []int{3, 5}}, make([]byte, 60))
	require.NoError(t, err)
	assert.Equal(t, l0.H2DBytes+60, s.Ledger().H2DBytes)
	assert.Equal(t, l0.D2HBytes, s.Ledger().D2HBytes)
	require.NoError(t, h.Read(make([]byte, 60)))
	require.NoError(t, h.Read(make([]byte, 60)))
	assert.Equal(t, l0.D2HBytes+120, s.Ledger().D2HBytes)
	// A read served from the host copy moves nothing.
	require.NoError(t, h.KeepHostCopy(make([]byte, 60)))
	s.Reset(Pass)
	require.NoError(t, h.Read(make([]byte, 60)))
	assert.Equal(t, l0.D2HBytes+120, s.Ledger().D2HBytes)
}

func TestARefusedAllocationAllocatesNothing(t *testing.T) {
	s := newState(t)
	// Held: a refusal collects garbage first, and a dropped tensor's memory
	// going back would change the ledger.
	held := zeros32x32(t, s, Persistent)
	defer runtime.KeepAlive(held)
	_, err := s.SetLimit(s.Ledger().TotalBufferBytes + 4096)
	require.NoError(t, err)
	before := s.Ledger()

	_, err = s.Alloc(Request{Shape: []int{1024, 1024}, Scope: Pass})
	require.ErrorContains(t, err, "budget exceeded")
	assert.ErrorContains(t, err, "limit")
	// A bad upload is refused before anything is placed.
	_, err = s.Upload(Request{Shape: []int{4}}, make([]byte, 15))
	assert.ErrorContains(t, err, "upload of 15 bytes")
	assert.Equal(t, before, s.Ledger())

	// Within the limit an allocation still succeeds, in an arena shrunk to fit.
	_, err = s.Alloc(Request{Shape: []int{16}})
	require.NoError(t, err)
	assert.LessOrEqual(t, s.Ledger().TotalBufferBytes, s.Limit())
	_, err = s.SetLimit(-1)
	assert.Error(t, err)
}

func TestTensorsAreBatchedIntoFewBuffers(t *testing.T) {
	s := newState(t)
	for i := 0; i < 1000; i++ {
		_, err := s.Alloc(Request{Shape: []int{8, 32}, Scope: Persistent})
		require.NoError(t, err)
	}
	l := s.Ledger()
	assert.LessOrEqual(t, l.PNBuffers, int64(4), "1000 tensors of 1 KiB took %d buffers", l.PNBuffers)
	// A tensor larger than an arena gets a buffer its own size, no more.
	h, err := s.Alloc(Request{Shape: []int{2048, 2048}, Scope: Pass})
	require.NoError(t, err)
	assert.Less(t, s.Ledger().BufferBytes, h.Nbytes()+int64(MinArenaBytes))
}

func TestBadRequestsAreErrors(t *testing.T) {
	s := newState(t)
	for name, r := range map[string]Request{
		"negative": {Shape: []int{2, -3}},
		"zero":     {Shape: []int{0}},
		"no dims":  {Shape: nil},
		"5 dims":   {Shape: []int{1, 1, 1, 1, 1}},
		"huge":     {Shape: []int{1 << 30, 1 << 30, 1 << 30}},
		"scope":    {Shape: []int{2}, Scope: Scope(7)},
		"dtype":    {Shape: []int{2}, Type: ggmlcgo.Type(99)},
		"name":     {Shape: []int{2}, Name: string(make([]byte, 100))},
	} {
		_, err := s.Alloc(r)
		assert.Error(t, err, name)
	}
	assert.Zero(t, s.Ledger().TotalBufferBytes)
	_, err := ParseScope("global")
	assert.ErrorContains(t, err, `unknown scope "global"`)
	_, err = ParseResetScope("everything")
	assert.ErrorContains(t, err, "all")
	all, err := ParseResetScope("")
	require.NoError(t, err)
	assert.Equal(t, []Scope{Pass, Persistent}, all)

	s.Close()
	_, err = s.Alloc(Request{Shape: []int{2}})
	assert.ErrorContains(t, err, "closed")
}

func TestAPassResetCachesBuffersForTheNextStep(t *testing.T) {
	s := newState(t)
	zeros32x32(t, s, Pass)
	held := s.Ledger().BufferBytes
	s.Reset(Pass)
	l := s.Ledger()
	assert.Zero(t, l.BufferBytes, "the pass pool itself is empty")
	assert.Equal(t, held, l.CachedBytes, "its buffer waits in the cache")
	assert.Equal(t, l.CachedBytes+l.PBufferBytes, l.TotalBufferBytes, "and is counted as held")
	zeros32x32(t, s, Pass)
	l = s.Ledger()
	assert.Equal(t, held, l.BufferBytes)
	assert.Zero(t, l.CachedBytes, "reused, not allocated anew")

	// The budget sees the cache, and the cache gives way before a refusal.
	s.Reset(Pass)
	_, err := s.SetLimit(s.Ledger().TotalBufferBytes + 64)
	require.NoError(t, err)
	_, err = s.Alloc(Request{Shape: []int{64}, Scope: Persistent})
	require.NoError(t, err, "room made by dropping the cache")
	assert.Zero(t, s.Ledger().CachedBytes)
}
