package runtime

import (
	goruntime "runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var sink [][]byte

// TestWatchdogTellsGarbageFromGrowth: a call that keeps what it allocates
// trips the watchdog soon after it passes its limit; one that allocates
// ten times its limit in garbage, keeping little, does not.
func TestWatchdogTellsGarbageFromGrowth(t *testing.T) {
	const limit = 64 << 20
	var tripped atomic.Bool
	stop := watchHeap(limit, func() { tripped.Store(true) })
	for i := 0; i < 10*limit/(1<<20) && !tripped.Load(); i++ {
		b := make([]byte, 1<<20)
		b[0] = byte(i)
		sink = append(sink[:0], b) // one MiB kept at a time
		time.Sleep(100 * time.Microsecond)
	}
	stop()
	assert.False(t, tripped.Load(), "garbage is not growth")

	tripped.Store(false)
	stop = watchHeap(limit, func() { tripped.Store(true) })
	defer stop()
	start := time.Now()
	for i := 0; i < 4*limit/(1<<20) && !tripped.Load(); i++ {
		sink = append(sink, make([]byte, 1<<20)) // all kept
		time.Sleep(100 * time.Microsecond)
	}
	deadline := time.Now().Add(time.Second)
	for !tripped.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.True(t, tripped.Load(), "growth past the limit trips, %v after it began", time.Since(start))
	assert.Less(t, int64(len(sink))<<20, int64(3*limit), "it trips soon after the limit")
	sink = nil
}

// TestHeapLimitDefaults: a sandbox watches the heap (2 GiB by default),
// a runtime outside one does not unless asked; a negative limit is none.
func TestHeapLimitDefaults(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want int64
	}{
		{Options{Sandbox: true}, 2 << 30},
		{Options{Sandbox: true, HeapLimit: 1 << 20}, 1 << 20},
		{Options{Sandbox: true, HeapLimit: -1}, 0},
		{Options{}, 0},
		{Options{HeapLimit: 1 << 20}, 1 << 20},
	} {
		c.opts.Threads = 1
		rt, err := New(c.opts)
		if !assert.NoError(t, err) {
			continue
		}
		assert.Equal(t, c.want, rt.heapLimit, "%+v", c.opts)
		rt.Close()
	}
}

// TestWatchdogSamplesWhileItCollects: a collection the watchdog asks for
// may not end while the script copies one huge string; the heap passing
// the limit's certain size meanwhile still trips it.
func TestWatchdogSamplesWhileItCollects(t *testing.T) {
	// The heap starts without garbage (earlier tests' garbage, collected
	// by a cycle the big allocation starts, left the heap short of
	// base + limit: CI saw no collection asked for), and then no
	// collection of the runtime's own before the watchdog's: one would
	// find the first allocation live and trip at once.
	goruntime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(1000))
	const limit = 16 << 20
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	setCollect(func() {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
	})
	defer setCollect(goruntime.GC)
	defer close(release)

	var tripped atomic.Bool
	stop := watchHeap(limit, func() { tripped.Store(true) })
	defer stop()
	sink = append(sink, make([]byte, limit+limit/2)) // over the limit: the watchdog collects
	select {
	case <-asked:
	case <-time.After(time.Second):
		t.Fatal("the watchdog did not collect when the heap passed its limit")
	}
	assert.False(t, tripped.Load(), "not over for certain yet")
	sink = append(sink, make([]byte, garbageFactor()*limit)) // past limit × (1 + GOGC/100) while the collection hangs
	deadline := time.Now().Add(time.Second)
	for !tripped.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.True(t, tripped.Load(), "the certain size trips during a collection")
	sink = nil
}

// setCollect sets the watchdog's collection, under its lock (a collection
// an earlier test's watchdog started may still be reading it).
func setCollect(f func()) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	collect = f
}
