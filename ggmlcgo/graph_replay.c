// Replaying a training step as a CUDA graph, without stale kernels.
//
// ggml-cuda captures a graph's kernels into a CUDA graph and replays it when
// the next graph "matches" the last one: same node count, ops, shapes,
// strides and addresses. It does not compare most ops' parameters (a clamp's
// bounds, a fill's value: only SCALE's and GLU's), nor the types of the
// inputs, so a graph that differs from the captured one only there would
// replay the old kernels: a silent wrong result. Its own heuristic also
// refuses any graph with a matrix ADD (a batched training step always has
// one) unless the caller passes a batch-size hint.
//
// So gglua decides itself, with a hint on every compute: it records every
// node's op, type, flags, shape, strides, address and parameters and every
// input's address, type, shape and strides, and lets ggml use a CUDA graph
// (hint 1) only for a graph identical in all of that to the one computed
// just before it; everything else is launched node by node (hint 2, which
// ggml-cuda never captures). Before a fresh capture a one-node scratch graph
// is launched, so that ggml sees a changed graph and captures anew instead
// of replaying one captured from an older graph.
//
// Launching a graph, ggml-cuda also fuses chains of ADD nodes into one
// kernel that writes the first node's memory, and points the last node's
// data there: a replay launches the kernels but does not repeat that, so
// the redirections a capture made are recorded and made again on every
// replayed graph's nodes.
//
// ggml-cuda keeps one captured graph per backend, and a data-parallel step
// computes two graphs in turn (backward; the averaged gradients applied),
// which would each undo the other's capture. So a device has lanes, each a
// backend of its own on the device (its own stream and CUDA graph): a
// graph goes to the lane whose last graph it repeats, else to the lane used
// least recently.
//
// A compute may return once its kernels are queued (async): the host then
// builds the next graph while the device runs this one. The lanes' streams
// are not ordered with each other, so a graph launched on one lane first
// makes its stream wait for the work queued on every other busy lane (a
// CUDA event recorded there): the device runs the graphs in the order they
// were launched, and the host does not wait at a launch. (On a device
// other than CUDA, or with GGLUA_LANE_EVENTS=0, the host waits for the
// other lanes instead, settle: graph_replay.go's laneOrder.) The Go side
// waits (gglua_replay_wait, or gglua_replay_wait_for one graph) before the
// host touches device memory.
//
// Launches are numbered by the caller. Since each launch follows all the
// work queued before it, a lane that is done has finished every graph up
// to its last: `done` is the last launch known finished.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gglua_replay.h"

enum { HINT_GRAPH = 1, HINT_LAUNCH = 2 };

struct record {
    int64_t * w;
    size_t len, cap;
};

struct lane {
    struct record last;
    struct record moved; // pairs (i, j): node i's data was pointed at node j's
    bool have_last;
    bool last_in_graph; // the lane's CUDA graph was captured from `last`
    bool last_unsafe;   // `last`'s capture moved data where no node was: launch it
    int64_t used;       // when the lane last computed (the replay's tick)
    bool busy;          // launched asynchronously and not waited for yet
    int64_t launch;     // the number of the last graph launched on it
    // seen[j]: the last launch of lane j this lane's stream was made to
    // wait for (what lane j queues later is behind a launch of its own).
    int64_t seen[GGLUA_REPLAY_LANES];
};

struct gglua_replay {
    struct lane lanes[GGLUA_REPLAY_LANES];
    struct record next;
    int64_t tick;
    int64_t done; // every launch numbered up to this one is finished
    // events[k] marks lane k's queued work for another lane to wait on;
    // settles: the host waits instead (no events); finished: each compute
    // is done when it returns (the CPU computing as a device).
    ggml_backend_event_t events[GGLUA_REPLAY_LANES];
    bool settles, finished;
    int64_t replayed, captured, launched;
    struct gglua_replay_step trace[GGLUA_REPLAY_TRACE]; // for tests: gglua_replay_trace
    int ntrace;
    bool tracing;
};

// note logs one ordering step while tracing.
static void note(struct gglua_replay * r, char op, int lane, int other, int64_t launch) {
    if (r->tracing && r->ntrace < GGLUA_REPLAY_TRACE) {
        r->trace[r->ntrace++] = (struct gglua_replay_step) {op, (int8_t) lane, (int8_t) other, launch};
    }
}

int gglua_replay_trace(struct gglua_replay * r, bool on, struct gglua_replay_step * out, int max) {
    int n = r->ntrace < max ? r->ntrace : max;
    memcpy(out, r->trace, (size_t) n * sizeof *out);
    r->ntrace = 0;
    r->tracing = on;
    return n;
}

