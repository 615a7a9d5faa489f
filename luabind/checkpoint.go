package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Checkpoints are GGUF files written through ggml's gguf API, so other ggml
// tools can read them (core/checkpoint.go). tensor.save takes a table,
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

// save(path, tbl) writes tensors, numbers, strings and booleans to a GGUF file.
func (env *Env) save(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "tensor.save", "writing files is not allowed in a sandboxed runtime")
	}
	path := L.CheckString(1)
	var entries []core.CheckpointEntry
	collect(L, nil, L.CheckTable(2), &entries, 0)
	raise(L, core.SaveCheckpoint(path, entries))
	return 0
}

// load(path) reads a checkpoint back, nested as it was saved.
func (env *Env) load(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "tensor.load", "reading files is not allowed in a sandboxed runtime")
	}
	file := L.CheckString(1)
	entries, err := core.LoadCheckpoint(file)
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
	return 1
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
