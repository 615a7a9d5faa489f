package runlog

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runlog/eventcheck"
)

// eventFiles lists a run folder's event files.
func eventFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, EventFilePrefix+"*"))
	require.NoError(t, err)
	return files
}

type written struct {
	tag   string
	step  int64
	value float64
}

// What a Run writes reads back from both files: metrics.jsonl through
// Read, and the event file through eventcheck, which frames, checksums and
// decodes it with TensorBoard's schema and no code of the writer's.
func TestRunWritesJSONLinesAndTensorBoardEvents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "demo")
	in := []written{
		{"loss", 1, 0.693}, {"loss", 2, 0.5}, {"acc", 10, 0.25},
		{"loss", 3, 1e-30}, {"lr", 0, 3e-4}, {`odd "tag"/é`, 7, -2.5},
		{"loss", 4, math.NaN()}, {"loss", 5, math.Inf(1)}, {"acc", 11, math.Inf(-1)},
		{"loss", 1 << 40, 123456.789},
	}
	before := float64(time.Now().UnixNano()) / 1e9
	r, err := Open(dir)
	require.NoError(t, err)
	assert.Equal(t, dir, r.Dir())
	for _, w := range in {
		require.NoError(t, r.Scalar(w.tag, w.step, w.value))
	}
	require.NoError(t, r.Close())
	after := float64(time.Now().UnixNano()) / 1e9

	files := eventFiles(t, dir)
	require.Len(t, files, 1)
	host, _ := os.Hostname()
	assert.Regexp(t, `^events\.out\.tfevents\.\d{10}\.`+regexpQuote(host)+`$`, filepath.Base(files[0]))
	events, err := eventcheck.ReadFile(files[0])
	require.NoError(t, err)
	require.Len(t, events, 1+len(in))
	assert.Equal(t, "brain.Event:2", events[0].FileVersion)
	assert.Empty(t, events[0].Scalars)
	for i, w := range in {
		e := events[i+1]
		require.Len(t, e.Scalars, 1, "event %d", i+1)
		assert.Equal(t, w.tag, e.Scalars[0].Tag)
		assert.Equal(t, w.step, e.Step)
		want := float32(w.value) // TensorBoard's simple_value is a float32
		if math.IsNaN(w.value) {
			assert.True(t, math.IsNaN(float64(e.Scalars[0].Value)), "event %d: %v", i+1, e.Scalars[0].Value)
		} else {
			assert.Equal(t, want, e.Scalars[0].Value, "event %d", i+1)
		}
		assert.Empty(t, e.FileVersion)
		assert.GreaterOrEqual(t, e.WallTime, before-1e-3)
		assert.LessOrEqual(t, e.WallTime, after+1e-3)
	}

	series, err := Read(dir)
	require.NoError(t, err)
	got := map[string][]Point{}
	var order []string
	for _, s := range series {
		order = append(order, s.Tag)
		got[s.Tag] = s.Points
	}
	assert.Equal(t, []string{"loss", "acc", "lr", `odd "tag"/é`}, order, "tags in order of first appearance")
	steps := func(ps []Point) (out []int64) {
		for _, p := range ps {
			out = append(out, p.Step)
		}
		return out
	}
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 1 << 40}, steps(got["loss"]))
	assert.Equal(t, 0.693, got["loss"][0].Value, "metrics.jsonl keeps the float64")
	assert.Equal(t, 1e-30, got["loss"][2].Value)
	assert.True(t, math.IsNaN(got["loss"][3].Value))
	assert.Equal(t, math.Inf(1), got["loss"][4].Value)
	assert.Equal(t, math.Inf(-1), got["acc"][1].Value)
	assert.Equal(t, 123456.789, got["loss"][5].Value)
	assert.Equal(t, -2.5, got[`odd "tag"/é`][0].Value)
	assert.InDelta(t, (before+after)/2, got["lr"][0].WallTime, (after-before)/2+1e-3)
}

func regexpQuote(s string) string {
	return strings.NewReplacer(".", `\.`, "-", `\-`).Replace(s)
}

// CRC32C's standard check value pins the table, so the masked checksum is
// TFRecord's and not some other CRC's.
func TestMaskedCRCIsCastagnoli(t *testing.T) {
	check := []byte("123456789")
	var crc32c uint32 = 0xe3069283 // CRC-32C("123456789"), the published check value
	assert.Equal(t, (crc32c>>15|crc32c<<17)+0xa282ead8, maskedCRC(check))
	assert.Equal(t, eventcheck.MaskedCRC32C(check), maskedCRC(check))
}

// A damaged record is caught by the independent reader (the checks that
// pass above can fail).
func TestEventCheckRejectsDamagedRecords(t *testing.T) {
	rec := appendRecord(nil, scalarEvent(1, 2, "loss", 0.5))
	_, err := eventcheck.Records(rec)
	require.NoError(t, err)
	for i := range rec {
		bad := append([]byte(nil), rec...)
		bad[i] ^= 0x10
		_, err := eventcheck.Records(bad)
		assert.Error(t, err, "flipped bit in byte %d", i)
	}
	_, err = eventcheck.Records(rec[:len(rec)-1])
	assert.Error(t, err, "truncated")
}