static bool put(struct record * r, int64_t v) {
    if (r->len == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 4096;
        int64_t * w = realloc(r->w, cap * sizeof(int64_t));
        if (!w) {
            return false;
        }
        r->w = w;
        r->cap = cap;
    }
    r->w[r->len++] = v;
    return true;
}

static bool put_tensor(struct record * r, const struct ggml_tensor * t) {
    bool ok = put(r, (int64_t) (intptr_t) t->data) && put(r, t->type);
    for (int i = 0; i < GGLUA_MAX_DIMS; i++) {
        ok = ok && put(r, t->ne[i]) && put(r, (int64_t) t->nb[i]);
    }
    return ok;
}

// The bytes between a custom node's n_tasks and userdata: padding.
#define CUSTOM_PAD_AT (offsetof(struct gglua_custom_op_params, n_tasks) + sizeof(int))
#define CUSTOM_PAD_LEN (offsetof(struct gglua_custom_op_params, userdata) - CUSTOM_PAD_AT)
_Static_assert(sizeof(struct gglua_custom_op_params) <= GGLUA_MAX_OP_PARAMS, "a custom node's parameters fit op_params");

// describe writes everything about g that its kernels depend on.
static bool describe(struct record * r, struct ggml_cgraph * g) {
    r->len = 0;
    const int n = ggml_graph_n_nodes(g);
    bool ok = put(r, n);
    for (int i = 0; i < n && ok; i++) {
        const struct ggml_tensor * t = ggml_graph_node(g, i);
        ok = put_tensor(r, t) && put(r, t->op) && put(r, t->flags);
        int64_t params[GGLUA_MAX_OP_PARAMS / sizeof(int64_t)];
        memcpy(params, t->op_params, sizeof params);
        if (t->op == GGML_OP_CUSTOM) {
            // The struct's fields, not its padding: ggml copies the struct
            // whole, the bytes after n_tasks whatever its stack held, which
            // would make identical graphs differ (most steps' backward
            // graphs, with gglua's kernels, were launched node by node).
            memset((char *) params + CUSTOM_PAD_AT, 0, CUSTOM_PAD_LEN);
        }
        for (size_t k = 0; k < sizeof params / sizeof params[0]; k++) {
            ok = ok && put(r, params[k]);
        }
        for (int s = 0; s < GGLUA_MAX_SRC && ok; s++) {
            if (t->src[s]) {
                ok = put(r, s) && put_tensor(r, t->src[s]);
            }
        }
        ok = ok && put(r, -1);
    }
    return ok;
}

struct gglua_replay * gglua_replay_new(void) {
    struct gglua_replay * r = calloc(1, sizeof(struct gglua_replay));
    if (r) {
        r->settles = true;
    }
    return r;
}

bool gglua_replay_order(struct gglua_replay * r, ggml_backend_t * lanes, int n, enum gglua_lane_order order) {
    for (int k = 0; k < GGLUA_REPLAY_LANES; k++) {
        if (r->events[k]) {
            ggml_backend_event_free(r->events[k]);
            r->events[k] = NULL;
        }
    }
    r->settles = order == GGLUA_LANES_SETTLE;
    r->finished = order == GGLUA_LANES_FINISHED;
    for (int k = 0; k < n && k < GGLUA_REPLAY_LANES && order == GGLUA_LANES_EVENTS; k++) {
        r->events[k] = ggml_backend_event_new(ggml_backend_get_device(lanes[k]));
        if (!r->events[k]) {
            gglua_replay_order(r, lanes, n, GGLUA_LANES_SETTLE);
            return false;
        }
    }
    return true;
}

void gglua_replay_free(struct gglua_replay * r) {
    if (r) {
        for (int k = 0; k < GGLUA_REPLAY_LANES; k++) {
            free(r->lanes[k].last.w);
            free(r->lanes[k].moved.w);
            if (r->events[k]) {
                ggml_backend_event_free(r->events[k]);
            }
        }
        free(r->next.w);
        free(r);
    }
}

// finish records that every launch up to upto is done, and so every lane
// whose last launch is.
static void finish(struct gglua_replay * r, int64_t upto) {
    if (upto > r->done) {
        r->done = upto;
    }
    for (int k = 0; k < GGLUA_REPLAY_LANES; k++) {
        if (r->lanes[k].busy && r->lanes[k].launch <= r->done) {
            r->lanes[k].busy = false;
        }
    }
}

