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
    // world is the number of processes: a host all_reduce node divides
    // host_sum's sum by it (a device's asks NCCL for the average).
    int world;
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
} gglua_collective;

enum { GGLUA_COLLECTIVE_HOST = 1, GGLUA_COLLECTIVE_DEVICE = 2, GGLUA_COLLECTIVE_CUDA = 3 };

#endif
