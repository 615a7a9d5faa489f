package ggmlcgo

// #include <stdlib.h>
// #include "gglua_replay.h"
import "C"

import (
	"errors"
	"os"
	"strings"
	"unsafe"
)

// replayer lets a device backend replay a repeated graph (a training step)
// as a CUDA graph: one launch instead of one per node. graph_replay.c says
// when it does, and why ggml-cuda's own test is not enough.
type replayer struct {
	state   *C.struct_gglua_replay
	enabled bool
	writes  bool     // the host's writes may queue on the lanes (not when the host orders them)
	ctx     *Context // the scratch graph's tensors
	buf     Buffer
	scratch *Graph
	// lanes are the backends graphs run on: b's own, then more of the same
	// device, each keeping a captured graph of its own (graph_replay.c).
	lanes []C.ggml_backend_t
}

// newReplayer prepares replays for device backend b; GGLUA_CUDA_GRAPHS=0
// turns them off (every node launched, as ggml-cuda does for graphs it
// never captures).
func newReplayer(b *Backend) (*replayer, error) {
	r := &replayer{state: C.gglua_replay_new(), enabled: os.Getenv("GGLUA_CUDA_GRAPHS") != "0", lanes: []C.ggml_backend_t{b.p}}
	if r.state == nil {
		return nil, errors.New("graph replay: out of host memory")
	}
	// More lanes only where replays run; a device that will not open a
	// second backend replays on one lane (two graphs in turn then launch).
	for r.enabled && len(r.lanes) < C.GGLUA_REPLAY_LANES {
		lane := C.ggml_backend_dev_init(C.ggml_backend_get_device(b.p), nil)
		if lane == nil {
			break
		}
		r.lanes = append(r.lanes, lane)
	}
	err := r.makeScratch(b.BufferType())
	if err != nil {
		r.free()
		return nil, err
	}
	r.setOrder(laneOrder(b))
	return r, nil
}

// How a backend's lanes are ordered (graph_replay.c).
const (
	lanesSettle   = C.GGLUA_LANES_SETTLE   // the host waits for the other lanes
	lanesEvents   = C.GGLUA_LANES_EVENTS   // the device waits, on events
	lanesFinished = C.GGLUA_LANES_FINISHED // nothing to wait for: computes are done
)

// laneOrder is how a backend's lanes are ordered: by events on a CUDA
// device, whose writes also queue on its streams (upload.go); elsewhere,
// or with GGLUA_LANE_EVENTS=0 (to compare), the host waits for the other
// lanes and defers its writes, as before. (ggml backends without an
// asynchronous write would make a queued write at once, under the queued
// graphs.) A CPU computing as a device needs neither, its computes being
// done, and keeps the events' books whatever GGLUA_LANE_EVENTS says, so
// tests see their bookkeeping.
func laneOrder(b *Backend) C.enum_gglua_lane_order {
	switch {
	case b.cpu:
		return lanesFinished
	case os.Getenv("GGLUA_LANE_EVENTS") == "0":
		return lanesSettle
	case strings.HasPrefix(b.name, "CUDA"):
		return lanesEvents
	}
	return lanesSettle
}

// setOrder sets how the lanes are ordered (no work may be queued), and
// reports false where the device has no events (the host then waits).
func (r *replayer) setOrder(o C.enum_gglua_lane_order) bool {
	ok := bool(C.gglua_replay_order(r.state, &r.lanes[0], C.int(len(r.lanes)), o))
	r.writes = ok && o != lanesSettle
	return ok
}

// makeScratch builds the one-node graph computed before a capture: one
// float scaled into another, in memory of the backend's own.
func (r *replayer) makeScratch(bt BufferType) error {
	var err error
	if r.ctx, err = NewContext(2, 2); err != nil {
		return err
	}
	x, err := r.ctx.NewTensor(F32, []int64{1})
	if err != nil {
		return err
	}
	y, err := r.ctx.Scale(x, 1)
	if err != nil {
		return err
	}
	if r.buf, err = bt.Alloc(4 * bt.Alignment()); err != nil {
		return err
	}
	C.ggml_backend_buffer_clear(r.buf.p, 0)
	alloc := NewTallocr(r.buf)
	if err := alloc.Alloc(x); err != nil {
		return err
	}
	if err := alloc.Alloc(y); err != nil {
		return err
	}
	if r.scratch, err = r.ctx.NewGraph(2); err != nil {
		return err
	}
	return r.scratch.Expand(y)
}

