package dist

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Job is this process's place and, with more than one process, its
// communicator. There is one per process: MPI and the GPU are the
// process's, not a runtime's.
type Job struct {
	Place Place
	Comm  Comm // nil in a job of one process
}

var job struct {
	sync.Mutex
	j *Job
}

// DefaultTimeout bounds the rendezvous and every collective unless
// GGLUA_DIST_TIMEOUT (seconds) says otherwise.
const DefaultTimeout = 10 * time.Minute

// Timeout is GGLUA_DIST_TIMEOUT, or DefaultTimeout.
func Timeout() (time.Duration, error) {
	s := os.Getenv("GGLUA_DIST_TIMEOUT")
	if s == "" {
		return DefaultTimeout, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) {
		return 0, fmt.Errorf("GGLUA_DIST_TIMEOUT=%q is not a positive number of seconds", s)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// ErrCPUNeedsMPI: CPU tensors in a job not started by an MPI launcher.
var ErrCPUNeedsMPI = errors.New("CPU tensors are reduced by MPI, and this process was not started by an MPI launcher: run `mpirun -np N gglua script.lua` (gglua --nproc and torchrun start one process per GPU for CUDA tensors, with --device cuda)")

// Init places this process and, in a job of several (or a launcher's job
// of one GPU), starts its communicator: NCCL on CUDA device gpu (an index among the visible
// devices), or MPI when gpu < 0 (CPU tensors). Later calls return the
// same job; asking for the other kind then is an error.
func Init(gpu int) (*Job, error) {
	job.Lock()
	defer job.Unlock()
	if j := job.j; j != nil {
		if j.Comm != nil && j.Comm.OnDevice() != (gpu >= 0) {
			return nil, fmt.Errorf("already started with %s; one process runs one kind of collective", j.Comm.Backend())
		}
		return j, nil
	}
	p, err := PlaceFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	j := &Job{Place: p}
	// A launcher's job of one GPU gets a communicator too, as torchrun's
	// does in PyTorch: the script runs the same collectives (and
	// data_parallel the same graphs) as on N GPUs.
	if p.World > 1 || (gpu >= 0 && p.Launcher != "") {
		if j.Comm, err = open(p, gpu); err != nil {
			if p.World > 1 {
				return nil, err
			}
			j.Comm = nil // a job of one runs without (no NCCL here, say)
		}
		if j.Comm != nil && (j.Comm.Rank() != p.Rank || j.Comm.Size() != p.World) {
			j.Comm.Close(false)
			return nil, fmt.Errorf("%s places this process at rank %d of %d, the environment (%s) at rank %d of %d", j.Comm.Backend(), j.Comm.Rank(), j.Comm.Size(), p.Launcher, p.Rank, p.World)
		}
	}
	job.j = j
	return j, nil
}

func open(p Place, gpu int) (Comm, error) {
	timeout, err := Timeout()
	if err != nil {
		return nil, err
	}
	if gpu >= 0 {
		return OpenNCCL(p, gpu, timeout)
	}
	// An MPI launcher leaves its own variables (mpirun, or srun with
	// PMIx); without them MPI_Init would start a job of one process.
	if os.Getenv("OMPI_COMM_WORLD_SIZE") == "" && os.Getenv("PMIX_RANK") == "" {
		return nil, ErrCPUNeedsMPI
	}
	return OpenMPI(timeout)
}

// Current is the job Init started, or nil.
func Current() *Job {
	job.Lock()
	defer job.Unlock()
	return job.j
}

// Shutdown ends the job at the end of the process: MPI_Finalize or NCCL's
// destroy when it went well (ok), else MPI_Abort or ncclCommAbort, so the
// other processes stop with an error instead of waiting for this one.
func Shutdown(ok bool) error {
	job.Lock()
	defer job.Unlock()
	if job.j == nil || job.j.Comm == nil {
		return nil
	}
	c := job.j.Comm
	job.j = nil
	return c.Close(ok)
}
