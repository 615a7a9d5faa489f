package ggmlcgo

// #include "gglua_replay.h"
import "C"

import (
	"errors"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A device backend's compute returns once its kernels are queued, so that
// the host builds the next graph (a step's backward, while its forward
// runs) instead of waiting. The device's work is then waited for where the
// host would otherwise race it:
//
//   - before the host reads device memory (Tensor.Get, Data for the
//     collectives) or frees memory (Buffer.Free, Context.Free of the
//     tensors' descriptions): WaitDevices; a read of one graph's result
//     waits for that graph only (WaitFor, then Tensor.GetNow);
//   - a graph bound for another lane of the same device (its own stream)
//     is ordered after the work queued on the others by the device, with
//     events (graph_replay.c), so the host does not wait there.
//
// The host's writes (Tensor.Set, Zero) meanwhile are queued on the stream
// behind the queued graphs, from pinned memory (upload.go), so that
// uploading the numbers of the next graph (an optimizer's learning rate, a
// batch) stalls neither the host nor the device: the memory written may
// still be read by a queued graph (a pool's memory is reused from step to
// step). A write that cannot be queued so is deferred: copied, and made
// after the wait that comes before any compute or read (WaitDevices makes
// them).
//
// Graphs on one lane are ordered by its stream. GGLUA_ASYNC=0 makes every
// compute wait for its graph, as the CPU backend's always does. The waits
// are the process's: with several runtimes at once, one's read waits for
// the others' queued graphs too (correct, not the fastest).

// inFlight is the set of device backends with queued work not waited for.
var inFlight struct {
	sync.Mutex
	n        atomic.Int32 // len(backends), read without the lock
	backends map[*Backend]struct{}
}

// asyncDefault is whether device computes return before their graph is
// done. GGLUA_ASYNC=1 sets Async on the CPU backend too, whose computes are
// done when they return: callers then arrange their work as for a device
// (core's step), which tests use.
var asyncDefault, asyncCPU = os.Getenv("GGLUA_ASYNC") != "0", os.Getenv("GGLUA_ASYNC") == "1"

// deviceIO orders the host's device work across goroutines (several
// runtimes may run at once, each on its own backends): a device launch, a
// wait with the landing of the deferred writes, and a deferral each hold
// it, so that no write lands between another goroutine's wait and its
// launch, or while a graph launched after the wait still reads the memory.
// It is taken before any backend's lock.
var deviceIO sync.Mutex

// deferred are the host's writes made while devices had queued work, in
// the order made (deviceIO guards them).
var deferred struct {
	n      atomic.Int32 // len(writes), read without the lock
	writes []deferredWrite
}

type deferredWrite struct {
	t    Tensor
	data []byte // nil: zero the tensor
}

// WaitDevices waits for every device backend's queued work, then makes the
// host's deferred writes.
func WaitDevices() {
	if inFlight.n.Load() == 0 && deferred.n.Load() == 0 {
		return
	}
	deviceIO.Lock()
	defer deviceIO.Unlock()
	waitDevicesLocked()
}

func waitDevicesLocked() {
	inFlight.Lock()
	list := make([]*Backend, 0, len(inFlight.backends))
	for b := range inFlight.backends {
		list = append(list, b)
	}
	inFlight.Unlock()
	for _, b := range list {
		b.Wait()
	}
	for _, w := range deferred.writes {
		w.t.write(w.data)
	}
	deferred.writes = nil
	deferred.n.Store(0)
}

// writeLater queues a write of data (nil: zeros) to t when devices have
// queued work, and reports whether it did: on the device's stream
// (upload.go), else deferred to the next wait. data is copied.
func writeLater(t Tensor, data []byte) bool {
	if inFlight.n.Load() == 0 {
		return false
	}
	deviceIO.Lock()
	defer deviceIO.Unlock()
	if inFlight.n.Load() == 0 { // waited for meanwhile
		return false
	}
	if queueWriteLocked(t, data) {
		return true
	}
	if data != nil {
		data = append([]byte(nil), data...)
	}
	deferred.writes = append(deferred.writes, deferredWrite{t, data})
	deferred.n.Store(int32(len(deferred.writes)))
	return true
}

// waitForWrites makes the deferred writes (after the wait they need)
// before a compute reads memory they write.
func waitForWrites() {
	if deferred.n.Load() > 0 {
		WaitDevices()
	}
}

// waitsBeforeCompute reports whether b's next compute must first wait for
// the devices: writes its graph may read are deferred, or queued on
// another backend's streams, which b's are not ordered with.
func waitsBeforeCompute(b *Backend) bool {
	return deferred.n.Load() > 0 || othersUpload(b)
}

// Wait waits for the backend's queued work (none on the CPU).
func (b *Backend) Wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waitLocked()
}

