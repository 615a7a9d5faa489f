package runtime

import (
	goruntime "runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// The heap watchdog: while a call with a HeapLimit runs, one goroutine of
// the process samples the Go heap every sampleEvery (runtime/metrics, which
// does not stop the world) and ends the calls that grew it past their
// limit, counting from where it stood when the call began:
//   - the live heap that the last garbage collection found: once it has
//     grown by more than the limit, the call ends;
//   - the heap as it is, live or not yet collected: once it has grown by
//     more than the limit, the watchdog collects (runtime.GC), since much
//     of it may be garbage, and the call ends if it is still over; and it
//     ends at once when it has grown by more than the limit times
//     1 + GOGC/100 (at least 2), which garbage alone does not reach: a
//     collection must stop the world, which waits for the instruction
//     running (a copy of a gigabyte string), and the next one would
//     double the heap again.
//
// The heap is the process's: every goroutine's allocations count, those
// of other runtimes running at the same time included.

// sampleEvery is how often the watchdog samples the heap.
const sampleEvery = 5 * time.Millisecond

// heapWatch is one running call's limit.
type heapWatch struct {
	base, baseLive, limit int64
	next                  int64 // the heap size that makes the watchdog collect and look again
	certain               int64 // the heap size that ends the call at once (0: none)
	trip                  func()
}

var watchdog struct {
	mu      sync.Mutex
	watches map[*heapWatch]struct{}
	running bool
}

// heapSample reads the bytes of heap objects (live or not yet collected)
// and of the live heap that the last collection marked.
func heapSample() (heap, live int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return sampleInt(s[0]), sampleInt(s[1])
}

func sampleInt(s metrics.Sample) int64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s.Value.Uint64())
}

// garbageFactor is how many times its live heap the Go heap may hold with
// the garbage not yet collected (1 + GOGC/100, at least 2), or 0 if
// collection is off (GOGC=off: only a memory limit starts it).
func garbageFactor() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	gogc := sampleInt(s[0])
	if gogc <= 0 {
		return 0
	}
	return 1 + max(gogc, 100)/100
}

// over reports whether the heap grew past w's limit.
func (w *heapWatch) over(heap, live int64) bool {
	return heap-w.base > w.limit || live-w.baseLive > w.limit
}

// watchHeap calls trip (once) if the Go heap grows more than limit bytes
// above its size now, until stop is called.
func watchHeap(limit int64, trip func()) (stop func()) {
	heap, live := heapSample()
	w := &heapWatch{base: heap, baseLive: live, limit: limit, next: heap + limit, trip: trip}
	if f := garbageFactor(); f > 0 {
		w.certain = heap + f*limit
	}
	watchdog.mu.Lock()
	if watchdog.watches == nil {
		watchdog.watches = map[*heapWatch]struct{}{}
	}
	watchdog.watches[w] = struct{}{}
	if !watchdog.running {
		watchdog.running = true
		go watch()
	}
	watchdog.mu.Unlock()
	return func() {
		watchdog.mu.Lock()
		delete(watchdog.watches, w)
		watchdog.mu.Unlock()
	}
}

// collect is the collection the watchdog asks for (a variable so that a
// test can make one that does not end; set under watchdog.mu).
var collect = goruntime.GC

// watch samples the heap while there are calls to watch. A collection it
// asks for runs on a goroutine of its own while the sampling goes on: it
// cannot end while the script's goroutine is inside one long copy (a
// concatenation of hundreds of megabytes, slower still where page faults
// are dear), and meanwhile the heap may pass a limit's certain size,
// which must end the call before the copy after it begins.
func watch() {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	var collected chan []*heapWatch // while a collection runs: the watches to judge after it
	for {
		var judge []*heapWatch
		select {
		case <-tick.C:
		case judge = <-collected:
			collected = nil
		}
		heap, live := heapSample()
		var check []*heapWatch
		watchdog.mu.Lock()
		if len(watchdog.watches) == 0 {
			// A collection still running sends into its buffer and ends.
			watchdog.running = false
			watchdog.mu.Unlock()
			return
		}
		for _, w := range judge {
			if _, ok := watchdog.watches[w]; !ok {
				continue
			}
			if w.over(heap, live) {
				delete(watchdog.watches, w)
				w.trip()
			} else {
				// Collect again only once the heap has grown by an eighth of
				// the limit more, so that a call that stays just under its
				// limit does not make the watchdog collect at every sample.
				w.next = max(w.base+w.limit, heap+w.limit/8)
			}
		}
		for w := range watchdog.watches {
			switch {
			case live-w.baseLive > w.limit, w.certain > 0 && heap > w.certain:
				delete(watchdog.watches, w)
				w.trip()
			case heap > w.next && collected == nil:
				check = append(check, w)
			}
		}
		gc := collect // read under the lock a test sets it under
		watchdog.mu.Unlock()
		if len(check) > 0 { // much of what is over may be garbage
			collected = make(chan []*heapWatch, 1)
			go func(done chan<- []*heapWatch) {
				gc()
				done <- check
			}(collected)
		}
	}
}
