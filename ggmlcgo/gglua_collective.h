// gglua_collective.h - a collective that a graph node runs: data
// parallelism's gradient averages inside the backward's graph, so that
// they overlap the rest of the backward (core/data_parallel.go). Package dist
// fills one per communicator; ggmlcgo's CPU node (collective.c) calls
// host_sum, and on a CUDA device gglua-kernels.cu queues device_all_reduce
// on a stream of its own. Plain C: the CUDA build includes it too.
#ifndef GGLUA_COLLECTIVE_H
#define GGLUA_COLLECTIVE_H
#include <stddef.h>
#include <stdint.h>

// GGLUA_COLLECTIVE_LAYOUT numbers the struct's layout: bump it with any
// change, and with it the number package dist checks (dist/mpi.go,
// dist/nccl.go). dist includes this header from another folder, which Go's
// build cache does not track: a changed struct would leave dist's compiled
// C filling the old one, so the change must touch dist's own files too.
#define GGLUA_COLLECTIVE_LAYOUT 2

typedef struct gglua_collective {
    // host_sum sums count floats at data across the processes, in place
    // (MPI_Allreduce); it returns 0 or the library's error code. NULL where
    // the collective takes device memory.
    int (*host_sum)(void * data, int64_t count, void * arg);
    void * host_arg;
    // device_all_reduce is ncclAllReduce (NCCL's ABI: f32 is 7, sum 0,
    // avg 4) on comm; NULL where the collective takes host memory.
    int (*device_all_reduce)(const void * send, void * recv, size_t count, int datatype, int op, void * comm, void * stream);
    void * comm;
    // The device's side, made by gglua-kernels.cu at first use: the stream
    // the sums run on (of the device's highest priority), and the events
    // that fork to it and join back.
    void * stream;
    void * fork;
    void * join;
    int forked; // sums queued on stream since the last join
    // error is the first failure's code (0: none), error_kind whose:
    // GGLUA_COLLECTIVE_HOST, _DEVICE (NCCL) or _CUDA.
    int error;
    int error_kind;
    // world is the number of processes: a host all_reduce_mean node
    // divides host_sum's sum by it (a device's asks NCCL for the average).
    // Last, and the node named anew, so that a CUDA library built before
    // it (which summed a node named all_reduce) refuses the node rather
    // than read this struct at the old offsets and sum where the mean is
    // wanted: gglua then sums between computes (ggmlcgo.HasKernel).
    int world;
} gglua_collective;

enum { GGLUA_COLLECTIVE_HOST = 1, GGLUA_COLLECTIVE_DEVICE = 2, GGLUA_COLLECTIVE_CUDA = 3 };

#endif