func (b *Backend) waitLocked() {
	if !b.queued {
		return
	}
	if r := b.replay; r != nil && r.state != nil {
		b.blockOn(b.launches, func() { C.gglua_replay_wait(r.state, &r.lanes[0], C.int(len(r.lanes))) })
	}
	b.setQueued(false)
}

// setQueued records whether b has queued work, in b and in inFlight (b.mu
// is held).
func (b *Backend) setQueued(on bool) {
	if b.queued == on {
		return
	}
	b.queued = on
	if !on {
		b.releaseUploadsLocked(math.MaxInt64) // the queued writes are done
	}
	inFlight.Lock()
	defer inFlight.Unlock()
	if on {
		if inFlight.backends == nil {
			inFlight.backends = map[*Backend]struct{}{}
		}
		inFlight.backends[b] = struct{}{}
	} else {
		delete(inFlight.backends, b)
	}
	inFlight.n.Store(int32(len(inFlight.backends)))
}

// Async reports whether the backend's computes return before their graph
// is done (a device, unless GGLUA_ASYNC=0).
func (b *Backend) Async() bool { return b.async }

// ComputeAsDevice makes a CPU backend run its graphs as an asynchronous
// device does: on lanes (more CPU backends), each compute leaving its lane
// busy until waited for, the host's writes meanwhile queued behind the
// busy lanes (made at once: the CPU has no streams) or deferred. Its
// computes are still done when they return, so values cannot race; what
// tests (and GGLUA_ASYNC=1) check with it is the bookkeeping, and that
// callers arrange their work as for a device.
func (b *Backend) ComputeAsDevice() error {
	if b.cpu && b.async && b.replay != nil {
		return nil // already (GGLUA_ASYNC=1)
	}
	if !b.cpu || b.replay != nil {
		return errors.New("compute as a device: only a CPU backend without lanes")
	}
	r, err := newReplayer(b)
	if err != nil {
		return err
	}
	for _, lane := range r.lanes[1:] {
		C.ggml_backend_cpu_set_n_threads(lane, 1) // not four threads spinning on small graphs
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replay, b.async = r, true
	return nil
}

// Launches is how many graphs the backend has computed (or queued): the
// number of the last one.
func (b *Backend) Launches() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.launches
}

// Done reports whether the graph numbered launch (see Launches; 0: none)
// has finished. The lanes run the graphs in the order they were launched
// (graph_replay.c), so it has once a graph launched no earlier has.
func (b *Backend) Done(launch int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.queued || launch <= int64(C.gglua_replay_done(b.replay.state))
}

// WaitFor waits until the graph numbered launch has finished, and the
// graphs launched before it: a read of its result (GetNow) while the
// device runs the next step. It waits for a lane's whole queue, so for
// any graph launched on that lane since too, but not for the other lanes.
func (b *Backend) WaitFor(launch int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.replay
	if !b.queued || launch <= int64(C.gglua_replay_done(r.state)) {
		return
	}
	b.blockOn(launch, func() { C.gglua_replay_wait_for(r.state, &r.lanes[0], C.int(len(r.lanes)), C.int64_t(launch)) })
	b.setQueued(r.busyLanes() != 0)
	b.releaseUploadsLocked(int64(C.gglua_replay_done(r.state)))
}

// blockOn runs wait, a wait for b's graphs up to launch upTo: the host is
// marked blocked meanwhile (DeviceBlockedFor), the time is added to b's
// WaitTime, and a slow wait is reported (b.mu is held, b has a replayer).
func (b *Backend) blockOn(upTo int64, wait func()) {
	var done int64
	if slowCompute > 0 {
		done = int64(C.gglua_replay_done(b.replay.state))
	}
	started := time.Now()
	end := blocked()
	wait()
	end()
	if slowCompute > 0 {
		b.reportSlowWait(started, done, upTo)
	}
	b.waited += time.Since(started)
}

// blockedSince is when the host began to wait for a device's work (unix
// nanoseconds; 0: not waiting).
var blockedSince atomic.Int64

// blocked marks the host waiting for a device until the function it
// returns is called (nested waits keep the first start).
func blocked() func() {
	if !blockedSince.CompareAndSwap(0, time.Now().UnixNano()) {
		return func() {}
	}
	return func() { blockedSince.Store(0) }
}

// DeviceBlockedFor is how long the host has been waiting for a device's
// work to finish, 0 when it is not waiting: what a watchdog reads for
// collectives that run inside graphs (package dist's NCCL watchdog), whose
// stuck peer would otherwise keep the host waiting for ever.
func DeviceBlockedFor() time.Duration {
	since := blockedSince.Load()
	if since == 0 {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - since)
}

// WaitTime is the wall time spent waiting for the backend's queued work.
func (b *Backend) WaitTime() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waited
}