// Scalars wait in memory until Flush, Close or the timer writes them.
func TestRunBuffersUntilFlushOrTimer(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir)
	require.NoError(t, err)
	defer r.Close()
	metrics := filepath.Join(dir, MetricsFile)
	size := func() int64 {
		st, err := os.Stat(metrics)
		require.NoError(t, err)
		return st.Size()
	}
	require.NoError(t, r.Scalar("loss", 1, 1))
	assert.Zero(t, size(), "buffered, not yet written")
	require.NoError(t, r.Flush())
	assert.NotZero(t, size())
	events, err := eventcheck.ReadFile(eventFiles(t, dir)[0])
	require.NoError(t, err)
	assert.Len(t, events, 2, "flushed whole: the header and one scalar")

	flushAfter = 20 * time.Millisecond
	defer func() { flushAfter = FlushEvery }()
	r2, err := Open(t.TempDir())
	require.NoError(t, err)
	defer r2.Close()
	require.NoError(t, r2.Scalar("loss", 1, 1))
	require.Eventually(t, func() bool {
		st, err := os.Stat(filepath.Join(r2.Dir(), MetricsFile))
		return err == nil && st.Size() > 0
	}, 5*time.Second, 5*time.Millisecond, "the timer writes a scalar without Flush")

	// A full buffer is written at once.
	r3, err := Open(t.TempDir())
	require.NoError(t, err)
	defer r3.Close()
	for i := range 2000 {
		require.NoError(t, r3.Scalar("a fairly long tag name for the buffer", int64(i), 1))
	}
	st, err := os.Stat(filepath.Join(r3.Dir(), MetricsFile))
	require.NoError(t, err)
	assert.NotZero(t, st.Size())
}

// Opening a run folder again appends to metrics.jsonl and starts a second
// event file beside the first.
func TestReopenAppends(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		r, err := Open(dir)
		require.NoError(t, err)
		require.NoError(t, r.Scalar("loss", int64(i+1), float64(i)))
		require.NoError(t, r.Close())
		require.NoError(t, r.Close(), "a second Close does nothing")
		assert.ErrorIs(t, r.Scalar("loss", 9, 9), ErrClosed)
		assert.ErrorIs(t, r.Flush(), ErrClosed)
	}
	assert.Len(t, eventFiles(t, dir), 2)
	series, err := Read(dir)
	require.NoError(t, err)
	require.Len(t, series, 1)
	assert.Len(t, series[0].Points, 2)
}

func TestOpenFailsWhereNoFolderCanBe(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := Open(filepath.Join(file, "run"))
	assert.ErrorContains(t, err, "cannot create the run folder")
}

func TestReadErrorsSayWhatIsWrong(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) string {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return filepath.Dir(p)
	}
	good := `{"name":"loss","step":1,"value":0.5,"wall_time":1}` + "\n"
	write("runs/a/"+MetricsFile, good)
	write("runs/b/"+MetricsFile, good)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "plain"), 0o755))
	cases := []struct{ dir, want string }{
		{filepath.Join(root, "missing"), "no run folder"},
		{filepath.Join(root, "runs/a", MetricsFile), "is not a run folder"},
		{filepath.Join(root, "plain"), "has no metrics.jsonl: not a gglua run folder"},
		{filepath.Join(root, "runs"), "is a folder of runs; name one of them: " + filepath.Join(root, "runs/a") + ", " + filepath.Join(root, "runs/b")},
		{write("empty/"+MetricsFile, "\n"), "holds no scalars yet"},
		{write("bad/"+MetricsFile, good+"{oops\n"), MetricsFile + ":2: not a metrics line"},
		{write("noname/"+MetricsFile, `{"step":1,"value":2}`), `needs "name", "step" and "value"`},
		{write("badvalue/"+MetricsFile, `{"name":"x","step":1,"value":"high"}`), `value "high" is not a number`},
	}
	// A FIFO in metrics.jsonl's place is refused at once (open() on it
	// blocked until a writer came).
	fifo := filepath.Join(root, "fifo")
	require.NoError(t, os.MkdirAll(fifo, 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(fifo, MetricsFile), 0o644))
	cases = append(cases, struct{ dir, want string }{fifo, "is not a regular file"})
	for _, c := range cases {
		done := make(chan error, 1)
		go func() { _, err := Read(c.dir); done <- err }()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, c.want, c.dir)
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) blocked", c.dir)
		}
	}
}

func TestDefaultNameAndFreshDir(t *testing.T) {
	at := time.Date(2025, 1, 31, 14, 25, 1, 0, time.Local)
	for script, want := range map[string]string{
		"scripts/train.lua": "train-20250131-142501",
		"/a/b/my run.lua":   "my_run-20250131-142501",
		"":                  "gglua-20250131-142501",
		"noext":             "noext-20250131-142501",
	} {
		assert.Equal(t, want, DefaultName(script, at), script)
	}
	parent := t.TempDir()
	assert.Equal(t, filepath.Join(parent, "x"), FreshDir(parent, "x"))
	require.NoError(t, os.Mkdir(filepath.Join(parent, "x"), 0o755))
	assert.Equal(t, filepath.Join(parent, "x-2"), FreshDir(parent, "x"))
}
