package residency

// Ledger is the memory and traffic report of a State.
type Ledger struct {
	BufferBytes      int64 // pass pool
	NBuffers         int64
	PBufferBytes     int64 // persistent pool
	PNBuffers        int64
	PFreeBytes       int64 // of PBufferBytes, the bytes no tensor uses (dropped tensors' memory, room left)
	CachedBytes      int64 // pass buffers kept for the next step (see State)
	ScratchBytes     int64 // what graphs compute and nothing reads after them (scratch.go)
	PeakBytes        int64 // the pass pool's high-water mark since its last reset, scratch included
	TotalBufferBytes int64 // pass + persistent + cached + scratch: all device memory held
	PassGen          int64
	PersistentGen    int64
	H2DBytes         int64 // host->device bytes since start
	D2HBytes         int64 // device->host bytes since start
	Limit            int64 // the budget, 0 = none
}

// Ledger reports both pools. The memory of persistent tensors that the
// garbage collector has found unreachable is taken back first.
func (s *State) Ledger() Ledger {
	if !s.closed {
		s.reclaim()
	}
	pass, pers := &s.pools[Pass], &s.pools[Persistent]
	return Ledger{
		BufferBytes:      pass.bytes,
		NBuffers:         int64(len(pass.arenas)),
		PBufferBytes:     pers.bytes,
		PNBuffers:        int64(len(pers.arenas)),
		PFreeBytes:       pers.bytes - pers.used,
		CachedBytes:      s.cached(),
		ScratchBytes:     s.scratch.bytes,
		PeakBytes:        s.peak,
		TotalBufferBytes: s.held(),
		PassGen:          pass.gen,
		PersistentGen:    pers.gen,
		H2DBytes:         s.h2d,
		D2HBytes:         s.d2h,
		Limit:            s.limit,
	}
}

// Map is the ledger under the names Lua's residency.stats() uses.
func (l Ledger) Map() map[string]int64 {
	return map[string]int64{
		"buffer_bytes":       l.BufferBytes,
		"n_buffers":          l.NBuffers,
		"p_buffer_bytes":     l.PBufferBytes,
		"p_n_buffers":        l.PNBuffers,
		"p_free_bytes":       l.PFreeBytes,
		"cached_bytes":       l.CachedBytes,
		"scratch_bytes":      l.ScratchBytes,
		"peak_bytes":         l.PeakBytes,
		"total_buffer_bytes": l.TotalBufferBytes,
		"pass_gen":           l.PassGen,
		"persistent_gen":     l.PersistentGen,
		"h2d_bytes":          l.H2DBytes,
		"d2h_bytes":          l.D2HBytes,
		"limit":              l.Limit,
	}
}
