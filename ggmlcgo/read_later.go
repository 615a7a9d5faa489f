package ggmlcgo

// #include "gglua_replay.h"
import "C"

import "unsafe"

// Reading a result later. A value a caller keeps beyond the step that
// computed it (a gradient norm that clip_grad_norm returns, a metric) must
// reach the host before the next step reuses its memory; reading it with
// Get at once waits for the whole graph, so the host would stop building
// the next step while the device runs this one. GetLater instead queues the
// copy behind the graph, into pinned host memory, and hands the bytes over
// at the next wait for the device (a read, a free, Wait), which the next
// step makes anyway before it writes its inputs. The copy runs in the
// stream's order, so no later graph can overwrite the memory first.

const (
	laterBytes = 1 << 20  // pinned memory a backend keeps for the reads it queues
	laterMax   = 64 << 10 // a larger value is read at once (Get)
	laterAlign = 64
)

// laterRead is a copy queued by GetLater: bytes off..off+n of the
// backend's later memory, for land.
type laterRead struct {
	off, n int
	land   func([]byte)
}

// GetLater queues a copy of t's memory (t is in b's memory, written by a
// graph queued on b) to the host behind b's queued graphs, and calls land
// with the bytes (a slice of its own) once b's queued work is waited for.
// It queues nothing and reports false where Get is as good or the copy
// cannot be queued: nothing queued on b, host writes waiting to be made (t
// may be one's target), a value over laterMax, or no pinned memory left
// until the next wait. land runs with b's lock held: it must not call into
// b.
func (b *Backend) GetLater(t Tensor, land func([]byte)) bool {
	n := int(t.Nbytes())
	if n == 0 || n > laterMax || t.checkIO("tensor get", n) != nil {
		return false
	}
	deviceIO.Lock()
	defer deviceIO.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.replay
	if !b.queued || r == nil || r.state == nil || deferred.n.Load() > 0 {
		return false
	}
	if !b.staged(&b.later.buf, laterBytes) {
		return false
	}
	off := (b.later.used + laterAlign - 1) / laterAlign * laterAlign
	if int64(off+n) > b.later.buf.Size() {
		return false
	}
	dst := unsafe.Add(C.ggml_backend_buffer_get_base(b.later.buf.p), off)
	if !C.gglua_replay_get_async(r.state, &r.lanes[0], C.int(len(r.lanes)), t.p, dst, C.size_t(n)) {
		return false
	}
	b.later.used = off + n
	b.later.reads = append(b.later.reads, laterRead{off, n, land})
	return true
}

// laterReads are a backend's copies queued by GetLater and not yet landed.
type laterReads struct {
	buf   Buffer // pinned host memory, allocated at the first GetLater
	used  int
	reads []laterRead
}

// landLocked hands the queued copies their bytes: b's queued work is done
// (b.mu is held).
func (b *Backend) landLocked() {
	if len(b.later.reads) == 0 {
		return
	}
	mem := b.later.buf.Bytes()
	for _, l := range b.later.reads {
		l.land(append([]byte(nil), mem[l.off:l.off+l.n]...))
	}
	b.later.reads, b.later.used = nil, 0
}
