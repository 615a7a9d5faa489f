package runlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Point is one recorded value.
type Point struct {
	Step     int64
	Value    float64
	WallTime float64 // seconds since the Unix epoch
}

// Series is every value recorded under one tag, ordered by step (values
// of one step keep the order they were written in).
type Series struct {
	Tag    string
	Points []Point
}

// Read reads a run folder's metrics.jsonl: one Series per tag, in the
// order the tags first appear. A folder that is not a run (missing, or
// with no metrics.jsonl, or a folder of runs such as runs/) or a run with
// no scalars is an error saying which.
func Read(dir string) ([]Series, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("no run folder %s", dir)
	case err != nil:
		return nil, err
	case !st.IsDir():
		return nil, fmt.Errorf("%s is not a run folder (a run is a folder holding %s)", dir, MetricsFile)
	}
	path := filepath.Join(dir, MetricsFile)
	// O_NONBLOCK: a FIFO in the file's place opens at once instead of
	// blocking until a writer comes, and is refused below (for a regular
	// file the flag changes nothing).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		if runs := runsIn(dir); len(runs) > 0 {
			return nil, fmt.Errorf("%s is a folder of runs; name one of them: %s", dir, strings.Join(runs, ", "))
		}
		return nil, fmt.Errorf("%s has no %s: not a gglua run folder (log.scalar writes one)", dir, MetricsFile)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}

	var out []Series
	index := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		tag, p, err := parseLine(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		i, ok := index[tag]
		if !ok {
			i = len(out)
			index[tag] = i
			out = append(out, Series{Tag: tag})
		}
		out[i].Points = append(out[i].Points, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no scalars yet (log.scalar adds them)", path)
	}
	for _, s := range out {
		sort.SliceStable(s.Points, func(a, b int) bool { return s.Points[a].Step < s.Points[b].Step })
	}
	return out, nil
}

// parseLine reads one metrics.jsonl line.
func parseLine(b []byte) (string, Point, error) {
	var rec struct {
		Name     *string         `json:"name"`
		Step     *int64          `json:"step"`
		Value    json.RawMessage `json:"value"`
		WallTime float64         `json:"wall_time"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return "", Point{}, fmt.Errorf("not a metrics line: %v", err)
	}
	if rec.Name == nil || rec.Step == nil || rec.Value == nil {
		return "", Point{}, errors.New(`a metrics line needs "name", "step" and "value"`)
	}
	v, err := parseValue(rec.Value)
	if err != nil {
		return "", Point{}, err
	}
	return *rec.Name, Point{Step: *rec.Step, Value: v, WallTime: rec.WallTime}, nil
}

// parseValue reads a number, or one of the strings appendJSONFloat writes
// for NaN and the infinities.
func parseValue(raw json.RawMessage) (float64, error) {
	var v float64
	if err := json.Unmarshal(raw, &v); err == nil {
		return v, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, fmt.Errorf("value %s is not a number", raw)
}

// runsIn lists the subfolders of dir that are runs.
func runsIn(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var runs []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), MetricsFile)); e.IsDir() && err == nil {
			runs = append(runs, filepath.Join(dir, e.Name()))
		}
	}
	return runs
}
