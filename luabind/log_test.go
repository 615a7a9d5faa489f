package luabind

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runlog"
	"github.com/gglua/gglua/runlog/eventcheck"
)

// logTestState opens the gglua globals (sandboxed or not) in a fresh state
// whose progress bars write to out.
func logTestState(t *testing.T, sandbox bool) (*lua.LState, *bytes.Buffer) {
	t.Helper()
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	L := lua.NewState()
	out := &bytes.Buffer{}
	Open(L, &Env{Engine: e, Threads: 1, Sandbox: sandbox, Stdout: out})
	t.Cleanup(func() {
		Detach(L)
		L.Close()
	})
	return L, out
}

// points reads a run's points per tag as step -> value, from metrics.jsonl
// and, independently, from its one event file; both must agree.
func points(t *testing.T, dir string) map[string]map[int64]float64 {
	t.Helper()
	series, err := runlog.Read(dir)
	require.NoError(t, err)
	fromJSON := map[string]map[int64]float64{}
	for _, s := range series {
		fromJSON[s.Tag] = map[int64]float64{}
		for _, p := range s.Points {
			fromJSON[s.Tag][p.Step] = p.Value
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, runlog.EventFilePrefix+"*"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	events, err := eventcheck.ReadFile(files[0])
	require.NoError(t, err)
	fromEvents := map[string]map[int64]float64{}
	for _, e := range events[1:] {
		for _, s := range e.Scalars {
			if fromEvents[s.Tag] == nil {
				fromEvents[s.Tag] = map[int64]float64{}
			}
			fromEvents[s.Tag][e.Step] = float64(s.Value)
		}
	}
	assert.Equal(t, "brain.Event:2", events[0].FileVersion)
	assert.Equal(t, fromJSON, fromEvents, "metrics.jsonl and the event file hold the same points (values here are exact in f32)")
	return fromJSON
}

func TestLogScalarWritesTheRun(t *testing.T) {
	L, _ := logTestState(t, false)
	root := t.TempDir()
	L.SetGlobal("root", lua.LString(root))
	require.NoError(t, L.DoString(`
		dir = log.run("exp1", {dir = root})
		log.scalar("loss", 0.5)           -- step 1
		log.scalar("loss", tensor{0.25})  -- step 2: a one-element tensor
		log.scalar("acc", 1, 10)
		log.scalar("acc", 2)              -- counts on from 10
		log.scalar("loss", tensor{{-4}}, 0)
		log.flush()
		log.close()
		log.close()                       -- nothing open: nothing to do
	`))
	dir := filepath.Join(root, "exp1")
	assert.Equal(t, dir, L.GetGlobal("dir").String())
	assert.Equal(t, map[string]map[int64]float64{
		"loss": {0: -4, 1: 0.5, 2: 0.25},
		"acc":  {10: 1, 11: 2},
	}, points(t, dir))
}

// Without log.run, the first log.scalar opens runs/<script>-<time> in the
// working folder, named after arg[0].
func TestLogScalarOpensADefaultRun(t *testing.T) {
	t.Chdir(t.TempDir())
	L, _ := logTestState(t, false)
	require.NoError(t, L.DoString(`arg = {[0] = "scripts/train.lua"}; log.scalar("loss", 3)`))
	Detach(L) // the runtime's Close: writes the buffered point
	runs, err := filepath.Glob("runs/*")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Regexp(t, `^runs/train-\d{8}-\d{6}$`, filepath.ToSlash(runs[0]))
	assert.Equal(t, map[string]map[int64]float64{"loss": {1: 3}}, points(t, runs[0]))
}

// Closing the state (Detach, which the runtime's Close calls) writes what
// was still buffered.
func TestDetachWritesTheBufferedValues(t *testing.T) {
	L, _ := logTestState(t, false)
	root := t.TempDir()
	L.SetGlobal("root", lua.LString(root))
	require.NoError(t, L.DoString(`log.run("r", {dir = root}); log.scalar("loss", 1)`))
	metrics := filepath.Join(root, "r", runlog.MetricsFile)
	st, err := os.Stat(metrics)
	require.NoError(t, err)
	assert.Zero(t, st.Size(), "still buffered")
	Detach(L)
	st, err = os.Stat(metrics)
	require.NoError(t, err)
	assert.NotZero(t, st.Size())
}

func TestLogRefusesBadArguments(t *testing.T) {
	L, _ := logTestState(t, false)
	root := t.TempDir()
	L.SetGlobal("root", lua.LString(root))
	require.NoError(t, L.DoString(`log.run("ok", {dir = root})`))
	cases := []struct{ code, want string }{
		{`log.scalar()`, "log.scalar: argument 1: expected a metric name (a non-empty string), got nil"},
		{`log.scalar("", 1)`, "log.scalar: argument 1: expected a metric name"},
		{`log.scalar("x", "high")`, "log.scalar: argument 2: expected a number or a one-element tensor, got string"},
		{`log.scalar("x", tensor{1, 2})`, "log.scalar: argument 2: expected a number or a one-element tensor, got a tensor of shape 2"},
		{`log.scalar("x", 1, -1)`, "log.scalar: argument 3: a step is at least 0, got -1"},
		{`log.scalar("x", 1, 1.5)`, "log.scalar: argument 3: expected an integer, got 1.5"},
		{`log.run(5)`, "log.run: argument 1: expected a run name (a string) or nil, got number"},
		{`log.run("../up", {dir = root})`, `log.run: argument 1: a run name is a relative folder name`},
		{`log.run("/abs")`, `log.run: argument 1: a run name is a relative folder name`},
		{`log.run("x", {dirr = "y"})`, "log.run: unknown option dirr"},
		{`log.run("x", {dir = 3})`, "log.run: option dir must be a string, got number"},
	}
	for _, c := range cases {
		err := L.DoString(c.code)
		if assert.Error(t, err, c.code) {
			assert.Contains(t, err.Error(), c.want, c.code)
		}
	}
	// A run folder that cannot be made is a clear error too.
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	err := L.DoString(`log.run("x", {dir = root .. "/file"})`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "log.run: cannot open the run")
}

// A sandboxed runtime cannot write files through log: log.run and
// log.scalar refuse, and a bar's set{} (with no run open) writes nothing.
func TestLogInASandboxWritesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	L, _ := logTestState(t, true)
	for _, code := range []string{`log.scalar("loss", 1)`, `log.run("x")`, `log.run()`} {
		err := L.DoString(code)
		if assert.Error(t, err, code) {
			assert.Contains(t, err.Error(), "writing files is not allowed in a sandboxed runtime", code)
		}
	}
	require.NoError(t, L.DoString(`local bar = progress(2); for i in bar do bar:set{loss = i} end; log.flush(); log.close()`))
	Detach(L)
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was written")
}

// A bar's set{} feeds its numbers to the open run at the bar's step; the
// next bar (the next epoch) continues where the last one ended.
func TestProgressSetFeedsTheRun(t *testing.T) {
	t.Chdir(t.TempDir())
	L, _ := logTestState(t, false)
	root := t.TempDir()
	L.SetGlobal("root", lua.LString(root))
	require.NoError(t, L.DoString(`
		local before = progress(2)
		for i in before do before:set{loss = 100} end  -- no run open: not recorded
		log.run("fed", {dir = root})
		for epoch = 1, 2 do
			local bar = progress(3)
			for i in bar do bar:set{loss = epoch * 10 + i, acc = i / 4, note = "text"} end
		end
		log.scalar("lr", 0.5)
		log.close()
	`))
	assert.Equal(t, map[string]map[int64]float64{
		"loss": {1: 11, 2: 12, 3: 13, 4: 21, 5: 22, 6: 23},
		"acc":  {1: 0.25, 2: 0.5, 3: 0.75, 4: 0.25, 5: 0.5, 6: 0.75},
		"lr":   {1: 0.5},
	}, points(t, filepath.Join(root, "fed")))
	_, err := os.Stat("runs")
	assert.ErrorIs(t, err, os.ErrNotExist, "the bar before log.run opened no run")
}

func TestSparkline(t *testing.T) {
	cases := []struct {
		in   []float64
		want string
	}{
		{[]float64{0, 1, 2, 3, 4, 5, 6, 7}, "▁▂▃▄▅▆▇█"},
		{[]float64{7, 0}, "█▁"},
		{[]float64{2, 2, 2}, "▅▅▅"},
		{[]float64{1, math.NaN(), 3, math.Inf(1)}, "▁×█×"},
		{[]float64{math.NaN()}, "×"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, sparkline(c.in), "%v", c.in)
	}
}

// The terminal bar shows a sparkline of the latest values of loss (or of
// the first numeric key), right after its value; plain lines do not.
func TestProgressBarDrawsASparklineOnATerminal(t *testing.T) {
	L, _ := logTestState(t, false)
	p := &progressBar{tty: true, total: 30, extra: map[string]string{}}
	set := func(code string) {
		require.NoError(t, L.DoString("return "+code))
		p.set(L, L.Get(-1).(*lua.LTable))
		L.Pop(1)
	}
	set(`{acc = 0.5, b = 1, note = "x"}`)
	assert.Equal(t, "acc", p.sparkKey, "the first numeric key, sorted")
	for i := 30; i >= 1; i-- {
		set("{loss = " + strconv.Itoa(i) + ", acc = 1}")
	}
	assert.Equal(t, "loss", p.sparkKey, "loss takes the sparkline once given")
	assert.Len(t, p.spark, sparkLength)
	line := p.line()
	assert.Contains(t, line, "loss=1 "+sparkline(p.spark), "after its value")
	assert.Equal(t, "█", string([]rune(sparkline(p.spark))[0:1]), "falling: highest first")
	assert.NotContains(t, line, "acc=1 ▁")
	p.tty = false
	assert.NotContains(t, p.line(), "▁", "plain lines stay ASCII")
}