// sync_lane waits for lane k: its last launch, and so all before it, are
// done.
static void sync_lane(struct gglua_replay * r, ggml_backend_t * lanes, int k) {
    note(r, 'Y', k, -1, r->lanes[k].launch);
    ggml_backend_synchronize(lanes[k]);
    r->lanes[k].busy = false;
    finish(r, r->lanes[k].launch);
}

// order puts the work queued on every other busy lane before what lane k
// runs next: by the device (events), or by the host waiting for it (settle).
// (A finished lane's work is done: only the books are kept.)
static void order(struct gglua_replay * r, ggml_backend_t * lanes, int n, int k) {
    for (int j = 0; j < n; j++) {
        if (j == k || !r->lanes[j].busy || r->lanes[k].seen[j] >= r->lanes[j].launch) {
            continue;
        }
        if (r->settles) {
            sync_lane(r, lanes, j);
            continue;
        }
        r->lanes[k].seen[j] = r->lanes[j].launch;
        note(r, 'E', k, j, r->lanes[j].launch);
        if (!r->finished) {
            ggml_backend_event_record(r->events[j], lanes[j]);
            ggml_backend_event_wait(lanes[k], r->events[j]);
        }
    }
}

// run launches g on lane k after the work queued before it, numbered
// launch, and waits for it unless async.
static enum ggml_status run(struct gglua_replay * r, ggml_backend_t * lanes, int n, int k, struct ggml_cgraph * g,
                            int hint, bool async, int64_t launch) {
    order(r, lanes, n, k);
    note(r, 'L', k, -1, launch);
    enum ggml_status s = ggml_backend_graph_compute_async(lanes[k], g, hint);
    r->lanes[k].launch = launch;
    r->lanes[k].busy = true;
    if (!async || s != GGML_STATUS_SUCCESS) {
        sync_lane(r, lanes, k);
    }
    return s;
}

void gglua_replay_wait(struct gglua_replay * r, ggml_backend_t * lanes, int n) {
    for (int k = 0; k < n && k < GGLUA_REPLAY_LANES; k++) {
        if (r->lanes[k].busy) {
            sync_lane(r, lanes, k);
        }
    }
}

void gglua_replay_wait_for(struct gglua_replay * r, ggml_backend_t * lanes, int n, int64_t launch) {
    if (launch <= r->done) {
        return;
    }
    // The busy lane with the earliest last launch at or after it: that
    // launch came after it (on its lane, or ordered behind it).
    int best = -1;
    for (int k = 0; k < n && k < GGLUA_REPLAY_LANES; k++) {
        const struct lane * l = &r->lanes[k];
        if (l->busy && l->launch >= launch && (best < 0 || l->launch < r->lanes[best].launch)) {
            best = k;
        }
    }
    if (best < 0) { // not launched (a graph of views only): wait for everything
        gglua_replay_wait(r, lanes, n);
        return;
    }
    sync_lane(r, lanes, best);
}

int64_t gglua_replay_done(const struct gglua_replay * r) { return r->done; }

// newest is the busy lane launched last (behind all queued work), or -1.
static int newest(const struct gglua_replay * r, int n) {
    int best = -1;
    for (int k = 0; k < n && k < GGLUA_REPLAY_LANES; k++) {
        if (r->lanes[k].busy && (best < 0 || r->lanes[k].launch > r->lanes[best].launch)) {
            best = k;
        }
    }
    return best;
}

bool gglua_replay_get_async(struct gglua_replay * r, ggml_backend_t * lanes, int n, const struct ggml_tensor * t,
                            void * dst, size_t size) {
    const int k = newest(r, n);
    if (k >= 0) {
        note(r, 'G', k, -1, r->lanes[k].launch);
        ggml_backend_tensor_get_async(lanes[k], t, dst, 0, size);
    }
    return k >= 0;
}

int64_t gglua_replay_set_async(struct gglua_replay * r, ggml_backend_t * lanes, int n, struct ggml_tensor * t,
                               const void * src, size_t size) {
    const int k = newest(r, n);
    if (k < 0 || r->settles) { // the host orders the lanes: it defers its writes too
        return 0;
    }
    note(r, 'S', k, -1, r->lanes[k].launch);
    ggml_backend_tensor_set_async(lanes[k], t, src, 0, size);
    return r->lanes[k].launch;
}

int gglua_replay_busy(const struct gglua_replay * r) {
    int mask = 0;
    for (int k = 0; k < GGLUA_REPLAY_LANES; k++) {
        if (r->lanes[k].busy) {
            mask |= 1 << k;
        }
    }
    return mask;
}

