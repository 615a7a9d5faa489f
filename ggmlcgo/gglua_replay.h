// gglua_replay.h - when a device backend may replay a step as a CUDA graph.
#ifndef GGLUA_REPLAY_H
#define GGLUA_REPLAY_H
#include "gglua_ggml.h"

// gglua_replay remembers the last graph a device backend computed, node by
// node, and whether ggml-cuda's captured CUDA graph was made from it.
struct gglua_replay;

struct gglua_replay * gglua_replay_new(void);
void gglua_replay_free(struct gglua_replay * r);

// gglua_replay_compute runs g on backend b (and waits for it): replayed
// from the captured CUDA graph when g is identical to the graph computed
// just before it, which was itself captured; captured when g repeats the
// graph just before it; launched node by node otherwise. scratch is a
// one-node graph of the backend's memory, computed to make ggml capture
// afresh. enabled = false launches every graph node by node.
enum ggml_status gglua_replay_compute(struct gglua_replay * r, ggml_backend_t b,
                                      struct ggml_cgraph * g, struct ggml_cgraph * scratch, bool enabled);

// gglua_replay_counts reads how many computes were replayed, captured and
// launched node by node.
void gglua_replay_counts(const struct gglua_replay * r, int64_t * replayed, int64_t * captured, int64_t * launched);

#endif
