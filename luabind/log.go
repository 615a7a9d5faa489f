package luabind

import (
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runlog"
)

// The log library records scalar metrics in a run folder (package runlog):
// runs/<run>/metrics.jsonl and a TensorBoard event file.
//
//	log.run([name [, {dir="runs"}]])  opens the run dir/name and returns its folder
//	log.scalar(name, value [, step])  records a value; the first opens a default run
//	log.flush(), log.close()
//
// An unnamed run is named after the script and the time,
// runs/train-20250131-142501. Without a step, a name's values are numbered
// on from its last step: 1, 2, 3, ... A progress bar's set{loss=...} feeds
// the open run (feedBar). A sandboxed runtime refuses log.run and
// log.scalar: they would write files.

// defaultRunsDir is the folder runs go in, TensorBoard's and PyTorch's
// SummaryWriter's convention (`tensorboard --logdir runs`).
const defaultRunsDir = "runs"

// logState is one Lua state's run log.
type logState struct {
	run  *runlog.Run
	last map[string]int64 // per tag, the last step written (default steps count on from it)
	// barEnd is the run step where the latest progress bar's points ended, so
	// that the next bar (the next epoch's) continues the curve.
	barEnd int64
}

// logStates holds each Lua state's run log, by its Global (shared by its
// coroutines); closeLog closes it when the state is detached.
var logStates sync.Map // *lua.Global -> *logState

func logOf(L *lua.LState) *logState {
	v, _ := logStates.LoadOrStore(L.G, &logState{})
	return v.(*logState)
}

func openLog(L *lua.LState, env *Env) {
	L.SetGlobal("log", L.SetFuncs(L.NewTable(), functions("log.", map[string]lua.LGFunction{
		"close":  logClose,
		"flush":  logFlush,
		"run":    env.logRun,
		"scalar": env.logScalar,
	})))
}

// closeLog writes and closes L's open run, if any: the runtime's Close
// reaches it through Detach, so a script's last values are on disk when
// the host closes the runtime, even if the script never called log.close.
func closeLog(L *lua.LState) {
	if v, ok := logStates.LoadAndDelete(L.G); ok {
		if s := v.(*logState); s.run != nil {
			s.run.Close() // the state is going away: nobody is left to tell
		}
	}
}

// refuseInSandbox stops fn in a sandboxed runtime, which may not write files.
func (env *Env) refuseInSandbox(L *lua.LState, fn string) {
	if env.Sandbox {
		argError(L, fn, "writing files is not allowed in a sandboxed runtime (the run log writes runs/<run>/)")
	}
}

// log.run([name [, {dir="runs"}]]) closes the open run, if any, and opens
// dir/name; an existing folder is appended to. Returns the folder.
func (env *Env) logRun(L *lua.LState) int {
	env.refuseInSandbox(L, "log.run")
	opts := readOpts(L, "log.run", 2)
	dir := opts.str("dir", defaultRunsDir)
	opts.done()
	var path string
	switch v := L.Get(1).(type) {
	case *lua.LNilType:
		path = runlog.FreshDir(dir, runlog.DefaultName(scriptName(L), time.Now()))
	case lua.LString:
		name := string(v)
		if name == "" || filepath.IsAbs(name) || strings.Contains("/"+filepath.ToSlash(name)+"/", "/../") {
			argError(L, "log.run", "argument 1: a run name is a relative folder name such as \"exp1\" (without ..), got %q; put runs elsewhere with {dir=...}", name)
		}
		path = filepath.Join(dir, name)
	default:
		argError(L, "log.run", "argument 1: expected a run name (a string) or nil, got %s", luaTypeName(v))
	}
	s := logOf(L)
	s.open(L, "log.run", path)
	L.Push(lua.LString(s.run.Dir()))
	return 1
}

// open replaces s's run with a new one at path.
func (s *logState) open(L *lua.LState, fn, path string) {
	if s.run != nil {
		err := s.run.Close()
		s.run = nil
		if err != nil {
			argError(L, fn, "closing the previous run: %v", err)
		}
	}
	r, err := runlog.Open(path)
	if err != nil {
		argError(L, fn, "cannot open the run %s: %v", path, err)
	}
	*s = logState{run: r, last: map[string]int64{}}
}

