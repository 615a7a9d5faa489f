package runtime

import (
	goruntime "runtime"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// collectgarbage is Lua 5.1's over Go's collector, which holds every
// runtime's objects (and the tensors whose memory a collection frees):
// "collect" (the default) runs a full collection and returns 0; "count"
// returns the Go heap in use in KiB (gopher-lua's returned nothing);
// "step" collects and returns true; "stop", "restart", "setpause" and
// "setstepmul" are accepted and change nothing (Go's collector has no such
// knobs: they return 0). Another option is an error, as in Lua 5.1.
//
// A full collection is the host process's (~0.4 s on a large heap), so in
// a sandbox a script cannot make them more than a tenth of the time: a
// collection asked for sooner than nine times the last one's length after
// it ended is skipped.
type collector struct {
	sandbox bool
}

// gcPace is the host's last forced collection: when it ended, and how long
// it took (shared by every runtime: the heap is one).
var gcPace struct {
	sync.Mutex
	end  time.Time
	took time.Duration
}

func installCollectGarbage(L *lua.LState, sandbox bool) {
	c := &collector{sandbox: sandbox}
	L.SetGlobal("collectgarbage", L.NewFunction(c.call))
}

func (c *collector) call(L *lua.LState) int {
	switch opt := L.OptString(1, "collect"); opt {
	case "collect":
		c.collect()
		L.Push(lua.LNumber(0))
	case "step":
		c.collect()
		L.Push(lua.LTrue)
	case "count":
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		L.Push(lua.LNumber(float64(ms.HeapAlloc) / 1024))
	case "stop", "restart", "setpause", "setstepmul":
		L.Push(lua.LNumber(0))
	default:
		L.ArgError(1, "invalid option '"+opt+"'")
	}
	return 1
}

// collect runs a full collection, paced in a sandbox.
func (c *collector) collect() {
	gcPace.Lock()
	defer gcPace.Unlock()
	if c.sandbox && tooSoon(time.Now(), gcPace.end, gcPace.took) {
		return
	}
	start := time.Now()
	goruntime.GC()
	gcPace.end = time.Now()
	gcPace.took = gcPace.end.Sub(start)
}

// tooSoon reports whether a collection at now, after one that took took
// and ended at end, would make collections more than a tenth of the time.
func tooSoon(now, end time.Time, took time.Duration) bool { return now.Sub(end) < 9*took }
