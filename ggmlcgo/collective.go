package ggmlcgo

// #include <stdlib.h>
// #include "gglua_ops.h"
// static gglua_collective * gglua_new_scale_collective(float k, int world) {
//     gglua_collective * c = calloc(1, sizeof *c);
//     float * arg = malloc(sizeof *arg);
//     if (!c || !arg) { free(c); free(arg); return NULL; }
//     *arg = k;
//     c->host_sum = gglua_scale_sum;
//     c->host_arg = arg;
//     c->world = world;
//     return c;
// }
// static void gglua_free_scale_collective(gglua_collective * c) {
//     free(c->host_arg);
//     free(c);
// }
import "C"

import (
	"errors"
	"unsafe"
)

// In-graph collectives: data parallelism averages the gradients inside
// the backward's graph (core/data_parallel.go), with nodes that call a
// collective library through a gglua_collective (gglua_collective.h),
// C memory that package dist fills. On the CPU the node calls MPI in
// order with the graph's other nodes; on a CUDA device whose library has
// the kernels (KernelAllReduce) it queues NCCL on a stream of its own,
// which the rest of the backward overlaps, and the join node makes the
// graph's stream wait for it.

// AllReduceMean is a node that replaces a (contiguous f32, in a buffer
// outside the graph's: it is changed in place) by its mean across the
// processes of the gglua_collective at coll, when the graph computes it:
// NCCL's average on a device, MPI's sum divided by the processes' number
// on the CPU. Its own result is one float; the nodes that read a's means
// come after it in the graph (queued after it) and after an
// AllReduceJoin. coll must outlive every graph that computes the node.
func (c *Context) AllReduceMean(a Tensor, coll unsafe.Pointer) (Tensor, error) {
	if err := c.checkPackedF32("all_reduce_mean", a); err != nil {
		return Tensor{}, err
	}
	if coll == nil {
		return Tensor{}, errors.New("all_reduce_mean: no collective")
	}
	return result(C.gglua_all_reduce_node(c.p, a.p, (*C.gglua_collective)(coll)))
}

// AllReduceJoin is the node after which every AllReduce of coll queued
// before it is done (after: the last of them).
func (c *Context) AllReduceJoin(after Tensor, coll unsafe.Pointer) (Tensor, error) {
	if err := c.checkOp("all_reduce_join", after); err != nil {
		return Tensor{}, err
	}
	if coll == nil {
		return Tensor{}, errors.New("all_reduce_join: no collective")
	}
	return result(C.gglua_all_reduce_join_node(c.p, after.p, (*C.gglua_collective)(coll)))
}

// CollectiveError is the first failure the nodes of coll recorded: kind
// (CollectiveHost, CollectiveDevice, CollectiveCUDA; 0 for none) and the
// library's code.
func CollectiveError(coll unsafe.Pointer) (kind, code int) {
	k := (*C.gglua_collective)(coll)
	return int(k.error_kind), int(k.error)
}

// CollectiveWorld is the number of processes of the collective at coll
// (its mean divides by it).
func CollectiveWorld(coll unsafe.Pointer) int {
	return int((*C.gglua_collective)(coll).world)
}

// The kinds of CollectiveError.
const (
	CollectiveHost   = int(C.GGLUA_COLLECTIVE_HOST)
	CollectiveDevice = int(C.GGLUA_COLLECTIVE_DEVICE)
	CollectiveCUDA   = int(C.GGLUA_COLLECTIVE_CUDA)
)

// NewScaleCollective is a host collective of world processes whose sum
// multiplies by k (the sum over k processes that hold the same values),
// for tests and a job of one process. free releases it.
func NewScaleCollective(k float32, world int) (coll unsafe.Pointer, free func(), err error) {
	p := C.gglua_new_scale_collective(C.float(k), C.int(world))
	if p == nil {
		return nil, nil, errors.New("scale collective: out of memory")
	}
	return unsafe.Pointer(p), func() { C.gglua_free_scale_collective(p) }, nil
}
