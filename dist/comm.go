package dist

import (
	"fmt"
	"strings"
	"time"
	"unsafe"
)

// Op is a reduction of all_reduce.
type Op int

// The reductions, as torch.distributed.ReduceOp names them.
const (
	Sum Op = iota
	Avg
	Max
	Min
)

// String is the name ParseOp reads.
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("op %d", int(o))
}

// ParseOp reads "sum", "avg", "max" or "min".
func ParseOp(s string) (Op, error) {
	switch strings.ToLower(s) {
	case "sum":
		return Sum, nil
	case "avg", "mean":
		return Avg, nil
	case "max":
		return Max, nil
	case "min":
		return Min, nil
	}
	return Sum, fmt.Errorf("unknown reduction %q (expected sum, avg, max or min)", s)
}

// Comm is a communicator over the processes of a job. Buffers are count
// float32s at data: host memory for MPI, device memory of this process's
// GPU for NCCL (OnDevice says which a Comm takes). Every call is
// collective: each process makes the same calls in the same order, and a
// call returns once its result is in place (the caller's ggml backend has
// finished writing the buffers before the call).
type Comm interface {
	Backend() string // "mpi" or "nccl"
	Rank() int
	Size() int
	OnDevice() bool // buffers are GPU memory
	AllReduce(data unsafe.Pointer, count int, op Op) error
	Broadcast(data unsafe.Pointer, count int, root int) error
	// AllGather writes every process's count elements of send into recv
	// (Size()*count elements), in rank order.
	AllGather(send, recv unsafe.Pointer, count int) error
	Barrier() error
	// Close ends the communicator: normally (ok) or, after a failure,
	// abandoning what is in flight so that the other processes see an error
	// rather than wait forever.
	Close(ok bool) error
}

// GraphComm is a Comm that data parallelism can call from inside a graph
// compute (core/data_parallel_sums.go): GraphCollective returns a
// gglua_collective (ggmlcgo/gglua_collective.h), valid until Close, and
// the function that reports the first failure its nodes recorded. stalled
// says how long the host has been waiting for its device (ggmlcgo's
// DeviceBlockedFor): past the timeout, a device collective's watchdog ends
// the process, as a stuck peer would keep it waiting for ever.
type GraphComm interface {
	Comm
	GraphCollective(stalled func() time.Duration) (coll unsafe.Pointer, failed func() error, err error)
}

// scaleHost divides count float32s of host memory at data by n (Avg on a
// library that only sums).
func scaleHost(data unsafe.Pointer, count, n int) {
	v := unsafe.Slice((*float32)(data), count)
	inv := 1 / float32(n)
	for i := range v {
		v[i] *= inv
	}
}
