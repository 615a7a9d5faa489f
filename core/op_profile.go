package core

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/gglua/gglua/ggmlcgo"
)

// An op profile (GGLUA_OPPROFILE=1): every graph computes one node at a
// time, each timed (ggmlcgo.ComputeEach), and at Close the engine writes to
// stderr where the time went, by op and output shape, largest first. It is
// how gglua's GPU steps were profiled: per-kernel tools replay each kernel
// and took minutes for one transformer step. Steps run slower under it (a
// wait after every node), so it measures shares, not speed. The table is
// written when the engine closes: at the end of a script (normal or with an
// error, not os.exit), and for the old engine when device.use switches.

type opProfile struct {
	byKey  map[string]*opCost
	total  time.Duration
	graphs int
	device string
}

type opCost struct {
	op, shape string
	count     int
	took      time.Duration
}

func newOpProfile() *opProfile {
	if os.Getenv("GGLUA_OPPROFILE") != "1" {
		return nil
	}
	return &opProfile{byKey: map[string]*opCost{}}
}

// compute runs g node by node, adding each node's time to the profile.
func (p *opProfile) compute(ctx context.Context, b *ggmlcgo.Backend, g *ggmlcgo.Graph) error {
	p.graphs++
	p.device = b.Name()
	return b.ComputeEach(ctx, g, func(n ggmlcgo.Tensor, took time.Duration) {
		ne := n.Ne()
		shape := fmt.Sprintf("%dx%dx%dx%d", ne[0], ne[1], ne[2], ne[3])
		op := n.OpName()
		if name := n.Name(); op == "CUSTOM" && name != "" {
			op += "(" + name + ")" // gglua's CPU kernels: gemm, transpose, pad, ...
		}
		key := op + " " + shape
		c := p.byKey[key]
		if c == nil {
			c = &opCost{op: op, shape: shape}
			p.byKey[key] = c
		}
		c.count++
		c.took += took
		p.total += took
	})
}

// write prints the profile: the ops by total time, then the top rows by op
// and shape (ggml's order of dims, innermost first).
func (p *opProfile) write(w io.Writer, top int) {
	if p == nil || p.graphs == 0 {
		return
	}
	byOp := map[string]*opCost{}
	for _, c := range p.byKey {
		o := byOp[c.op]
		if o == nil {
			o = &opCost{op: c.op}
			byOp[c.op] = o
		}
		o.count += c.count
		o.took += c.took
	}
	fmt.Fprintf(w, "gglua op profile (%s): %d graphs, %.1f ms in nodes\n", p.device, p.graphs, millis(p.total))
	fmt.Fprintf(w, "%10s %6s %8s  %s\n", "ms", "%", "nodes", "op")
	for _, c := range byTime(byOp, 0) {
		fmt.Fprintf(w, "%10.2f %6.1f %8d  %s\n", millis(c.took), 100*float64(c.took)/float64(p.total), c.count, c.op)
	}
	fmt.Fprintf(w, "%10s %6s %8s  %s\n", "ms", "%", "nodes", "op and shape")
	for _, c := range byTime(p.byKey, top) {
		fmt.Fprintf(w, "%10.2f %6.1f %8d  %s %s\n", millis(c.took), 100*float64(c.took)/float64(p.total), c.count, c.op, c.shape)
	}
}

func byTime(m map[string]*opCost, top int) []*opCost {
	out := make([]*opCost, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].took > out[j].took })
	if top > 0 && len(out) > top {
		out = out[:top]
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d) / 1e6 }
