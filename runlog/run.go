package runlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MetricsFile is the name of a run folder's JSON-lines record.
const MetricsFile = "metrics.jsonl"

// EventFilePrefix starts the name of every TensorBoard event file.
const EventFilePrefix = "events.out.tfevents."

// FlushEvery is how long a written scalar may wait in memory before a
// timer writes it to the files.
const FlushEvery = 2 * time.Second

// flushAfter is FlushEvery, shortened by tests.
var flushAfter = FlushEvery

// flushBytes is the buffered size past which a scalar is written at once.
const flushBytes = 64 << 10

// ErrClosed is returned by a Run's methods after Close.
var ErrClosed = errors.New("runlog: the run is closed")

// Run is an open run folder. Its methods are safe for concurrent use.
type Run struct {
	dir string

	mu     sync.Mutex
	jsonl  *os.File // metrics.jsonl, opened for appending
	events *os.File // this Run's own event file
	jbuf   []byte   // metrics.jsonl lines not yet written
	ebuf   []byte   // event records not yet written
	timer  *time.Timer
	armed  bool  // the timer will flush
	err    error // a timer's flush failed: reported by the next call
	closed bool
}

// Open creates the folder dir if needed and opens a run in it: scalars
// are appended to dir/metrics.jsonl (kept if it exists) and to a new event
// file dir/events.out.tfevents.<unix time>.<host>.
func Open(dir string) (*Run, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the run folder: %w", err)
	}
	jsonl, err := os.OpenFile(filepath.Join(dir, MetricsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	events, err := createEventFile(dir, now)
	if err != nil {
		jsonl.Close()
		return nil, err
	}
	r := &Run{dir: dir, jsonl: jsonl, events: events}
	r.ebuf = appendRecord(r.ebuf, fileVersionEvent(wallSeconds(now)))
	if err := r.flushLocked(); err != nil { // the file is a valid event file from the start
		r.Close()
		return nil, err
	}
	return r, nil
}

// createEventFile creates TensorBoard's event file for a run opened at t,
// named as TensorFlow names it; a second file of the same second and host
// gets a suffix (.2, .3, ...) instead of writing over the first.
func createEventFile(dir string, t time.Time) (*os.File, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	base := filepath.Join(dir, fmt.Sprintf("%s%010d.%s", EventFilePrefix, t.Unix(), host))
	name := base
	for i := 2; ; i++ {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return f, err
		}
		name = base + "." + strconv.Itoa(i)
	}
}

// Dir is the run's folder.
func (r *Run) Dir() string { return r.dir }

// Scalar records value as tag's value at step. It buffers: the files are
// written by Flush, Close, a full buffer or the timer (FlushEvery).
func (r *Run) Scalar(tag string, step int64, value float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return ErrClosed
	case r.err != nil:
		err := r.err
		r.err = nil
		return err
	}
	wall := wallSeconds(time.Now())
	r.jbuf = appendJSONLine(r.jbuf, tag, step, value, wall)
	r.ebuf = appendRecord(r.ebuf, scalarEvent(wall, step, tag, float32(value)))
	if len(r.jbuf)+len(r.ebuf) >= flushBytes {
		return r.flushLocked()
	}
	if !r.armed {
		r.armed = true
		if r.timer == nil {
			r.timer = time.AfterFunc(flushAfter, r.flushLater)
		} else {
			r.timer.Reset(flushAfter)
		}
	}
	return nil
}

// flushLater is the timer's flush; an error waits for the next call.
func (r *Run) flushLater() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = false
	if r.closed {
		return
	}
	if err := r.flushLocked(); err != nil && r.err == nil {
		r.err = err
	}
}

// Flush writes every buffered scalar to the files.
func (r *Run) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	err := r.flushLocked()
	if err == nil && r.err != nil {
		err, r.err = r.err, nil
	}
	return err
}

// flushLocked writes each buffer in one call, so that an appending reader
// or writer never sees part of a line or record.
func (r *Run) flushLocked() error {
	var errs []error
	if len(r.jbuf) > 0 {
		if _, err := r.jsonl.Write(r.jbuf); err != nil {
			errs = append(errs, err)
		}
		r.jbuf = r.jbuf[:0]
	}
	if len(r.ebuf) > 0 {
		if _, err := r.events.Write(r.ebuf); err != nil {
			errs = append(errs, err)
		}
		r.ebuf = r.ebuf[:0]
	}
	return errors.Join(errs...)
}

// Close writes what is buffered and closes the files. A second Close does
// nothing.
func (r *Run) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	errs := []error{r.flushLocked(), r.err, r.jsonl.Close(), r.events.Close()}
	r.err = nil
	return errors.Join(errs...)
}

// appendJSONLine appends one metrics.jsonl line.
func appendJSONLine(b []byte, tag string, step int64, value, wall float64) []byte {
	name, _ := json.Marshal(tag) // a string always marshals
	b = append(b, `{"name":`...)
	b = append(b, name...)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, step, 10)
	b = append(b, `,"value":`...)
	b = appendJSONFloat(b, value)
	b = append(b, `,"wall_time":`...)
	b = strconv.AppendFloat(b, wall, 'f', 6, 64)
	return append(b, "}\n"...)
}

// appendJSONFloat writes v as a JSON number, or NaN and the infinities,
// which JSON has no numbers for, as the strings Python's json module and
// JavaScript print for them.
func appendJSONFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func wallSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// DefaultName is the name of a run that a script did not name: the
// script's file name without its extension ("gglua" for none), a dash and
// the local time, as "train-20250131-142501".
func DefaultName(script string, t time.Time) string {
	base := strings.TrimSuffix(filepath.Base(script), filepath.Ext(script))
	base = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, base)
	if script == "" || strings.Trim(base, "._") == "" {
		base = "gglua"
	}
	return base + "-" + t.Format("20060102-150405")
}

// FreshDir is parent/name, or parent/name-2, -3, ... if that exists, so
// that two unnamed runs started in the same second get folders of their own.
func FreshDir(parent, name string) string {
	dir := filepath.Join(parent, name)
	for i := 2; i < 1000; i++ {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			break
		}
		dir = filepath.Join(parent, name+"-"+strconv.Itoa(i))
	}
	return dir
}
