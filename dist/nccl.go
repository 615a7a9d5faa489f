package dist

/*
#cgo CFLAGS: -I${SRCDIR}/../ggmlcgo
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gglua_collective.h"
#if GGLUA_COLLECTIVE_LAYOUT != 2
#error "ggmlcgo/gglua_collective.h changed: update what dist fills, then GGLUA_COLLECTIVE_LAYOUT here"
#endif

// NCCL's types as its ABI has them: enums are ints, a communicator is a
// pointer, the unique id 128 bytes passed by value. ncclFloat32 is 7,
// ncclSum/ncclMax/ncclMin/ncclAvg are 0/2/3/4, ncclInProgress is 7.
typedef struct { char internal[128]; } gglua_nccl_id;
typedef void *gglua_nccl_comm;

typedef struct {
	void *lib;
	int (*GetUniqueId)(gglua_nccl_id *);
	int (*CommInitRank)(gglua_nccl_comm *, int, gglua_nccl_id, int);
	int (*AllReduce)(const void *, void *, size_t, int, int, gglua_nccl_comm, void *);
	int (*Broadcast)(const void *, void *, size_t, int, int, gglua_nccl_comm, void *);
	int (*AllGather)(const void *, void *, size_t, int, gglua_nccl_comm, void *);
	int (*CommAbort)(gglua_nccl_comm);
	int (*CommDestroy)(gglua_nccl_comm);
	int (*CommGetAsyncError)(gglua_nccl_comm, int *);
	const char *(*GetErrorString)(int);
	// The CUDA runtime: the one libggml-cuda.so loaded, else libcudart.so.
	int (*SetDevice)(int);
	int (*StreamQuery)(void *);
	int (*Malloc)(void **, size_t);
	const char *(*CudaErrorString)(int);
} gglua_nccl_t;

static gglua_nccl_t N;

static void *gglua_cudart(void) {
	if (dlsym(RTLD_DEFAULT, "cudaStreamQuery")) return RTLD_DEFAULT;
	const char *names[] = {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"};
	for (int i = 0; i < 4; i++) { // already loaded by libggml-cuda.so first
		void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
		if (h) return h;
	}
	for (int i = 0; i < 4; i++) {
		void *h = dlopen(names[i], RTLD_NOW);
		if (h) return h;
	}
	return NULL;
}

// gglua_nccl_load opens path and the CUDA runtime; NULL, or what went
// wrong (the caller frees it).
static char *gglua_nccl_load(const char *path) {
	char *out = malloc(1024);
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(out, 1024, "%s", e ? e : "dlopen failed");
		return out;
	}
	void *rt = gglua_cudart();
	if (!rt) {
		snprintf(out, 1024, "the CUDA runtime (libcudart.so) is not loaded and not found");
		dlclose(lib);
		return out;
	}
	gglua_nccl_t n = {0};
	n.lib = lib;
	const char *name = NULL;
#define SYM(h, field, s) if (!(*(void **)&n.field = dlsym(h, name = s))) goto missing;
	SYM(lib, GetUniqueId, "ncclGetUniqueId")
	SYM(lib, CommInitRank, "ncclCommInitRank")
	SYM(lib, AllReduce, "ncclAllReduce")
	SYM(lib, Broadcast, "ncclBroadcast")
	SYM(lib, AllGather, "ncclAllGather")
	SYM(lib, CommAbort, "ncclCommAbort")
	SYM(lib, CommDestroy, "ncclCommDestroy")
	SYM(lib, CommGetAsyncError, "ncclCommGetAsyncError")
	SYM(lib, GetErrorString, "ncclGetErrorString")
	SYM(rt, SetDevice, "cudaSetDevice")
	SYM(rt, StreamQuery, "cudaStreamQuery")
	SYM(rt, Malloc, "cudaMalloc")
	SYM(rt, CudaErrorString, "cudaGetErrorString")
#undef SYM
	N = n;
	free(out);
	return NULL;
missing:
	snprintf(out, 1024, "%s: no symbol %s", path, name);
	dlclose(lib);
	return out;
}

static int gglua_nccl_unique_id(gglua_nccl_id *id) { return N.GetUniqueId(id); }

// The result of a call: which library failed, with its code.
enum { GGLUA_OK, GGLUA_CUDA_ERR, GGLUA_NCCL_ERR, GGLUA_ASYNC_ERR, GGLUA_TIMEOUT };

static int gglua_nccl_init(gglua_nccl_comm *comm, int world, gglua_nccl_id id, int rank, int device, void **scratch, int *code) {
	if ((*code = N.SetDevice(device))) return GGLUA_CUDA_ERR;
	if ((*code = N.Malloc(scratch, 4))) return GGLUA_CUDA_ERR; // barrier's one float
	if ((*code = N.CommInitRank(comm, world, id, rank))) return GGLUA_NCCL_ERR;
	return GGLUA_OK;
}

static double gglua_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

// gglua_nccl_wait waits for the default stream (where the collective was
// queued) by polling rather than cudaStreamSynchronize, which would wait
// forever for a peer that died: between polls it asks NCCL for an
// asynchronous error (a lost peer) and gives up after timeout seconds.
static int gglua_nccl_wait(gglua_nccl_comm comm, double timeout, int *code) {
	double end = gglua_now() + timeout;
	struct timespec pause = {0, 20000}; // 20 us
	for (;;) {
		int rc = N.StreamQuery(NULL);
		if (rc == 0) return GGLUA_OK;
		if (rc != 600) { *code = rc; return GGLUA_CUDA_ERR; } // 600: cudaErrorNotReady
		int async = 0;
		if ((*code = N.CommGetAsyncError(comm, &async))) return GGLUA_NCCL_ERR;
		if (async != 0 && async != 7) { *code = async; return GGLUA_ASYNC_ERR; }
		if (gglua_now() > end) return GGLUA_TIMEOUT;
		nanosleep(&pause, NULL);
	}
}

// op: 0 all-reduce (arg: the reduction), 1 broadcast (arg: the root),
// 2 all-gather. Each runs on the calling thread's device, on the default
// stream, after the ggml backend synchronized its own streams.
static int gglua_nccl_run(gglua_nccl_comm comm, int device, int op, const void *send, void *recv, size_t count, int arg, double timeout, int *code) {
	if ((*code = N.SetDevice(device))) return GGLUA_CUDA_ERR;
	switch (op) {
	case 0: *code = N.AllReduce(send, recv, count, 7, arg, comm, NULL); break;
	case 1: *code = N.Broadcast(send, recv, count, 7, arg, comm, NULL); break;
	default: *code = N.AllGather(send, recv, count, 7, comm, NULL); break;
	}
	if (*code) return GGLUA_NCCL_ERR;
	return gglua_nccl_wait(comm, timeout, code);
}

// gglua_nccl_collective is comm's gglua_collective: ncclAllReduce, which
// gglua-kernels.cu queues from inside a graph compute.
static gglua_collective *gglua_nccl_collective(gglua_nccl_comm comm, int world) {
	gglua_collective *c = calloc(1, sizeof *c);
	if (c) {
		c->device_all_reduce = N.AllReduce;
		c->comm = comm;
		c->world = world;
	}
	return c;
}

// gglua_nccl_async_error is NCCL's asynchronous error on comm (0: none;
// ncclInProgress counts as none), or the call's own failure.
static int gglua_nccl_async_error(gglua_nccl_comm comm) {
	int async = 0;
	int rc = N.CommGetAsyncError(comm, &async);
	if (rc) return rc;
	return async == 7 ? 0 : async;
}

static int gglua_nccl_end(gglua_nccl_comm comm, int abort) { return abort ? N.CommAbort(comm) : N.CommDestroy(comm); }
static const char *gglua_nccl_error(int code) { return N.GetErrorString(code); }
static const char *gglua_cuda_error(int code) { return N.CudaErrorString(code); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"
)

// NCCLHint says how to get NCCL; every "not found" error ends with it.
const NCCLHint = "CUDA tensors need NCCL: on Debian or Ubuntu with NVIDIA's repository `apt-get install libnccl2`, or `pip install nvidia-nccl-cu12` and set GGLUA_NCCL_PATH to its nvidia/nccl/lib/libnccl.so.2"

var ncclLoad struct {
	sync.Mutex
	err  error
	done bool
}

// loadNCCL opens GGLUA_NCCL_PATH, else libnccl.so.2 on the loader's path,
// once per process.
func loadNCCL() error {
	ncclLoad.Lock()
	defer ncclLoad.Unlock()
	if ncclLoad.done {
		return ncclLoad.err
	}
	path, from := "libnccl.so.2", "libnccl.so.2 on the library search path"
	if p := os.Getenv("GGLUA_NCCL_PATH"); p != "" {
		path, from = p, "GGLUA_NCCL_PATH="+p
	}
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	if msg := C.gglua_nccl_load(cp); msg != nil {
		why := C.GoString(msg)
		C.free(unsafe.Pointer(msg))
		return fmt.Errorf("NCCL library not found or unusable (%s: %s). %s", from, why, NCCLHint)
	}
	ncclLoad.done = true
	return nil
}

// ncclComm is one NCCL communicator on one GPU.
type ncclComm struct {
	comm       C.gglua_nccl_comm
	rank, size int
	device     C.int
	scratch    unsafe.Pointer // one device float, for Barrier
	timeout    C.double
	mu         sync.Mutex // closed, against the watchdog
	closed     bool
	coll       *C.gglua_collective // the in-graph sums' (GraphCollective), made once
}

// OpenNCCL loads NCCL, meets the other processes at MASTER_ADDR:MASTER_PORT
// (rank 0 hands out the unique id) and starts a communicator on CUDA
// device (an index among the visible devices). timeout bounds the
// rendezvous and every collective.
func OpenNCCL(p Place, device int, timeout time.Duration) (Comm, error) {
	if err := loadNCCL(); err != nil {
		return nil, err
	}
	var id C.gglua_nccl_id
	if p.Rank == 0 {
		if rc := C.gglua_nccl_unique_id(&id); rc != 0 {
			return nil, ncclError("ncclGetUniqueId", C.GGLUA_NCCL_ERR, rc)
		}
	}
	if p.World > 1 { // a job of one has no one to meet
		addr, err := p.Rendezvous()
		if err != nil {
			return nil, err
		}
		secret, err := SecretFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&id)), len(id.internal))
		got, err := Rendezvous(addr, p.Rank, p.World, raw, secret, timeout)
		if err != nil {
			return nil, err
		}
		if len(got) != len(raw) {
			return nil, fmt.Errorf("rendezvous: rank 0 sent %d bytes, an NCCL id has %d", len(got), len(raw))
		}
		copy(raw, got)
	}
	c := &ncclComm{rank: p.Rank, size: p.World, device: C.int(device), timeout: C.double(timeout.Seconds())}
	var code C.int
	if r := C.gglua_nccl_init(&c.comm, C.int(p.World), id, C.int(p.Rank), c.device, &c.scratch, &code); r != C.GGLUA_OK {
		return nil, ncclError("ncclCommInitRank", r, code)
	}
	return c, nil
}

func ncclError(call string, kind, code C.int) error {
	switch kind {
	case C.GGLUA_CUDA_ERR:
		return fmt.Errorf("%s: CUDA error %d: %s", call, int(code), C.GoString(C.gglua_cuda_error(code)))
	case C.GGLUA_ASYNC_ERR:
		return fmt.Errorf("%s: NCCL reported an asynchronous error (did another process fail?): %s", call, C.GoString(C.gglua_nccl_error(code)))
	case C.GGLUA_TIMEOUT:
		return fmt.Errorf("%s: no result within the timeout (GGLUA_DIST_TIMEOUT); another process may have stopped", call)
	}
	return fmt.Errorf("%s: NCCL error %d: %s", call, int(code), C.GoString(C.gglua_nccl_error(code)))
}

// GraphCollective is ncclAllReduce as gglua-kernels.cu's graph nodes queue
// it, on a stream of their own beside the backward's. The host does not
// wait for those sums itself (it waits for the graph), so a watchdog asks
// NCCL for asynchronous errors (a peer that died) meanwhile and ends this
// process with a clear error, as PyTorch's NCCL watchdog does, rather
// than let the graph wait forever.
func (c *ncclComm) GraphCollective(stalled func() time.Duration) (unsafe.Pointer, func() error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, errors.New("the NCCL communicator was closed")
	}
	if c.coll == nil {
		if c.coll = C.gglua_nccl_collective(c.comm, C.int(c.size)); c.coll == nil {
			return nil, nil, errors.New("NCCL: out of memory")
		}
		go c.watch(stalled)
	}
	coll := c.coll
	return unsafe.Pointer(coll), func() error {
		if coll.error_kind == 0 {
			return nil
		}
		kind := C.int(C.GGLUA_NCCL_ERR)
		if coll.error_kind == C.GGLUA_COLLECTIVE_CUDA {
			kind = C.GGLUA_CUDA_ERR
		}
		return ncclError("ncclAllReduce (the gradients' sums in the backward's graph)", kind, coll.error)
	}, nil
}

// watch polls NCCL for an asynchronous error until the communicator
// closes, and stalled (nil: not watched) for a host that has waited for
// its device longer than the timeout (a peer that stopped without an
// error: no other rank's collective arrives). On either it aborts the
// communicator and ends the process (status 1, which makes gglua --nproc
// or torchrun stop the others).
func (c *ncclComm) watch(stalled func() time.Duration) {
	timeout := time.Duration(float64(c.timeout) * float64(time.Second))
	for {
		time.Sleep(100 * time.Millisecond)
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		why := ""
		if rc := C.gglua_nccl_async_error(c.comm); rc != 0 {
			why = "NCCL reported an asynchronous error while the gradients were summed (did another process fail?): " + C.GoString(C.gglua_nccl_error(rc))
		} else if stalled != nil && stalled() > timeout {
			why = fmt.Sprintf("no progress for %s while the gradients were summed in the backward's graph (GGLUA_DIST_TIMEOUT): another process may have stopped", timeout)
		}
		if why == "" {
			c.mu.Unlock()
			continue
		}
		fmt.Fprintf(os.Stderr, "gglua: rank %d: %s; ending this process\n", c.rank, why)
		C.gglua_nccl_end(c.comm, 1)
		c.closed = true
		c.mu.Unlock()
		os.Exit(1)
	}
}

func (c *ncclComm) Backend() string { return "nccl" }
func (c *ncclComm) Rank() int       { return c.rank }
func (c *ncclComm) Size() int       { return c.size }
func (c *ncclComm) OnDevice() bool  { return true }

func (c *ncclComm) run(call string, op int, send, recv unsafe.Pointer, count, arg int) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errors.New(call + ": the NCCL communicator was closed")
	}
	var code C.int
	if r := C.gglua_nccl_run(c.comm, c.device, C.int(op), send, recv, C.size_t(count), C.int(arg), c.timeout, &code); r != C.GGLUA_OK {
		return ncclError(call, r, code)
	}
	return nil
}

// ncclOps are NCCL's numbers for Sum, Avg, Max, Min.
var ncclOps = map[Op]int{Sum: 0, Avg: 4, Max: 2, Min: 3}

func (c *ncclComm) AllReduce(data unsafe.Pointer, count int, op Op) error {
	return c.run("ncclAllReduce", 0, data, data, count, ncclOps[op])
}

func (c *ncclComm) Broadcast(data unsafe.Pointer, count int, root int) error {
	return c.run("ncclBroadcast", 1, data, data, count, root)
}

func (c *ncclComm) AllGather(send, recv unsafe.Pointer, count int) error {
	return c.run("ncclAllGather", 2, send, recv, count, 0)
}

// Barrier is an all-reduce of one float: NCCL has no barrier of its own.
func (c *ncclComm) Barrier() error {
	return c.run("ncclAllReduce (barrier)", 0, c.scratch, c.scratch, 1, 0)
}

// Close destroys the communicator, or aborts it after a failure, which
// makes the other processes' NCCL calls fail instead of wait.
func (c *ncclComm) Close(ok bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.coll != nil {
		// A graph computed after this must not call the freed
		// communicator: its sum node records a failure instead.
		c.coll.device_all_reduce = nil
	}
	abort := C.int(0)
	if !ok {
		abort = 1
	}
	if rc := C.gglua_nccl_end(c.comm, abort); rc != 0 {
		return ncclError("ncclCommDestroy", C.GGLUA_NCCL_ERR, rc)
	}
	return nil
}
