package luabind

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// maxCSVBytes bounds what data.csv reads, so a huge or endless file is an
// error rather than an out-of-memory crash.
const maxCSVBytes = 1 << 30

// readCSV parses a numeric CSV file into rows x cols values.
func readCSV(path string, header bool, sep rune) ([]float32, int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	r := csv.NewReader(io.LimitReader(f, maxCSVBytes+1))
	r.Comma, r.TrimLeadingSpace, r.ReuseRecord, r.FieldsPerRecord = sep, true, true, -1
	var vals []float32
	cols, rows, line := -1, 0, 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line++
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		if header && line == 1 {
			continue
		}
		if cols < 0 {
			cols = len(rec)
		} else if len(rec) != cols {
			return nil, 0, 0, fmt.Errorf("%s:%d: %d fields, expected %d", path, line, len(rec), cols)
		}
		for j, field := range rec {
			v, err := strconv.ParseFloat(strings.TrimSpace(field), 32)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("%s:%d: field %d (%q) is not a number", path, line, j+1, field)
			}
			vals = append(vals, float32(v))
		}
		rows++
	}
	if rows == 0 {
		return nil, 0, 0, fmt.Errorf("%s: no data rows", path)
	}
	return vals, rows, cols, nil
}

// batchSource is what data.loader draws batches from: a tensor (rows are
// its first dim) or a Lua table of values, one per row.
type batchSource struct {
	vals  []float32
	shape []int
	table *lua.LTable
}

func (b batchSource) rows() int {
	if b.table != nil {
		return b.table.Len()
	}
	return b.shape[0]
}

func (b batchSource) take(L *lua.LState, env *Env, idx []int) lua.LValue {
	if b.table != nil {
		out := L.CreateTable(len(idx), 0)
		for _, i := range idx {
			out.Append(b.table.RawGetInt(i + 1))
		}
		return out
	}
	per := len(b.vals) / b.shape[0]
	v := make([]float32, 0, per*len(idx))
	for _, i := range idx {
		v = append(v, b.vals[i*per:(i+1)*per]...)
	}
	shape := append([]int{len(idx)}, b.shape[1:]...)
	t, err := core.FromFloat32(v, shape...)
	raise(L, err)
	return env.push(L, t)
}

func sourceArg(L *lua.LState, n int) (batchSource, bool) {
	switch v := L.Get(n).(type) {
	case *lua.LNilType:
		return batchSource{}, false
	case *lua.LTable:
		return batchSource{table: v}, true
	}
	t := checkTensor(L, "data.loader", n)
	vals, err := t.Float32s()
	raise(L, err)
	return batchSource{vals: vals, shape: t.Shape()}, true
}

func (env *Env) dataFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"csv":    env.csv,
		"loader": env.loader,
	}
}

func openData(L *lua.LState, env *Env) {
	L.SetGlobal("data", L.SetFuncs(L.NewTable(), env.dataFunctions()))
}

// csv(path, {header=false, sep=","}) reads a numeric CSV file as a matrix.
func (env *Env) csv(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "data.csv", "reading files is not allowed in a sandboxed runtime")
	}
	path := L.CheckString(1)
	r := readOpts(L, "data.csv", 2)
	header, sep := r.boolean("header", false), r.str("sep", ",")
	r.done()
	if len(sep) != 1 {
		argError(L, "data.csv", "sep must be one character, got %q", sep)
	}
	vals, rows, cols, err := readCSV(path, header, rune(sep[0]))
	if err != nil {
		argError(L, "data.csv", "%s", err.Error())
	}
	t, err := core.FromFloat32(vals, rows, cols)
	return env.pushResult(L, t, err)
}

// loader(x, y, {batch=, shuffle=, drop_last=}) returns an iterator of
// (x batch, y batch); shuffling uses the generator tensor.manual_seed sets.
func (env *Env) loader(L *lua.LState) int {
	x, ok := sourceArg(L, 1)
	if !ok {
		argError(L, "data.loader", "argument 1: expected a tensor or a table, got nil")
	}
	y, hasY := sourceArg(L, 2)
	if hasY && y.rows() != x.rows() {
		argError(L, "data.loader", "x has %d rows but y has %d", x.rows(), y.rows())
	}
	r := readOpts(L, "data.loader", 3)
	batchN, shuffle, dropLast := r.number("batch", 32), r.boolean("shuffle", false), r.boolean("drop_last", false)
	r.done()
	if !(batchN >= 1) || batchN > math.MaxInt32 || batchN != math.Trunc(batchN) {
		argError(L, "data.loader", "batch must be a positive integer, got %g", batchN)
	}
	batch := int(batchN)
	order := make([]int, x.rows())
	for i := range order {
		order[i] = i
	}
	if shuffle {
		env.Engine.Rand().Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		end := min(pos+batch, len(order))
		if pos >= len(order) || (dropLast && end-pos < batch) {
			return 0
		}
		idx := order[pos:end]
		pos = end
		L.Push(x.take(L, env, idx))
		if hasY {
			L.Push(y.take(L, env, idx))
			return 2
		}
		return 1
	}))
	return 1
}