// graphCompute runs g: on the CPU by ggml, to completion; on a device
// through the replayer, which may replay it as a CUDA graph when mayReplay
// (and GGLUA_CUDA_GRAPHS allows) and launches it node by node otherwise,
// and with async returns once it is queued (b.mu is held).
func (b *Backend) graphCompute(g *Graph, mayReplay, async bool) C.enum_ggml_status {
	b.launches++
	r := b.replay
	if r == nil {
		return C.ggml_backend_graph_compute(b.p, g.p)
	}
	done := blocked() // a launch may first wait for the other lanes (settle)
	s := C.gglua_replay_compute(r.state, &r.lanes[0], C.int(len(r.lanes)), g.p, r.scratch.p,
		C.bool(mayReplay && r.enabled), C.bool(async), C.int64_t(b.launches))
	done()
	b.setQueued(r.busyLanes() != 0)
	b.releaseUploadsLocked(int64(C.gglua_replay_done(r.state)))
	return s
}

func (r *replayer) free() {
	if r == nil {
		return
	}
	for _, lane := range r.lanes[1:] { // the first is the backend's own
		C.ggml_backend_free(lane)
	}
	r.lanes = r.lanes[:1]
	r.ctx.Free()
	if !r.buf.IsNil() {
		r.buf.Free()
	}
	C.gglua_replay_free(r.state)
	r.state = nil
}

// ReplayCounts are how a device backend ran its graphs: replayed from a
// captured CUDA graph, captured, or launched node by node. The CPU backend
// counts none.
type ReplayCounts struct{ Replayed, Captured, Launched int64 }

// Replays reports the backend's ReplayCounts so far.
func (b *Backend) Replays() ReplayCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.replayCountsLocked()
}

func (b *Backend) replayCountsLocked() ReplayCounts {
	if b.replay == nil || b.replay.state == nil {
		return ReplayCounts{}
	}
	var rp, cp, ln C.int64_t
	C.gglua_replay_counts(b.replay.state, &rp, &cp, &ln)
	return ReplayCounts{Replayed: int64(rp), Captured: int64(cp), Launched: int64(ln)}
}

// opParamWord is the 32-bit word at byte off of t's op parameters (for
// tests).
func opParamWord(t Tensor, off uintptr) *uint32 {
	return (*uint32)(unsafe.Add(unsafe.Pointer(&t.p.op_params[0]), off))
}

// customPadding, customNTasks and customUserdata are where a custom
// node's parameters hold the padding after n_tasks (which ggml leaves as
// its stack held it), n_tasks and userdata (for tests).
var customPadding, customNTasks, customUserdata = func() (uintptr, uintptr, uintptr) {
	var p C.struct_gglua_custom_op_params
	return unsafe.Offsetof(p.n_tasks) + unsafe.Sizeof(p.n_tasks), unsafe.Offsetof(p.n_tasks), unsafe.Offsetof(p.userdata)
}()

// busyLanes is the lanes with queued work, lane k as bit k (for tests).
func (r *replayer) busyLanes() int { return int(C.gglua_replay_busy(r.state)) }

// laneStep is one ordering step of graph_replay.c's trace (for tests).
type laneStep struct {
	Op          byte // 'L' launch, 'E' wait on an event, 'Y' host wait, 'S' write, 'G' read
	Lane, Other int
	Launch      int64
}

// trace returns the ordering steps logged since the last call and logs
// from now on if on (for tests).
func (r *replayer) trace(on bool) []laneStep {
	var raw [C.GGLUA_REPLAY_TRACE]C.struct_gglua_replay_step
	n := int(C.gglua_replay_trace(r.state, C.bool(on), &raw[0], C.int(len(raw))))
	steps := make([]laneStep, n)
	for i := range steps {
		steps[i] = laneStep{byte(raw[i].op), int(raw[i].lane), int(raw[i].other), int64(raw[i].launch)}
	}
	return steps
}
