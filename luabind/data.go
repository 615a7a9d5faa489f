package luabind

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// maxCSVBytes bounds what data.csv reads, so a huge or endless file is an
// error rather than an out-of-memory crash.
const maxCSVBytes = 1 << 30

// readCSV parses a numeric CSV file into rows x cols values, telling
// progress the bytes read of the file's size.
func readCSV(path string, header bool, sep rune, progress func(phase string, done, total int64)) ([]float32, int, int, error) {
	f, st, err := ggmlcgo.OpenRegular(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	counted := &countingReader{r: f, total: st.Size(), progress: progress}
	r := csv.NewReader(io.LimitReader(counted, maxCSVBytes+1))
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

// countingReader tells progress how many bytes have been read through it.
type countingReader struct {
	r        io.Reader
	done     int64
	total    int64
	progress func(phase string, done, total int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.done += int64(n)
	c.progress("reading", c.done, max(c.total, c.done))
	return n, err
}

// batchSource is what data.loader draws batches from: a tensor (rows are
// its first dim) or a Lua table of values, one per row.
type batchSource struct {
	vals  []float32
	shape []int
	table *lua.LTable
	ints  *core.Tensor // an i32 tensor (labels), batched exactly
}

func (b batchSource) rows() int {
	if b.table != nil {
		return b.table.Len()
	}
	return b.shape[0]
}

func (b batchSource) take(L *lua.LState, env *Env, idx []int) lua.LValue {
	if b.ints != nil {
		t, err := env.Engine.IndexSelect(b.ints, 0, idx)
		raise(L, err)
		return env.push(L, t)
	}
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
	if t.Dtype() == ggmlcgo.I32 {
		return batchSource{shape: t.Shape(), ints: t}, true
	}
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
	p := env.newIOProgress("data.csv " + path)
	vals, rows, cols, err := readCSV(path, header, rune(sep[0]), p.update)
	p.finish(err)
	if err != nil {
		argError(L, "data.csv", "%s", err.Error())
	}
	t, err := core.FromFloat32(vals, rows, cols)
	return env.pushResult(L, t, err)
}

// loader(x, y, {batch=, shuffle=, drop_last=, shard=, seed=}) returns a loader, an
// iterator over epochs: `for xb, yb in loader do` runs through one epoch of
// (x batch, y batch) and ends; the next loop is the next epoch, reshuffled
// (shuffle=true) from the generator tensor.manual_seed sets. #loader is its
// batches per epoch. A loop that stops early (break) leaves the rest of the
// epoch to the next loop; loader:reset() drops it. Called directly,
// loader() returns the next batch, nothing at the end of an epoch.
//
// (An epoch cannot start with each loop: gopher-lua does not pass a new
// loop's iterator nil state and control when the loop names only the
// iterator, so a loop's first call cannot be told from a later one.)
//
// shard=true gives each process of a dist job its part of every epoch, as
// PyTorch's DistributedSampler does: the epoch's order (shuffled from seed
// + the epoch's number, alike on every rank whatever else drew random
// numbers) is padded by repeating its start to a multiple of the world
// size (drop_last: cut to one), and rank r takes rows r, r+W, r+2W...;
// every rank has the same number of rows, so the same number of batches.
func (env *Env) loader(L *lua.LState) int {
	x, ok := sourceArg(L, 1)
	if !ok {
		argError(L, "data.loader", "argument 1: expected a tensor or a table, got nil")
	}
	if isOptions(L.Get(2)) && L.Get(3) == lua.LNil {
		L.Insert(lua.LNil, 2) // data.loader(x, {batch=...}): no targets
	}
	y, hasY := sourceArg(L, 2)
	if hasY && y.rows() != x.rows() {
		argError(L, "data.loader", "x has %d rows but y has %d", x.rows(), y.rows())
	}
	r := readOpts(L, "data.loader", 3)
	batchN, shuffle, dropLast := r.number("batch", 32), r.boolean("shuffle", false), r.boolean("drop_last", false)
	shard, seed := r.boolean("shard", false), r.number("seed", 0)
	r.done()
	if !(batchN >= 1) || batchN > math.MaxInt32 || batchN != math.Trunc(batchN) {
		argError(L, "data.loader", "batch must be a positive integer, got %g", batchN)
	}
	if !shard && r.has("seed") {
		argError(L, "data.loader", "seed applies to shard=true (an unsharded shuffle follows tensor.manual_seed)")
	}
	if seed != math.Trunc(seed) || math.Abs(seed) > 1<<53 {
		argError(L, "data.loader", "seed must be an integer, got %g", seed)
	}
	d := &dataLoader{env: env, x: x, y: y, hasY: hasY, batch: int(batchN), shuffle: shuffle, dropLast: dropLast, world: 1}
	if shard {
		d.shard, d.seed = true, int64(seed)
		d.rank, d.world = shardPlace(L) // dist.go
	}
	ud := L.NewUserData()
	ud.Value = d
	L.SetMetatable(ud, loaderMetatable(L))
	L.Push(ud)
	return 1
}

// dataLoader is what data.loader returns: batches of its sources' rows,
// one epoch per pass.
type dataLoader struct {
	env      *Env
	x, y     batchSource
	hasY     bool
	batch    int
	shuffle  bool
	dropLast bool
	order    []int // this epoch's rows (this rank's, when sharded)
	pos      int   // the next batch starts at order[pos]
	running  bool  // an epoch is under way

	// shard: this rank's part of every epoch, shuffled from seed + epoch
	shard       bool
	rank, world int
	seed, epoch int64
}

const loaderTypeName = "gglua.data.loader"

func loaderMetatable(L *lua.LState) lua.LValue {
	mt := L.GetTypeMetatable(loaderTypeName)
	if mt != lua.LNil {
		return mt
	}
	t := L.NewTypeMetatable(loaderTypeName)
	L.SetFuncs(t, map[string]lua.LGFunction{
		"__call": func(L *lua.LState) int {
			return checkLoader(L, 1).next(L)
		},
		"__len": func(L *lua.LState) int {
			L.Push(lua.LNumber(checkLoader(L, 1).batches()))
			return 1
		},
		"__index": func(L *lua.LState) int {
			checkLoader(L, 1)
			if L.Get(2) == lua.LString("reset") {
				L.Push(L.NewFunction(func(L *lua.LState) int {
					checkLoader(L, 1).running = false
					return 0
				}))
				return 1
			}
			return 0
		},
		"__tostring": func(L *lua.LState) int {
			d := checkLoader(L, 1)
			L.Push(lua.LString(fmt.Sprintf("data.loader(%d rows, batch %d, %d batches per epoch)", d.x.rows(), d.batch, d.batches())))
			return 1
		},
	})
	return t
}

// toLoader is v's loader, or nil.
func toLoader(v lua.LValue) *dataLoader {
	if ud, ok := v.(*lua.LUserData); ok {
		if d, ok := ud.Value.(*dataLoader); ok {
			return d
		}
	}
	return nil
}

func checkLoader(L *lua.LState, n int) *dataLoader {
	d := toLoader(L.Get(n))
	if d == nil {
		argError(L, "data.loader", "argument %d: expected a loader, got %s", n, luaTypeName(L.Get(n)))
	}
	return d
}

// batches is the number of batches in an epoch.
func (d *dataLoader) batches() int {
	n := d.rows()
	if d.dropLast {
		return n / d.batch
	}
	return (n + d.batch - 1) / d.batch
}

// rows is the number of rows in an epoch (this rank's, when sharded).
func (d *dataLoader) rows() int {
	n := d.x.rows()
	switch {
	case !d.shard || d.world == 1:
		return n
	case d.dropLast:
		return n / d.world
	}
	return (n + d.world - 1) / d.world
}

// start begins an epoch: the rows in order, or shuffled from the engine's
// generator (read now: device.use may have replaced the engine), or when
// sharded from seed + epoch, then this rank's part. A long shuffle stops
// with the script's call.
func (d *dataLoader) start(L *lua.LState) {
	n := d.x.rows()
	if cap(d.order) < n {
		d.order = make([]int, n)
	}
	d.order = d.order[:n]
	for i := range d.order {
		d.order[i] = i
	}
	swaps := 0
	swap := func(i, j int) {
		if swaps++; swaps%(1<<16) == 0 {
			stopIfEnded(L, "data.loader")
		}
		d.order[i], d.order[j] = d.order[j], d.order[i]
	}
	switch {
	case d.shuffle && d.shard:
		rand.New(rand.NewSource(d.seed+d.epoch)).Shuffle(n, swap)
	case d.shuffle:
		d.env.Engine.Rand().Shuffle(n, swap)
	}
	if d.shard && d.world > 1 {
		mine := make([]int, 0, d.rows())
		for i := d.rank; len(mine) < d.rows(); i += d.world {
			mine = append(mine, d.order[i%n]) // past the end: the epoch's start again
		}
		d.order = mine
	}
	d.epoch++
	d.pos, d.running = 0, true
}

// next pushes the epoch's next batch (x, then y if given) and returns how
// many values it pushed: none at the end of the epoch, which ends it.
func (d *dataLoader) next(L *lua.LState) int {
	if !d.running {
		d.start(L)
	}
	end := min(d.pos+d.batch, len(d.order))
	if d.pos >= len(d.order) || (d.dropLast && end-d.pos < d.batch) {
		d.running = false
		return 0
	}
	idx := d.order[d.pos:end]
	d.pos = end
	L.Push(d.x.take(L, d.env, idx))
	if d.hasY {
		L.Push(d.y.take(L, d.env, idx))
		return 2
	}
	return 1
}
