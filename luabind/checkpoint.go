package luabind

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Checkpoints are GGUF files written through ggml's gguf API, so other ggml
// tools can read them (core/checkpoint.go), or, for a path ending in
// .safetensors, Hugging Face's safetensors files (core/safetensors.go), which
// hold tensors only, plus string metadata: save(p, tbl, {metadata = {...}})
// writes it, and load returns it second. tensor.save takes a table,
// nested as deep as 16, of tensors, numbers, strings and booleans;
// tensor.load gives back the same nesting: save(p, {model = m:state_dict(),
// step = 3}) loads as {model = {["1.weight"] = ..., ...}, step = 3}, and a
// state_dict saved alone loads flat, as model:load_state_dict wants it.
// Keys are strings or numbers. Two entries of one dotted name ("1.weight"
// and ["1"].weight) and NUL bytes in names or strings are errors. Numbers
// come back exactly (every float64, inf and nan included).

// collect walks tbl into checkpoint entries, refusing anything unsavable.
func collect(L *lua.LState, path []core.PathKey, tbl *lua.LTable, out *[]core.CheckpointEntry, depth int) {
	if depth > 16 {
		argError(L, "tensor.save", "tables nested more than 16 deep (a cycle?)")
	}
	empty := true
	tbl.ForEach(func(k, v lua.LValue) {
		empty = false
		var key core.PathKey
		switch x := k.(type) {
		case lua.LString:
			key = core.StrKey(string(x))
		case lua.LNumber:
			key = core.NumKey(float64(x))
		default:
			argError(L, "tensor.save", "a key of type %s (in %s): only string and number keys can be saved", luaTypeName(k), where(path))
		}
		p := append(append([]core.PathKey(nil), path...), key)
		name := core.CheckpointEntry{Path: p}.Name()
		switch x := v.(type) {
		case *lua.LTable:
			if ud, ok := L.GetMetaField(x, "__index").(*lua.LTable); ok && ud != nil {
				argError(L, "tensor.save", "%s is an object; save its state_dict() instead", name)
			}
			collect(L, p, x, out, depth+1)
		case *lua.LUserData:
			t, ok := x.Value.(*core.Tensor)
			if !ok {
				argError(L, "tensor.save", "%s is not a tensor", name)
			}
			*out = append(*out, core.CheckpointEntry{Path: p, Tensor: t})
		case lua.LNumber:
			*out = append(*out, core.CheckpointEntry{Path: p, Value: float64(x)})
		case lua.LString:
			*out = append(*out, core.CheckpointEntry{Path: p, Value: string(x)})
		case lua.LBool:
			*out = append(*out, core.CheckpointEntry{Path: p, Value: bool(x)})
		default:
			argError(L, "tensor.save", "%s is a %s; only tensors, numbers, strings and booleans can be saved", name, luaTypeName(v))
		}
	})
	if empty && len(path) > 0 {
		*out = append(*out, core.CheckpointEntry{Path: path, Value: core.EmptyTable{}})
	}
}

func where(path []core.PathKey) string {
	if len(path) == 0 {
		return "the table saved"
	}
	return core.CheckpointEntry{Path: path}.Name()
}

// isSafetensors says whether a path names a safetensors file.
func isSafetensors(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".safetensors")
}

// save(path, tbl [, {metadata = {k = "v"}}]) writes tensors, numbers, strings
// and booleans to a GGUF file, or tensors and string metadata to a
// safetensors file.
func (env *Env) save(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "tensor.save", "writing files is not allowed in a sandboxed runtime")
	}
	path := L.CheckString(1)
	var entries []core.CheckpointEntry
	collect(L, nil, L.CheckTable(2), &entries, 0)
	o := readOpts(L, "tensor.save", 3)
	meta := stringTable(L, o.get("metadata"))
	o.done()
	p := env.newIOProgress("tensor.save " + path)
	var err error
	if isSafetensors(path) {
		err = core.SaveSafetensors(path, entries, meta, p.update)
	} else {
		if meta != nil {
			argError(L, "tensor.save", "the metadata option is for .safetensors files; a GGUF checkpoint saves strings in the table itself")
		}
		err = core.SaveCheckpointProgress(path, entries, p.update)
	}
	p.finish(err)
	raise(L, err)
	return 0
}

// stringTable reads the metadata option: a table of string keys and values.
func stringTable(L *lua.LState, v lua.LValue) map[string]string {
	if v == lua.LNil {
		return nil
	}
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(L, "tensor.save", "option metadata must be a table of strings, got %s", luaTypeName(v))
	}
	out := map[string]string{}
	tbl.ForEach(func(k, v lua.LValue) {
		ks, kok := k.(lua.LString)
		vs, vok := v.(lua.LString)
		if !kok || !vok {
			argError(L, "tensor.save", "option metadata must map strings to strings, got %s = %s", luaTypeName(k), luaTypeName(v))
		}
		out[string(ks)] = string(vs)
	})
	return out
}

