package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ComputeEach runs g's nodes one at a time, waiting for each to finish, and
// calls each with the node and its wall time: a profile of where a graph's
// time goes that needs nothing but the backend (the GPU machines have no
// nsys, and ncu replays every kernel, minutes for one training step). The
// graph computes more slowly than under Compute (no overlap, fusion or CUDA
// graph across nodes, a wait after each), so the times are each node's own
// cost plus one launch.
func (b *Backend) ComputeEach(ctx context.Context, g *Graph, each func(node Tensor, took time.Duration)) error {
	if err := b.checkGraph(g); err != nil {
		return err
	}
	if waitsBeforeCompute(b) {
		WaitDevices()
	}
	one, err := NewContext(0, 1)
	if err != nil {
		return err
	}
	defer one.Free()
	single, err := one.NewGraph(1)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return errors.New("compute: backend is closed")
	}
	if b.idle != nil {
		defer b.idle.Reset(PauseAfter)
	}
	for _, n := range g.Nodes() {
		// Cancellation stops the graph between nodes, as ComputeContext's
		// abort callback does on the CPU.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrAborted, err)
		}
		C.ggml_graph_clear(single.p)
		C.ggml_graph_add_node(single.p, n.p)
		start := time.Now()
		status := b.graphCompute(single, false, false) // timed node by node, never replayed, waited for
		if err := statusError("compute", status); err != nil {
			return err
		}
		each(n, time.Since(start))
	}
	return nil
}

// OpName is the name of the op that computes t ("MUL_MAT", "RELU", ...).
func (t Tensor) OpName() string { return C.GoString(C.ggml_op_desc(t.p)) }
