package ggmlcgo

/*
#include "gglua_ggml.h"

// A step's graph has thousands of nodes: what Go reads of all of them it
// reads in one cgo call.
static void gglua_graph_nodes(struct ggml_cgraph * g, struct ggml_tensor ** out, int n) {
    for (int i = 0; i < n; i++) {
        out[i] = ggml_graph_node(g, i);
    }
}

// gglua_graph_check finds, before anything runs, what a backend would abort
// on: a node or a node's input without memory (1), a node the backend
// cannot compute (2; asked only when ask_backend). *node is the node's
// index, *src the input's (-1: the node itself).
static int gglua_graph_check(ggml_backend_t b, struct ggml_cgraph * g, bool ask_backend, int * node, int * src) {
    for (int i = 0, n = ggml_graph_n_nodes(g); i < n; i++) {
        struct ggml_tensor * t = ggml_graph_node(g, i);
        *node = i;
        *src = -1;
        if (t->buffer == NULL) {
            return 1;
        }
        for (int s = 0; s < GGLUA_MAX_SRC; s++) {
            if (t->src[s] != NULL && t->src[s]->buffer == NULL) {
                *src = s;
                return 1;
            }
        }
        if (ask_backend && !ggml_backend_supports_op(b, t)) {
            return 2;
        }
    }
    return 0;
}

// gglua_graph_guard_inplace keeps ggml's graph allocator from computing
// rms_norm_back or soft_max_back into the memory of an input: the allocator
// lists both as safe in place, but ggml's CPU kernels copy one input into
// the result before they read the other (rms_norm_back's dz, soft_max_back's
// y). An input marked as an output is never reused, and kept to the graph's
// end. Only inputs the allocator would place are marked.
static void gglua_graph_guard_inplace(struct ggml_cgraph * g) {
    for (int i = 0, n = ggml_graph_n_nodes(g); i < n; i++) {
        struct ggml_tensor * t = ggml_graph_node(g, i);
        if (t->op != GGML_OP_RMS_NORM_BACK && t->op != GGML_OP_SOFT_MAX_BACK) {
            continue;
        }
        for (int s = 0; s < 2; s++) {
            struct ggml_tensor * in = t->src[s];
            if (in != NULL && in->data == NULL && in->buffer == NULL) {
                ggml_set_output(in);
            }
        }
    }
}

static int64_t gglua_graph_work(struct ggml_cgraph * g) {
    int64_t w = 0;
    for (int i = 0, n = ggml_graph_n_nodes(g); i < n; i++) {
        w += ggml_nelements(ggml_graph_node(g, i));
    }
    return w;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Graph is a ggml compute graph. It lives in the Context that made it.
type Graph struct {
	p    *C.struct_ggml_cgraph
	size int
	// seen mirrors ggml's visited set so that Expand can refuse a graph that
	// would outgrow its size before ggml asserts on it.
	seen map[*C.struct_ggml_tensor]struct{}
}

// NewGraph makes a graph of at most size nodes (and size leaves) in c.
func (c *Context) NewGraph(size int) (*Graph, error) {
	if c == nil || c.p == nil {
		return nil, errors.New("ggml graph: context used after free")
	}
	if size < 1 || size > 1<<24 {
		return nil, fmt.Errorf("ggml graph: bad size %d", size)
	}
	if c.free() < C.ggml_graph_overhead_custom(C.size_t(size), false) {
		return nil, fmt.Errorf("ggml graph: context has no room for a graph of %d nodes", size)
	}
	p := C.ggml_new_graph_custom(c.p, C.size_t(size), false)
	return &Graph{p: p, size: size, seen: map[*C.struct_ggml_tensor]struct{}{}}, nil
}

// Expand adds t and every tensor it depends on that the graph lacks.
func (g *Graph) Expand(t Tensor) error {
	if t.p == nil {
		return errors.New("ggml graph: expand of a nil tensor")
	}
	var fresh []*C.struct_ggml_tensor
	pending := map[*C.struct_ggml_tensor]struct{}{}
	stack := []*C.struct_ggml_tensor{t.p}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := g.seen[n]; ok {
			continue
		}
		if _, ok := pending[n]; ok {
			continue
		}
		pending[n] = struct{}{}
		fresh = append(fresh, n)
		for _, s := range n.src {
			if s != nil {
				stack = append(stack, s)
			}
		}
	}
	if len(g.seen)+len(fresh) > g.size {
		return fmt.Errorf("ggml graph: %d tensors do not fit a graph of %d", len(g.seen)+len(fresh), g.size)
	}
	for _, n := range fresh {
		g.seen[n] = struct{}{}
	}
	C.ggml_build_forward_expand(g.p, t.p)
	return nil
}

// GuardInPlace marks the inputs of the nodes ggml's CPU kernels compute
// wrongly in place, so that a graph allocator (Gallocr) never reuses them
// for the node itself.
func (g *Graph) GuardInPlace() { C.gglua_graph_guard_inplace(g.p) }

// Work is the number of elements the graph's nodes produce: a cheap measure
// of how much there is to split across threads.
func (g *Graph) Work() int64 { return int64(C.gglua_graph_work(g.p)) }

// NNodes is the number of computed nodes (leaves excluded).
func (g *Graph) NNodes() int { return int(C.ggml_graph_n_nodes(g.p)) }

func statusError(op string, s C.enum_ggml_status) error {
	if s == C.GGML_STATUS_SUCCESS {
		return nil
	}
	if s == C.GGML_STATUS_ABORTED {
		return ErrAborted
	}
	return fmt.Errorf("%s: %s", op, C.GoString(C.ggml_status_to_string(s)))
}

// ErrAborted is returned by a compute that its abort callback stopped.
var ErrAborted = errors.New("ggml compute aborted")

// Nodes lists the graph's computed nodes in execution order.
func (g *Graph) Nodes() []Tensor {
	n := g.NNodes()
	out := make([]Tensor, n)
	if n > 0 { // a Tensor is one C pointer: the slice is an array of them
		C.gglua_graph_nodes(g.p, &out[0].p, C.int(n))
	}
	return out
}

// A Tensor must stay exactly its C pointer (Nodes relies on it): this
// fails to compile otherwise.
var _ = [1]struct{}{}[unsafe.Sizeof(Tensor{})-unsafe.Sizeof(uintptr(0))]

// GraphOf builds the graph that computes roots, in a context of its own
// (free it once the graph ran), sized for the tensors roots reach: one walk
// of them finds the size and stands for Expand's check, then ggml expands
// each root. (Expand on every root walked each root's new ancestry again
// and made a set for each: a fifth of a small step's host time.)
func GraphOf(roots []Tensor) (*Graph, *Context, error) {
	for _, r := range roots {
		if r.p == nil {
			return nil, nil, errors.New("ggml graph: expand of a nil tensor")
		}
	}
	seen := reachable(roots)
	size := len(seen) + 8
	c, err := NewContext(0, size)
	if err != nil {
		return nil, nil, err
	}
	g, err := c.NewGraph(size)
	if err != nil {
		c.Free()
		return nil, nil, err
	}
	g.seen = seen
	for _, r := range roots {
		C.ggml_build_forward_expand(g.p, r.p)
	}
	return g, c, nil
}

// reachable is the set of tensors roots depend on, themselves included.
func reachable(roots []Tensor) map[*C.struct_ggml_tensor]struct{} {
	seen := map[*C.struct_ggml_tensor]struct{}{}
	var stack []*C.struct_ggml_tensor
	for _, r := range roots {
		if r.p != nil {
			stack = append(stack, r.p)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := seen[n]; ok {
			continue
		}
		seen[n] = struct{}{}
		for _, s := range n.src {
			if s != nil {
				stack = append(stack, s)
			}
		}
	}
	return seen
}

// checkGraph refuses, before anything runs, a graph the backend would abort
// on: a tensor without memory, an op the backend lacks (a device backend
// that meets one aborts the process: it is asked first). One cgo call.
func (b *Backend) checkGraph(g *Graph) error {
	if b == nil || b.p == nil {
		return errors.New("compute: backend is closed")
	}
	if g == nil || g.p == nil {
		return errors.New("compute: nil graph")
	}
	var node, src C.int
	switch C.gglua_graph_check(b.p, g.p, C.bool(!b.IsCPU()), &node, &src) {
	case 1:
		t := Tensor{p: C.ggml_graph_node(g.p, node)}
		if src >= 0 {
			t = Tensor{p: t.p.src[src]}
		}
		return fmt.Errorf("compute: tensor %q has no memory", t.Name())
	case 2:
		n := Tensor{p: C.ggml_graph_node(g.p, node)}
		return fmt.Errorf("compute: %s cannot run %s on ne %v (%v)", b.name, C.GoString(C.ggml_op_desc(n.p)), n.Ne(), n.Type())
	}
	return nil
}