// scriptName is the running script's path (arg[0]), or "" in a REPL or -e.
func scriptName(L *lua.LState) string {
	if arg, ok := L.GetGlobal("arg").(*lua.LTable); ok {
		if s, ok := arg.RawGet(lua.LNumber(0)).(lua.LString); ok {
			return string(s)
		}
	}
	return ""
}

// log.scalar(name, value [, step]): value a number or a one-element
// tensor, step a whole number >= 0 (default: the name's last step + 1,
// starting at 1). With no run open, it opens one with a default name.
func (env *Env) logScalar(L *lua.LState) int {
	env.refuseInSandbox(L, "log.scalar")
	tag := checkTag(L, "log.scalar", 1)
	value := scalarValue(L, 2)
	s := logOf(L)
	step, explicit := int64(0), L.Get(3) != lua.LNil
	if explicit {
		step = int64(checkInteger(L, "log.scalar", 3))
		if step < 0 {
			argError(L, "log.scalar", "argument 3: a step is at least 0, got %d", step)
		}
	}
	if s.run == nil {
		s.open(L, "log.scalar", runlog.FreshDir(defaultRunsDir, runlog.DefaultName(scriptName(L), time.Now())))
	}
	if !explicit {
		step = s.last[tag] + 1
	}
	s.write(L, "log.scalar", tag, step, value)
	return 0
}

// write records one point and remembers its step.
func (s *logState) write(L *lua.LState, fn, tag string, step int64, value float64) {
	if err := s.run.Scalar(tag, step, value); err != nil {
		argError(L, fn, "writing to the run %s: %v", s.run.Dir(), err)
	}
	s.last[tag] = step
}

func checkTag(L *lua.LState, fn string, n int) string {
	v, ok := L.Get(n).(lua.LString)
	if !ok || v == "" {
		argError(L, fn, "argument %d: expected a metric name (a non-empty string), got %s", n, luaTypeName(L.Get(n)))
	}
	return string(v)
}

// scalarValue reads argument n: a number, or a one-element tensor (a loss),
// whose value is computed now.
func scalarValue(L *lua.LState, n int) float64 {
	v := L.Get(n)
	if x, ok := v.(lua.LNumber); ok {
		return float64(x)
	}
	t := toTensor(v)
	if t == nil {
		argError(L, "log.scalar", "argument %d: expected a number or a one-element tensor, got %s", n, luaTypeName(v))
	}
	if t.Numel() != 1 {
		argError(L, "log.scalar", "argument %d: expected a number or a one-element tensor, got a tensor of shape %s", n, core.ShapeString(t.Shape()))
	}
	vals, err := t.Float64s()
	if err != nil {
		argError(L, "log.scalar", "argument %d: %v", n, err)
	}
	return vals[0]
}

func logFlush(L *lua.LState) int {
	if s := logOf(L); s.run != nil {
		if err := s.run.Flush(); err != nil {
			argError(L, "log.flush", "%v", err)
		}
	}
	return 0
}

// log.close() writes and closes the open run; a later log.scalar opens a
// new one.
func logClose(L *lua.LState) int {
	s := logOf(L)
	if s.run == nil {
		return 0
	}
	err := s.run.Close()
	*s = logState{}
	if err != nil {
		argError(L, "log.close", "%v", err)
	}
	return 0
}

// barFeed is what a progress bar remembers of the run it feeds: the run
// step its own step 0 stands for.
type barFeed struct {
	run  *runlog.Run
	base int64
}

// feedBar records a progress bar's numeric set{} values in the open run,
// if one is open, at the bar's step counted on from where the run's
// previous bar ended: a bar per epoch draws one continuous curve.
func feedBar(L *lua.LState, f *barFeed, barStep int, values map[string]float64) {
	v, ok := logStates.Load(L.G)
	if !ok || v.(*logState).run == nil || len(values) == 0 {
		return
	}
	s := v.(*logState)
	if f.run != s.run { // the bar's first point in this run
		*f = barFeed{run: s.run, base: s.barEnd}
	}
	step := f.base + int64(barStep)
	tags := make([]string, 0, len(values))
	for k := range values {
		tags = append(tags, k)
	}
	sort.Strings(tags) // a table's order is arbitrary; the files' is not
	for _, tag := range tags {
		s.write(L, "bar:set", tag, step, values[tag])
	}
	s.barEnd = max(s.barEnd, step)
}
