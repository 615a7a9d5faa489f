// gglua_replay.h - when a device backend may replay a step as a CUDA graph.
#ifndef GGLUA_REPLAY_H
#define GGLUA_REPLAY_H
#include "gglua_ggml.h"

// GGLUA_REPLAY_LANES is how many graphs a device backend keeps captured at
// once: a step computes its forward while the host builds its backward
// (two graphs), a data-parallel step three (forward; backward; the averaged
// gradients applied), and ggml-cuda keeps one CUDA graph per backend, so
// each lane is a backend of its own on the same device.
#define GGLUA_REPLAY_LANES 3

// gglua_replay remembers, for each lane, the last graph computed on it,
// node by node, and whether ggml-cuda's captured CUDA graph was made from
// it.
struct gglua_replay;

struct gglua_replay * gglua_replay_new(void);
void gglua_replay_free(struct gglua_replay * r);

// gglua_lane_order is how a graph launched on one lane follows the work
// queued on the others: the host waits for it (SETTLE, the default), the
// lane's stream waits for an event recorded on theirs (EVENTS), or nothing
// is needed because every compute is done when it returns (FINISHED: the
// CPU computing as a device, whose bookkeeping is then EVENTS').
enum gglua_lane_order { GGLUA_LANES_SETTLE, GGLUA_LANES_EVENTS, GGLUA_LANES_FINISHED };

// gglua_replay_order sets how lanes are ordered; EVENTS makes an event for
// each of the n lanes, and returns false (leaving SETTLE) where the device
// has none.
bool gglua_replay_order(struct gglua_replay * r, ggml_backend_t * lanes, int n, enum gglua_lane_order order);

// gglua_replay_compute runs g, numbered launch (never less than the last
// launch's number), on the lane whose last graph is identical to g, else on
// the lane used least recently, after the work queued on the other lanes
// (gglua_replay_order): replayed from the lane's captured CUDA graph when
// its last graph was captured; captured when g repeats its last graph;
// launched node by node otherwise. lanes are the lanes' backends (n of
// them, at most GGLUA_REPLAY_LANES, all on one device). scratch is a
// one-node graph of the device's memory, computed to make ggml capture
// afresh. enabled = false launches every graph node by node on the first
// lane. async returns once g's kernels are queued (gglua_replay_wait waits
// for them); else it returns when g is done.
enum ggml_status gglua_replay_compute(struct gglua_replay * r, ggml_backend_t * lanes, int n,
                                      struct ggml_cgraph * g, struct ggml_cgraph * scratch, bool enabled, bool async,
                                      int64_t launch);

// gglua_replay_wait waits for every lane's queued work.
void gglua_replay_wait(struct gglua_replay * r, ggml_backend_t * lanes, int n);

// gglua_replay_wait_for waits until the graph numbered launch is done (and
// so every graph launched before it), on as few lanes as it can.
void gglua_replay_wait_for(struct gglua_replay * r, ggml_backend_t * lanes, int n, int64_t launch);

// gglua_replay_done is the last launch known done: it and all before it.
int64_t gglua_replay_done(const struct gglua_replay * r);

// gglua_replay_get_async queues a copy of t's first size bytes into dst (host
// memory, pinned for the copy to run asynchronously) behind all the queued
// graphs, and returns false when no lane is busy.
bool gglua_replay_get_async(struct gglua_replay * r, ggml_backend_t * lanes, int n, const struct ggml_tensor * t,
                            void * dst, size_t size);

// gglua_replay_set_async queues a copy of size bytes from src (pinned host
// memory, which must stay as it is until the copy is done) into t's memory
// (the device's own buffer type) behind all the queued graphs and before
// any launched after it, and returns the number of the launch it follows:
// the copy is done once that launch is (gglua_replay_done). 0: nothing
// queued, no lane being busy or the lanes ordered by the host (SETTLE).
int64_t gglua_replay_set_async(struct gglua_replay * r, ggml_backend_t * lanes, int n, struct ggml_tensor * t,
                               const void * src, size_t size);

// gglua_replay_step is one ordering step, for tests: op 'L' launch on lane
// (numbered launch), 'E' lane's stream made to wait for the work queued on
// other (up to launch), 'Y' the host waits for lane (up to launch), 'S'
// and 'G' a write and a read queued on lane behind launch.
struct gglua_replay_step {
    char op;
    int8_t lane, other;
    int64_t launch;
};

#define GGLUA_REPLAY_TRACE 64

// gglua_replay_trace copies up to max steps logged since the last call
// into out, returns how many, clears the log, and logs from now on if on.
int gglua_replay_trace(struct gglua_replay * r, bool on, struct gglua_replay_step * out, int max);

// gglua_replay_busy is the lanes with work not waited for, lane k as bit k.
int gglua_replay_busy(const struct gglua_replay * r);

// gglua_replay_counts reads how many computes were replayed, captured and
// launched node by node.
void gglua_replay_counts(const struct gglua_replay * r, int64_t * replayed, int64_t * captured, int64_t * launched);

#endif