// computes reports whether g has a node ggml computes (not only views).
static bool computes(struct ggml_cgraph * g) {
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
        switch (ggml_graph_node(g, i)->op) {
            case GGML_OP_NONE: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
                break;
            default:
                return true;
        }
    }
    return false;
}

// capture computes g on lane k as a CUDA graph to be replayed,
// recording the nodes whose data ggml pointed elsewhere; false when one
// cannot be matched to another node (the graph is then never replayed).
static enum ggml_status capture(struct gglua_replay * r, ggml_backend_t * lanes, int nlanes, int k, struct ggml_cgraph * g,
                               bool async, int64_t launch, bool * replayable) {
    struct lane * l = &r->lanes[k];
    const int n = ggml_graph_n_nodes(g);
    void ** before = malloc((size_t) (n > 0 ? n : 1) * sizeof(void *));
    *replayable = before != NULL;
    if (!before) {
        return run(r, lanes, nlanes, k, g, HINT_LAUNCH, async, launch);
    }
    for (int i = 0; i < n; i++) {
        before[i] = ggml_graph_node(g, i)->data;
    }
    enum ggml_status s = run(r, lanes, nlanes, k, g, HINT_GRAPH, async, launch);
    l->moved.len = 0;
    for (int i = 0; i < n && *replayable; i++) {
        void * now = ggml_graph_node(g, i)->data;
        if (now == before[i]) {
            continue;
        }
        int j = 0;
        while (j < n && (j == i || before[j] != now)) {
            j++;
        }
        *replayable = j < n && put(&l->moved, i) && put(&l->moved, j);
    }
    free(before);
    return s;
}

static bool same_record(const struct record * a, const struct record * b) {
    return a->len == b->len && memcmp(a->w, b->w, a->len * sizeof(int64_t)) == 0;
}

// pick is the lane whose last graph is r->next, else the least recently
// used one (*same says which).
static int pick(struct gglua_replay * r, int n, bool * same) {
    int oldest = 0;
    for (int k = 0; k < n; k++) {
        struct lane * l = &r->lanes[k];
        if (l->have_last && same_record(&l->last, &r->next)) {
            *same = true;
            return k;
        }
        if (l->used < r->lanes[oldest].used) {
            oldest = k;
        }
    }
    *same = false;
    return oldest;
}

enum ggml_status gglua_replay_compute(struct gglua_replay * r, ggml_backend_t * lanes, int n,
                                      struct ggml_cgraph * g, struct ggml_cgraph * scratch, bool enabled, bool async,
                                      int64_t launch) {
    if (!computes(g)) { // ggml-cuda would capture an empty graph, even told not to
        return GGML_STATUS_SUCCESS;
    }
    if (n > GGLUA_REPLAY_LANES) {
        n = GGLUA_REPLAY_LANES;
    }
    if (!enabled || !describe(&r->next, g)) {
        r->lanes[0].have_last = r->lanes[0].last_in_graph = r->lanes[0].last_unsafe = false;
        r->lanes[0].used = ++r->tick;
        r->launched++;
        return run(r, lanes, n, 0, g, HINT_LAUNCH, async, launch);
    }
    bool same;
    const int k = pick(r, n, &same);
    struct lane * l = &r->lanes[k];
    struct record t = l->last;
    l->last = r->next;
    r->next = t;
    l->have_last = true;
    l->used = ++r->tick;
    if (same && l->last_in_graph) {
        r->replayed++;
        enum ggml_status s = run(r, lanes, n, k, g, HINT_GRAPH, async, launch);
        for (size_t i = 0; i + 1 < l->moved.len; i += 2) {
            ggml_graph_node(g, (int) l->moved.w[i])->data = ggml_graph_node(g, (int) l->moved.w[i + 1])->data;
        }
        return s;
    }
    if (same && !l->last_unsafe) {
        enum ggml_status s = run(r, lanes, n, k, scratch, HINT_LAUNCH, async, launch);
        if (s != GGML_STATUS_SUCCESS) {
            l->last_in_graph = false;
            return s;
        }
        r->captured++;
        bool replayable;
        s = capture(r, lanes, n, k, g, async, launch, &replayable);
        l->last_in_graph = replayable;
        l->last_unsafe = !replayable;
        return s;
    }
    if (!same) {
        l->last_unsafe = false;
    }
    l->last_in_graph = false;
    r->launched++;
    return run(r, lanes, n, k, g, HINT_LAUNCH, async, launch);
}

void gglua_replay_counts(const struct gglua_replay * r, int64_t * replayed, int64_t * captured, int64_t * launched) {
    *replayed = r->replayed;
    *captured = r->captured;
    *launched = r->launched;
}
