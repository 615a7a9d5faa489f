package ggmlcgo

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// GGLUA_SLOW_COMPUTE_MS=N reports on stderr each compute whose call held
// the host for over N ms, split into the wait before it (for the device:
// a write to land, another backend's work) and the launch itself, with
// how the graph ran (replayed from a CUDA graph, captured, or launched
// node by node) and its size; and each wait for a device's queued graphs
// over N ms, with how the graphs waited for ran. It finds the rare slow
// step of a long run (docs/GPU.md); off by default, it costs a few clock
// reads a compute when on.
var slowCompute = slowComputeFrom(os.Getenv("GGLUA_SLOW_COMPUTE_MS"))

// slowComputeOut is where the reports go (a test's buffer).
var slowComputeOut io.Writer = os.Stderr

func slowComputeFrom(v string) time.Duration {
	ms, err := strconv.ParseFloat(v, 64)
	if err != nil || !(ms > 0) || ms > 1e9 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// computeClock times one compute for GGLUA_SLOW_COMPUTE_MS.
type computeClock struct {
	start, launch time.Time
	before        ReplayCounts
}

// launching marks the end of the waits (b.mu held).
func (c *computeClock) launching(b *Backend) {
	c.launch = time.Now()
	c.before = b.replayCountsLocked()
}

// done notes how the compute ran and reports it if it was slow (b.mu
// held).
func (c *computeClock) done(b *Backend, g *Graph) {
	after := b.replayCountsLocked()
	how := "computed"
	switch {
	case after.Replayed > c.before.Replayed:
		how = "replayed"
	case after.Captured > c.before.Captured:
		how = "captured"
	case after.Launched > c.before.Launched:
		how = "launched"
	}
	b.ran[b.launches%int64(len(b.ran))] = how
	took := time.Since(c.start)
	if took <= slowCompute {
		return
	}
	fmt.Fprintf(slowComputeOut, "gglua: slow compute %d: %.1f ms (waiting %.1f ms, then %s in %.1f ms), %d nodes\n",
		b.launches, ms(took), ms(c.launch.Sub(c.start)), how, ms(time.Since(c.launch)), g.NNodes())
}

// reportSlowCall reports a buffer's allocation or release (what) of size
// bytes that began at started, if it was slow. (Device memory is one place
// a host may block unseen: cudaFree waits for the whole device.)
func reportSlowCall(what string, size int64, started time.Time) {
	if slowCompute > 0 {
		if took := time.Since(started); took > slowCompute {
			fmt.Fprintf(slowComputeOut, "gglua: slow buffer: %.1f ms %s %d bytes\n", ms(took), what, size)
		}
	}
}

// launchLog is how each of the last launches ran, by launch number.
type launchLog [16]string

// reportSlowWait reports a wait for the device that began at started, for
// the graphs after launch done up to launch upTo, if it was slow (b.mu
// held).
func (b *Backend) reportSlowWait(started time.Time, done, upTo int64) {
	took := time.Since(started)
	if took <= slowCompute {
		return
	}
	var ran []string
	for l := max(done+1, b.launches-int64(len(b.ran))+1); l <= upTo; l++ { // the log keeps the last launches
		ran = append(ran, fmt.Sprintf("%d %s", l, b.ran[l%int64(len(b.ran))]))
	}
	fmt.Fprintf(slowComputeOut, "gglua: slow wait: %.1f ms for the device's graphs %v\n", ms(took), ran)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
