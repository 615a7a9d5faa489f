package dist

/*
#cgo CFLAGS: -I${SRCDIR}/../ggmlcgo
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gglua_collective.h"
#if GGLUA_COLLECTIVE_LAYOUT != 2
#error "ggmlcgo/gglua_collective.h changed: update what dist fills, then GGLUA_COLLECTIVE_LAYOUT here"
#endif

// Open MPI's handles are pointers to its predefined objects; every handle
// below is a void* obtained with dlsym. MPI_IN_PLACE is ((void *) 1) in
// Open MPI's mpi.h, MPI_THREAD_SERIALIZED is 2.
#define GGLUA_MPI_IN_PLACE ((void *) 1)
#define GGLUA_MPI_THREAD_SERIALIZED 2

typedef struct {
	void *lib;
	int (*Initialized)(int *);
	int (*Finalized)(int *);
	int (*Init_thread)(int *, char ***, int, int *);
	int (*Finalize)(void);
	int (*Abort)(void *, int);
	int (*Comm_rank)(void *, int *);
	int (*Comm_size)(void *, int *);
	int (*Allreduce)(const void *, void *, int, void *, void *, void *);
	int (*Bcast)(void *, int, void *, int, void *);
	int (*Allgather)(const void *, int, void *, void *, int, void *, void *);
	int (*Barrier)(void *);
	int (*Error_string)(int, char *, int *);
	void *world, *float32, *sum, *max, *min;
} gglua_mpi_t;

static gglua_mpi_t M;

// gglua_mpi_load opens path and looks up what gglua calls. It returns NULL,
// or what went wrong (the caller frees it). RTLD_GLOBAL: Open MPI's plugins
// resolve their symbols against libmpi once it is loaded.
static char *gglua_mpi_load(const char *path, int *not_ompi) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		const char *e = dlerror();
		char *out = malloc(1024);
		snprintf(out, 1024, "%s", e ? e : "dlopen failed");
		return out;
	}
	gglua_mpi_t m = {0};
	m.lib = lib;
#define SYM(field, name) if (!(*(void **)&m.field = dlsym(lib, name))) goto missing;
	const char *name = NULL;
	SYM(world, name = "ompi_mpi_comm_world")
	SYM(float32, name = "ompi_mpi_float")
	SYM(sum, name = "ompi_mpi_op_sum")
	SYM(max, name = "ompi_mpi_op_max")
	SYM(min, name = "ompi_mpi_op_min")
	SYM(Initialized, name = "MPI_Initialized")
	SYM(Finalized, name = "MPI_Finalized")
	SYM(Init_thread, name = "MPI_Init_thread")
	SYM(Finalize, name = "MPI_Finalize")
	SYM(Abort, name = "MPI_Abort")
	SYM(Comm_rank, name = "MPI_Comm_rank")
	SYM(Comm_size, name = "MPI_Comm_size")
	SYM(Allreduce, name = "MPI_Allreduce")
	SYM(Bcast, name = "MPI_Bcast")
	SYM(Allgather, name = "MPI_Allgather")
	SYM(Barrier, name = "MPI_Barrier")
	SYM(Error_string, name = "MPI_Error_string")
#undef SYM
	M = m;
	return NULL;
missing:
	*not_ompi = m.world == NULL;
	dlclose(lib);
	char *out = malloc(1024);
	snprintf(out, 1024, "%s has no symbol %s", path, name);
	return out;
}

// gglua_mpi_init starts MPI unless the host already did (*started says
// which); *provided is the thread level granted.
static int gglua_mpi_init(int *started, int *provided, int *rank, int *size) {
	int done = 0, rc;
	if ((rc = M.Initialized(&done))) return rc;
	*started = 0;
	*provided = GGLUA_MPI_THREAD_SERIALIZED;
	if (!done) {
		if ((rc = M.Init_thread(NULL, NULL, GGLUA_MPI_THREAD_SERIALIZED, provided))) return rc;
		*started = 1;
	}
	if ((rc = M.Comm_rank(M.world, rank))) return rc;
	return M.Comm_size(M.world, size);
}

// gglua_mpi_since is when the collective in flight began (CLOCK_MONOTONIC
// nanoseconds; 0: none), for the watchdog (mpiComm.watch): MPI's calls
// block with no timeout of their own.
static int64_t gglua_mpi_since;
static int64_t gglua_mpi_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static void gglua_mpi_begin(void) { __atomic_store_n(&gglua_mpi_since, gglua_mpi_now(), __ATOMIC_RELAXED); }
static int gglua_mpi_end(int rc) { __atomic_store_n(&gglua_mpi_since, 0, __ATOMIC_RELAXED); return rc; }
// gglua_mpi_waiting is how long the collective in flight has waited (ns; 0: none).
static int64_t gglua_mpi_waiting(void) {
	int64_t since = __atomic_load_n(&gglua_mpi_since, __ATOMIC_RELAXED);
	return since ? gglua_mpi_now() - since : 0;
}
static int gglua_mpi_allreduce(void *buf, int count, int op) {
	void *o = op == 2 ? M.max : op == 3 ? M.min : M.sum;
	gglua_mpi_begin();
	return gglua_mpi_end(M.Allreduce(GGLUA_MPI_IN_PLACE, buf, count, M.float32, o, M.world));
}
// gglua_mpi_allreduce_all is gglua_mpi_allreduce of count floats in calls
// of at most GGLUA_MPI_CHUNK (MPI counts are ints).
#define GGLUA_MPI_CHUNK (1 << 30)
static int gglua_mpi_allreduce_all(void *buf, int64_t count, int op) {
	for (int64_t off = 0; off < count; off += GGLUA_MPI_CHUNK) {
		const int64_t n = count - off < GGLUA_MPI_CHUNK ? count - off : GGLUA_MPI_CHUNK;
		int rc = gglua_mpi_allreduce((float *) buf + off, (int) n, op);
		if (rc) return rc;
	}
	return 0;
}
// gglua_mpi_host_sum is the host_sum of the backward's in-graph sums
// (gglua_collective.h).
static int gglua_mpi_host_sum(void *data, int64_t count, void *arg) {
	(void) arg;
	return gglua_mpi_allreduce_all(data, count, 0);
}
static gglua_collective *gglua_mpi_collective(int world) {
	gglua_collective *c = calloc(1, sizeof *c);
	if (c) {
		c->host_sum = gglua_mpi_host_sum;
		c->world = world;
	}
	return c;
}
static int gglua_mpi_bcast(void *buf, int count, int root) {
	gglua_mpi_begin();
	return gglua_mpi_end(M.Bcast(buf, count, M.float32, root, M.world));
}
static int gglua_mpi_allgather(void *send, void *recv, int count) {
	gglua_mpi_begin();
	return gglua_mpi_end(M.Allgather(send, count, M.float32, recv, count, M.float32, M.world));
}
static int gglua_mpi_barrier(void) {
	gglua_mpi_begin();
	return gglua_mpi_end(M.Barrier(M.world));
}
static int gglua_mpi_finalize(void) { return M.Finalize(); }
static int gglua_mpi_abort(int code) { return M.Abort(M.world, code); }
static void gglua_mpi_error(int code, char *buf) {
	int n = 0;
	if (M.Error_string(code, buf, &n)) n = 0;
	buf[n < 511 ? n : 511] = 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// mpiLibraries are tried in order when GGLUA_MPI_PATH is not set: Open
// MPI's soname (Debian's libopenmpi3 and most builds), then the
// development link.
var mpiLibraries = []string{"libmpi.so.40", "libmpi.so"}

// MPIHint says how to get MPI; every "not found" error ends with it.
const MPIHint = "CPU tensors need Open MPI: on Debian or Ubuntu `apt-get install openmpi-bin libopenmpi-dev`, then run `mpirun -np N gglua script.lua`; or set GGLUA_MPI_PATH to your libmpi.so"

// mpi is the process's MPI: loaded and started once (MPI allows one
// MPI_Init per process).
var mpi struct {
	sync.Mutex
	comm    *mpiComm
	started bool // gglua called MPI_Init (so it finalizes)
	done    bool // finalized or aborted: MPI cannot start again
}

// OpenMPI loads the MPI library, starts MPI and returns the world
// communicator (the same one on every call). timeout bounds every
// collective (watch).
func OpenMPI(timeout time.Duration) (Comm, error) {
	mpi.Lock()
	defer mpi.Unlock()
	if mpi.comm != nil {
		return mpi.comm, nil
	}
	if mpi.done {
		return nil, errors.New("MPI was finalized in this process and cannot start again")
	}
	if err := loadMPI(); err != nil {
		return nil, err
	}
	var started, provided, rank, size C.int
	if rc := C.gglua_mpi_init(&started, &provided, &rank, &size); rc != 0 {
		return nil, mpiError("MPI_Init_thread", rc)
	}
	mpi.started = started != 0
	if provided < C.GGLUA_MPI_THREAD_SERIALIZED {
		// Go runs cgo calls on any of its threads, one at a time: MPI must
		// allow that (MPI_THREAD_SERIALIZED).
		return nil, fmt.Errorf("the MPI library grants thread level %d, gglua needs MPI_THREAD_SERIALIZED (2): use an Open MPI built with thread support", provided)
	}
	mpi.comm = &mpiComm{rank: int(rank), size: int(size)}
	go mpi.comm.watch(timeout)
	return mpi.comm, nil
}

// watch ends this process with a clear error when a collective has waited
// longer than timeout: MPI's calls have no timeout, and a rank that made
// one collective fewer (or ended early, finalizing) would leave the others
// waiting forever. mpirun then ends the job (a process exited without
// finalizing), as the NCCL watchdog's exit does under gglua --nproc.
func (c *mpiComm) watch(timeout time.Duration) {
	for {
		time.Sleep(watchEvery)
		mpi.Lock()
		done := mpi.done
		mpi.Unlock()
		if done {
			return
		}
		if waited := time.Duration(C.gglua_mpi_waiting()); waited > timeout {
			fmt.Fprintf(os.Stderr, "gglua: rank %d: an MPI collective has waited %s, past GGLUA_DIST_TIMEOUT (%s): another process stopped, or made a different number of collectives; ending this process\n",
				c.rank, waited.Round(time.Millisecond), timeout)
			os.Exit(1)
		}
	}
}

// watchEvery is how often the watchdog looks.
const watchEvery = 100 * time.Millisecond

// loadMPI opens GGLUA_MPI_PATH when set (and only it), else the first of
// mpiLibraries found.
func loadMPI() error {
	paths := mpiLibraries
	if p := os.Getenv("GGLUA_MPI_PATH"); p != "" {
		paths = []string{p}
	}
	var tried []string
	for _, p := range paths {
		cp := C.CString(p)
		var notOMPI C.int
		msg := C.gglua_mpi_load(cp, &notOMPI)
		C.free(unsafe.Pointer(cp))
		if msg == nil {
			return nil
		}
		why := C.GoString(msg)
		C.free(unsafe.Pointer(msg))
		if notOMPI != 0 {
			return fmt.Errorf("%s is not Open MPI (%s): gglua finds MPI_COMM_WORLD and the other handles as Open MPI's exported objects; MPICH and its derivatives (Intel MPI, MVAPICH) are not supported yet. %s", p, why, MPIHint)
		}
		tried = append(tried, why)
	}
	from := "tried " + strings.Join(mpiLibraries, ", ")
	if p := os.Getenv("GGLUA_MPI_PATH"); p != "" {
		from = "GGLUA_MPI_PATH=" + p
	}
	return fmt.Errorf("MPI library not found (%s: %s). %s", from, strings.Join(tried, "; "), MPIHint)
}

func mpiError(call string, rc C.int) error {
	buf := (*C.char)(C.malloc(512))
	defer C.free(unsafe.Pointer(buf))
	C.gglua_mpi_error(rc, buf)
	return fmt.Errorf("%s failed: %s (MPI error %d)", call, C.GoString(buf), int(rc))
}

// mpiComm is MPI_COMM_WORLD.
type mpiComm struct {
	rank, size int
	coll       *C.gglua_collective // the in-graph sums' (GraphCollective), made once
}

// GraphCollective is MPI_Allreduce's sum as graph nodes call it: the
// backward's gradient sums run in its graph, in order with its nodes, on
// the host (stalled is not needed: MPI's launcher ends a job whose process
// died).
func (c *mpiComm) GraphCollective(stalled func() time.Duration) (unsafe.Pointer, func() error, error) {
	mpi.Lock()
	defer mpi.Unlock()
	if c.coll == nil {
		if c.coll = C.gglua_mpi_collective(C.int(c.size)); c.coll == nil {
			return nil, nil, errors.New("MPI: out of memory")
		}
	}
	coll := c.coll
	return unsafe.Pointer(coll), func() error {
		if coll.error == 0 {
			return nil
		}
		return mpiError("MPI_Allreduce (the gradients' sums in the backward's graph)", coll.error)
	}, nil
}

func (c *mpiComm) Backend() string { return "mpi" }
func (c *mpiComm) Rank() int       { return c.rank }
func (c *mpiComm) Size() int       { return c.size }
func (c *mpiComm) OnDevice() bool  { return false }

// mpiChunk bounds one call's count, which MPI takes as an int.
const mpiChunk = C.GGLUA_MPI_CHUNK

func (c *mpiComm) AllReduce(data unsafe.Pointer, count int, op Op) error {
	if rc := C.gglua_mpi_allreduce_all(data, C.int64_t(count), C.int(op)); rc != 0 {
		return mpiError("MPI_Allreduce", rc)
	}
	if op == Avg { // MPI has no average: sum, then divide here
		scaleHost(data, count, c.size)
	}
	return nil
}

func (c *mpiComm) Broadcast(data unsafe.Pointer, count int, root int) error {
	for off := 0; off < count; off += mpiChunk {
		n := min(mpiChunk, count-off)
		if rc := C.gglua_mpi_bcast(unsafe.Add(data, 4*off), C.int(n), C.int(root)); rc != 0 {
			return mpiError("MPI_Bcast", rc)
		}
	}
	return nil
}

func (c *mpiComm) AllGather(send, recv unsafe.Pointer, count int) error {
	if count > mpiChunk {
		return fmt.Errorf("all_gather of %d elements: more than MPI's int count allows", count)
	}
	if rc := C.gglua_mpi_allgather(send, recv, C.int(count)); rc != 0 {
		return mpiError("MPI_Allgather", rc)
	}
	return nil
}

func (c *mpiComm) Barrier() error {
	if rc := C.gglua_mpi_barrier(); rc != 0 {
		return mpiError("MPI_Barrier", rc)
	}
	return nil
}

// Close finalizes MPI (when gglua started it) or, after a failure, aborts
// the whole job: MPI_Finalize would wait for processes that may be waiting
// in a collective for this one, and mpirun ends every process of an
// aborted job.
func (c *mpiComm) Close(ok bool) error {
	mpi.Lock()
	defer mpi.Unlock()
	if mpi.done || mpi.comm == nil {
		return nil
	}
	mpi.done, mpi.comm = true, nil
	if !ok {
		C.gglua_mpi_abort(1)
		return nil
	}
	if mpi.started {
		if rc := C.gglua_mpi_finalize(); rc != 0 {
			return mpiError("MPI_Finalize", rc)
		}
	}
	return nil
}
