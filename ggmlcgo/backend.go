package ggmlcgo

// #include <stdlib.h>
// #include <stdatomic.h>
// #include "gglua_ggml.h"
//
// // The CPU backend asks its abort callback between graph nodes; the flag is
// // C memory so that ggml may keep its address.
// typedef struct { atomic_int stop; } gglua_abort_flag;
// static bool gglua_abort_cb(void * data) { return atomic_load(&((gglua_abort_flag *)data)->stop) != 0; }
// static gglua_abort_flag * gglua_abort_new(ggml_backend_t b) {
//     gglua_abort_flag * f = calloc(1, sizeof(gglua_abort_flag));
//     if (f) ggml_backend_cpu_set_abort_callback(b, gglua_abort_cb, f);
//     return f;
// }
// static void gglua_abort_set(gglua_abort_flag * f, int v) { atomic_store(&f->stop, v); }
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Backend is a ggml compute backend: the CPU, or a device of a loaded dynamic
// backend (CUDA). A Backend is used by one goroutine at a time.
type Backend struct {
	p       C.ggml_backend_t
	tp      *C.struct_ggml_threadpool
	threads int
	name    string
	cpu     bool // the CPU backend (asked of ggml once: ops ask it all the time)

	// mu orders Compute and Close against the idle timer, which runs on
	// another goroutine and pauses the threadpool.
	mu     sync.Mutex
	idle   *time.Timer
	abort  *C.gglua_abort_flag // CPU only: set to stop a compute between nodes
	using  int                 // threads the computes use now (see UseThreads)
	replay *replayer           // devices only: when a graph runs as a CUDA graph
	async  bool                // devices only: computes return once queued (async.go)
	queued bool                // work queued and not waited for
	waited time.Duration       // waiting for queued work, summed
	// launches counts the graphs computed: each is numbered (async.go's
	// Done and WaitFor).
	launches int64
	ran      launchLog // how the last launches ran (GGLUA_SLOW_COMPUTE_MS)
	upload   uploads   // writes queued on the device's stream (upload.go)
	// kernels: which of gglua's kernel sets a device's library has
	// (HasKernel), asked once.
	kernelsOnce sync.Once
	kernels     [len(kernelNodes)]bool
}

// PauseAfter is how long the CPU threadpool may spin waiting for the next
// graph before it is paused. Resuming a paused pool costs ~15 us on a 2-core
// machine, a spinning one ~1 us; pausing only when idle keeps training loops
// on the fast path without leaving a core busy after the work is done.
const PauseAfter = 2 * time.Millisecond

// NewCPU starts the CPU backend with a persistent threadpool of the given
// size (<= 0: one thread per core).
//
// Why the threadpool: ggml_backend_cpu_init defaults to 4 threads, and on a
// 2-core machine every compute then stalls for milliseconds; without a
// persistent pool, threads are created and joined on every compute. With one,
// a tiny graph costs about a microsecond. The pool's workers poll for work
// after a graph, so Compute pauses it after PauseAfter without work.
func NewCPU(threads int) (*Backend, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if threads > C.GGLUA_MAX_N_THREADS {
		return nil, fmt.Errorf("cpu backend: %d threads requested, at most %d", threads, C.GGLUA_MAX_N_THREADS)
	}
	p := C.ggml_backend_cpu_init()
	if p == nil {
		return nil, errors.New("cpu backend: initialisation failed")
	}
	b := &Backend{p: p, threads: threads, name: "CPU", cpu: true}
	if threads > 1 {
		params := C.ggml_threadpool_params_default(C.int(threads))
		params.paused = true
		b.tp = C.ggml_threadpool_new(&params)
		if b.tp == nil {
			C.ggml_backend_free(p)
			return nil, errors.New("cpu backend: could not start the threadpool")
		}
		C.ggml_backend_cpu_set_threadpool(p, b.tp)
		b.idle = time.AfterFunc(time.Hour, b.pauseIdle)
		b.idle.Stop()
	}
	C.ggml_backend_cpu_set_n_threads(p, C.int(threads))
	b.using = threads
	b.abort = C.gglua_abort_new(p)
	if asyncCPU {
		if err := b.ComputeAsDevice(); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// NewForDevice starts a backend on the named device (see Devices). The CPU
// device gets NewCPU's threadpool.
func NewForDevice(name string, threads int) (*Backend, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	dev := C.ggml_backend_dev_by_name(cs)
	if dev == nil {
		return nil, fmt.Errorf("no ggml device named %q (have %v)", name, deviceNames())
	}
	if C.ggml_backend_dev_type(dev) == C.GGML_BACKEND_DEVICE_TYPE_CPU {
		return NewCPU(threads)
	}
	p := C.ggml_backend_dev_init(dev, nil)
	if p == nil {
		return nil, fmt.Errorf("ggml device %q failed to initialise", name)
	}
	b := &Backend{p: p, name: C.GoString(C.ggml_backend_name(p))}
	r, err := newReplayer(b)
	if err != nil {
		C.ggml_backend_free(p)
		return nil, fmt.Errorf("ggml device %q: %w", name, err)
	}
	b.replay = r
	b.async = asyncDefault
	return b, nil
}

// Name is the backend's name ("CPU", "CUDA0", ...).
func (b *Backend) Name() string { return b.name }

// IsCPU reports whether this is the CPU backend.
func (b *Backend) IsCPU() bool { return b.cpu }

// Threads is the size of the CPU threadpool (0 for other backends).
func (b *Backend) Threads() int { return b.threads }

// UseThreads sets how many of the pool's threads the next computes use
// (1..Threads()); a tiny graph runs faster on one thread than it can be
// split across several.
func (b *Backend) UseThreads(n int) {
	if b.tp == nil && b.threads <= 1 || n < 1 || n > b.threads || n == b.using {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p != nil {
		C.ggml_backend_cpu_set_n_threads(b.p, C.int(n))
		b.using = n
		if n == 1 && b.tp != nil {
			C.ggml_threadpool_pause(b.tp) // its workers would only spin beside the one thread at work
		}
	}
}

// BufferType is the backend's default buffer type: where its tensors live.
func (b *Backend) BufferType() BufferType {
	return BufferType{p: C.ggml_backend_get_default_buffer_type(b.p)}
}

// PinnedBufferType is the device's pinned (page-locked) host memory, from
// which uploads run at full bus speed; ok is false for the CPU and for
// devices without one.
func (b *Backend) PinnedBufferType() (BufferType, bool) {
	if b.IsCPU() {
		return BufferType{}, false
	}
	bt := C.ggml_backend_dev_host_buffer_type(C.ggml_backend_get_device(b.p))
	return BufferType{p: bt}, bt != nil
}

// Compute is ComputeContext without a context: g runs to completion, or on
// an asynchronous device is queued (async.go).
func (b *Backend) Compute(g *Graph) error { return b.ComputeContext(context.Background(), g) }

// ComputeContext runs g; cancelling ctx stops the CPU backend between graph
// nodes (ErrAborted). Other backends finish the graph first. On a device
// with Async, it returns once g is queued (async.go).
func (b *Backend) ComputeContext(ctx context.Context, g *Graph) error {
	if err := b.checkGraph(g); err != nil {
		return err
	}
	var clock computeClock
	if slowCompute > 0 {
		clock.start = time.Now()
	}
	if b.async {
		// No other goroutine's deferred write may land between the wait
		// for this graph's inputs and its launch (async.go).
		deviceIO.Lock()
		defer deviceIO.Unlock()
		if waitsBeforeCompute(b) {
			waitDevicesLocked()
		}
	} else if waitsBeforeCompute(b) {
		WaitDevices()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return errors.New("compute: backend is closed")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var finished, watcherDone chan struct{}
	if b.abort != nil && ctx.Done() != nil {
		finished, watcherDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watcherDone)
			select {
			case <-ctx.Done():
				C.gglua_abort_set(b.abort, 1)
			case <-finished:
			}
		}()
	}
	if slowCompute > 0 {
		clock.launching(b)
	}
	status := b.graphCompute(g, true, b.async)
	if slowCompute > 0 {
		clock.done(b, g)
	}
	if finished != nil {
		close(finished)
		<-watcherDone // the watcher can no longer raise the flag
		C.gglua_abort_set(b.abort, 0)
	}
	if b.idle != nil {
		b.idle.Reset(PauseAfter)
	}
	if status == C.GGML_STATUS_ABORTED && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrAborted, ctx.Err())
	}
	return statusError("compute", status)
}

