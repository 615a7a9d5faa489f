package ggmlcgo

// #include <string.h>
// #include "gglua_replay.h"
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// Writing while the device runs. The host writes a step's inputs (a batch,
// a learning rate) while the device still runs the last step, whose graphs
// may read the same memory (a pool's memory is reused from step to step).
// Deferring the write to the next wait would make the next launch wait for
// the whole queue, and the device would idle while the host builds the
// graph after it. Instead the bytes are copied into pinned host memory and
// the copy to the device is queued on the stream behind the queued graphs
// (gglua_replay_set_async): the device makes it in order, after the graphs
// that read the old value and before any launched later. The pinned memory
// is a ring: a copy's bytes are reused once the launch it follows is done.
// A write that finds no room, or that cannot be ordered this way, is
// deferred (async.go).

const (
	uploadBytes = 16 << 20 // pinned memory a backend keeps for the writes it queues
	uploadAlign = 64
)

// uploads are a backend's writes queued on its streams and not known done:
// spans of buf, oldest first, each free once the launch it follows is done.
type uploads struct {
	buf     Buffer // pinned host memory, allocated at the first queued write
	live    []uploadSpan
	counted bool // in uploaders
}

type uploadSpan struct {
	off, end int
	after    int64 // the launch the copy follows
}

// room is where n bytes fit in the ring after its live spans, -1 if not.
func (u *uploads) room(n int) int {
	size := int(u.buf.Size())
	if len(u.live) == 0 {
		if n <= size {
			return 0
		}
		return -1
	}
	head, newest := u.live[0].off, u.live[len(u.live)-1]
	tail := (newest.end + uploadAlign - 1) / uploadAlign * uploadAlign
	if newest.off >= head { // one stretch in use: head..tail
		switch {
		case tail+n <= size:
			return tail
		case n <= head: // wrap to the start
			return 0
		}
		return -1
	}
	if tail+n <= head { // wrapped: 0..tail and head..size in use
		return tail
	}
	return -1
}

// release frees the spans whose copies are done: their launch is.
func (u *uploads) release(done int64) {
	k := 0
	for k < len(u.live) && u.live[k].after <= done {
		k++
	}
	u.live = u.live[k:]
	if len(u.live) == 0 {
		u.live = nil
	}
}

// uploaders counts the backends with queued writes: another backend's
// compute must wait for them (ComputeContext), its stream being none of
// theirs.
var uploaders atomic.Int32

// queueWriteLocked queues the write of data (nil: zeros) to t behind the
// queued graphs of the one busy backend whose memory t is in, and reports
// whether it did (deviceIO is held). Not with writes deferred (they land
// later, so a write queued now would be overwritten by an older one),
// nor with two busy backends that could hold t.
func queueWriteLocked(t Tensor, data []byte) bool {
	if deferred.n.Load() > 0 {
		return false
	}
	b := busyOwner(t)
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queueWriteLocked(t, data)
}

// busyOwner is the backend with queued work whose memory holds t, nil if
// none or more than one could.
func busyOwner(t Tensor) *Backend {
	buf := t.p.buffer
	if src := t.p.view_src; src != nil {
		buf = src.buffer
	}
	if buf == nil {
		return nil
	}
	bt := C.ggml_backend_buffer_get_type(buf)
	inFlight.Lock()
	defer inFlight.Unlock()
	var owner *Backend
	for b := range inFlight.backends {
		if C.ggml_backend_get_default_buffer_type(b.p) != bt {
			continue
		}
		if owner != nil {
			return nil
		}
		owner = b
	}
	return owner
}

// queueWriteLocked is queueWriteLocked of one backend (b.mu is held).
func (b *Backend) queueWriteLocked(t Tensor, data []byte) bool {
	n := int(t.Nbytes())
	r := b.replay
	if !b.queued || r == nil || r.state == nil || !r.writes || n > uploadBytes {
		return false
	}
	if !b.staged(&b.upload.buf, uploadBytes) {
		return false
	}
	off := b.upload.room(n)
	if off < 0 {
		return false
	}
	src := unsafe.Add(C.ggml_backend_buffer_get_base(b.upload.buf.p), off)
	if data == nil {
		C.memset(src, 0, C.size_t(n))
	} else {
		C.memcpy(src, unsafe.Pointer(&data[0]), C.size_t(n))
	}
	after := int64(C.gglua_replay_set_async(r.state, &r.lanes[0], C.int(len(r.lanes)), t.p, src, C.size_t(n)))
	if after == 0 {
		return false
	}
	b.upload.live = append(b.upload.live, uploadSpan{off, off + n, after})
	if !b.upload.counted {
		b.upload.counted = true
		uploaders.Add(1)
	}
	return true
}

// staged allocates *buf, size bytes of hostStaging, unless it is already,
// and reports whether it is.
func (b *Backend) staged(buf *Buffer, size int) bool {
	if buf.IsNil() {
		mem, ok := b.hostStaging(size)
		if !ok {
			return false
		}
		*buf = mem
	}
	return true
}

// hostStaging allocates size bytes of host memory the device copies from
// and to asynchronously: pinned memory; a CPU computing as a device (tests)
// makes its copies at once, from any memory.
func (b *Backend) hostStaging(size int) (Buffer, bool) {
	bt, ok := b.PinnedBufferType()
	if !ok && b.cpu {
		bt, ok = b.BufferType(), true
	}
	if !ok {
		return Buffer{}, false
	}
	buf, err := bt.Alloc(int64(size))
	return buf, err == nil
}

// releaseUploadsLocked frees the pinned memory of the copies following
// launches up to done, which are done (b.mu is held); math.MaxInt64: all
// of b's queued work is. Every call that moves gglua_replay_done (a
// compute, WaitFor, a full wait) is followed by one, so the ring is
// current when a write looks for room.
func (b *Backend) releaseUploadsLocked(done int64) {
	b.upload.release(done)
	if len(b.upload.live) == 0 && b.upload.counted {
		b.upload.counted = false
		uploaders.Add(-1)
	}
}

// othersUpload reports whether a backend other than b has writes queued
// on its streams, which b's compute must wait for.
func othersUpload(b *Backend) bool {
	n := uploaders.Load()
	if n == 0 {
		return false
	}
	b.mu.Lock()
	mine := b.upload.counted
	b.mu.Unlock()
	return n > 1 || !mine
}