// load(path) reads a checkpoint back, nested as it was saved; a safetensors
// file's metadata is a second result.
func (env *Env) load(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "tensor.load", "reading files is not allowed in a sandboxed runtime")
	}
	file := L.CheckString(1)
	p := env.newIOProgress("tensor.load " + file)
	var entries []core.CheckpointEntry
	var meta map[string]string
	var err error
	if isSafetensors(file) {
		entries, meta, err = core.LoadSafetensors(file, p.update)
	} else {
		entries, err = core.LoadCheckpointProgress(file, p.update)
	}
	p.finish(err)
	raise(L, err)
	root := L.NewTable()
	for _, e := range entries {
		tbl := root
		for i, k := range e.Path {
			key := luaKey(k)
			if i == len(e.Path)-1 {
				if tbl.RawGet(key) != lua.LNil {
					argError(L, "tensor.load", "%s: %s appears twice", file, e.Name())
				}
				tbl.RawSet(key, env.entryValue(L, e))
				break
			}
			next, ok := tbl.RawGet(key).(*lua.LTable)
			if !ok {
				if tbl.RawGet(key) != lua.LNil {
					argError(L, "tensor.load", "%s: %s is both a value and a table", file, e.Name())
				}
				next = L.NewTable()
				tbl.RawSet(key, next)
			}
			tbl = next
		}
	}
	L.Push(root)
	if !isSafetensors(file) {
		return 1
	}
	mt := L.NewTable()
	for k, v := range meta {
		mt.RawSetString(k, lua.LString(v))
	}
	L.Push(mt)
	return 2
}

func luaKey(k core.PathKey) lua.LValue {
	if k.IsNum {
		return lua.LNumber(k.Num)
	}
	return lua.LString(k.Str)
}

func (env *Env) entryValue(L *lua.LState, e core.CheckpointEntry) lua.LValue {
	if e.Tensor != nil {
		return env.push(L, e.Tensor)
	}
	switch v := e.Value.(type) {
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	}
	return L.NewTable() // core.EmptyTable
}

// progressDelay is how long a read or write runs before it shows progress:
// most end sooner and print nothing. Tests shorten it.
var progressDelay = time.Second

// ioProgress shows how far a long read or write (tensor.save/load, data.csv)
// has come, on stderr, as the progress bar draws: redrawn in place on a
// terminal, a plain line each tenth (and each new phase) otherwise. Nothing
// shows for the first progressDelay.
type ioProgress struct {
	out   io.Writer
	tty   bool
	what  string // "tensor.load model.safetensors"
	start time.Time
	last  time.Time // the last redraw, on a terminal
	phase string    // the phase of the last plain line
	tenth int       // the tenth of the last plain line
	shown bool
}

func (env *Env) newIOProgress(what string) *ioProgress {
	out := env.stderr()
	return &ioProgress{out: out, tty: isTTY(out), what: what, start: time.Now(), tenth: -1}
}

// update is told phase and bytes done of total (a core.Progress).
func (p *ioProgress) update(phase string, done, total int64) {
	now := time.Now()
	el := now.Sub(p.start)
	if el < progressDelay {
		return
	}
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	line := fmt.Sprintf("%s: %s %3.0f%% (%s of %s, %s/s)", p.what, phase, 100*frac,
		byteSize(done), byteSize(total), byteSize(int64(float64(done)/max(el.Seconds(), 1e-9))))
	if p.tty {
		if !p.shown || now.Sub(p.last) >= 100*time.Millisecond || done == total {
			fmt.Fprintf(p.out, "\r\x1b[K%s", line)
			p.last, p.shown = now, true
		}
		return
	}
	if tenth := int(frac * 10); phase != p.phase || tenth > p.tenth {
		fmt.Fprintln(p.out, line)
		p.phase, p.tenth, p.shown = phase, tenth, true
	}
}

// finish ends what update showed, if anything: the time taken, or, after an
// error, a line break so the error starts on its own line.
func (p *ioProgress) finish(err error) {
	if !p.shown {
		return
	}
	if p.tty {
		fmt.Fprint(p.out, "\r\x1b[K")
	}
	if err != nil {
		fmt.Fprintf(p.out, "%s: failed\n", p.what)
		return
	}
	fmt.Fprintf(p.out, "%s: done in %.1fs\n", p.what, time.Since(p.start).Seconds())
}

// byteSize writes a byte count as people read it: 512 B, 3.4 MB, 1.2 GB.
func byteSize(n int64) string {
	switch {
	case n < 1e3:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