func (b *Backend) pauseIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tp != nil {
		C.ggml_threadpool_pause(b.tp)
	}
}

// Close frees the backend and its threadpool. It is safe to call twice.
func (b *Backend) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.p == nil {
		b.mu.Unlock()
		return
	}
	if b.idle != nil {
		b.idle.Stop()
	}
	b.waitLocked()
	p, r, abort, tp, upload := b.p, b.replay, b.abort, b.tp, b.upload.buf
	b.p, b.replay, b.abort, b.tp, b.upload.buf = nil, nil, nil, nil, Buffer{}
	b.mu.Unlock()
	upload.Free()
	// Freed without b's lock: freeing the lanes' memory makes the host's
	// deferred writes (async.go), under deviceIO, which is taken before a
	// backend's lock everywhere.
	r.free()
	C.ggml_backend_free(p)
	if abort != nil {
		C.free(unsafe.Pointer(abort))
	}
	if tp != nil {
		C.ggml_threadpool_free(tp)
	}
}

// DeviceInfo describes a ggml device.
type DeviceInfo struct {
	Name, Description string
	Type              string // "cpu", "gpu", "igpu" or "accel"
	FreeBytes         uint64
	TotalBytes        uint64
}

var devTypeNames = map[C.enum_ggml_backend_dev_type]string{
	C.GGML_BACKEND_DEVICE_TYPE_CPU:   "cpu",
	C.GGML_BACKEND_DEVICE_TYPE_GPU:   "gpu",
	C.GGML_BACKEND_DEVICE_TYPE_IGPU:  "igpu",
	C.GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
}

// Devices lists the devices of every registered backend.
func Devices() []DeviceInfo {
	n := int(C.ggml_backend_dev_count())
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		d := C.ggml_backend_dev_get(C.size_t(i))
		var free, total C.size_t
		C.ggml_backend_dev_memory(d, &free, &total)
		out = append(out, DeviceInfo{
			Name:        C.GoString(C.ggml_backend_dev_name(d)),
			Description: C.GoString(C.ggml_backend_dev_description(d)),
			Type:        devTypeNames[C.ggml_backend_dev_type(d)],
			FreeBytes:   uint64(free),
			TotalBytes:  uint64(total),
		})
	}
	return out
}

func deviceNames() []string {
	var names []string
	for _, d := range Devices() {
		names = append(names, d.Name)
	}
	return names
}

// LoadBackend loads a dynamic ggml backend library (libggml-cuda.so, ...) and
// registers its devices. It returns the backend's registry name.
func LoadBackend(path string) (string, error) {
	if st, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("load backend: %w", err)
	} else if st.IsDir() {
		return "", fmt.Errorf("load backend: %s is a folder", path)
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	reg := C.ggml_backend_load(cs)
	if reg == nil {
		return "", fmt.Errorf("load backend: %s is not a ggml backend library (see the ggml log)", path)
	}
	return C.GoString(C.ggml_backend_reg_name(reg)), nil
}
