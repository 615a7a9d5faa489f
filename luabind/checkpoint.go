package luabind

import (
	"fmt"
	"sort"
	"strconv"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Checkpoints are GGUF files written through ggml's gguf API, so other ggml
// tools can read them. A (possibly nested) table is flattened to dotted
// names: {["1.weight"]=w} and {["1"]={weight=w}} both save "1.weight", and
// load returns the flat form that state_dict uses. Numbers and strings are
// stored as metadata beside the tensors.

// flatten walks tbl into name -> value, refusing anything unsavable.
func flatten(L *lua.LState, prefix string, tbl *lua.LTable, out map[string]lua.LValue, depth int) {
	if depth > 16 {
		argError(L, "tensor.save", "tables nested more than 16 deep (a cycle?)")
	}
	tbl.ForEach(func(k, v lua.LValue) {
		name := k.String()
		if prefix != "" {
			name = prefix + "." + name
		}
		switch x := v.(type) {
		case *lua.LTable:
			if ud, ok := L.GetMetaField(x, "__index").(*lua.LTable); ok && ud != nil {
				argError(L, "tensor.save", "%s is an object; save its state_dict() instead", name)
			}
			flatten(L, name, x, out, depth+1)
		case *lua.LUserData, lua.LNumber, lua.LString, lua.LBool:
			if _, isT := v.(*lua.LUserData); isT {
				if _, ok := x.(*lua.LUserData).Value.(*core.Tensor); !ok {
					argError(L, "tensor.save", "%s is not a tensor", name)
				}
			}
			out[name] = v
		default:
			argError(L, "tensor.save", "%s is a %s; only tensors, numbers, strings and booleans can be saved", name, luaTypeName(v))
		}
	})
}

// save(path, tbl) writes tensors, numbers, strings and booleans to a GGUF file.
func (env *Env) save(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "tensor.save", "writing files is not allowed in a sandboxed runtime")
	}
	path := L.CheckString(1)
	flat := map[string]lua.LValue{}
	flatten(L, "", L.CheckTable(2), flat, 0)
	names := make([]string, 0, len(flat))
	for n := range flat {
		names = append(names, n)
	}
	sort.Strings(names)

	var entries []core.CheckpointEntry
	meta := map[string]string{}
	for _, n := range names {
		switch v := flat[n].(type) {
		case *lua.LUserData:
			entries = append(entries, core.CheckpointEntry{Name: n, Tensor: v.Value.(*core.Tensor)})
		case lua.LNumber:
			meta[n] = "n:" + strconv.FormatFloat(float64(v), 'g', -1, 64)
		case lua.LBool:
			meta[n] = "b:" + strconv.FormatBool(bool(v))
		default:
			meta[n] = "s:" + v.String()
		}
	}
	raise(L, core.SaveCheckpoint(path, entries, meta))
	return 0
}

// load(path) reads a checkpoint back as a flat table.
func (env *Env) load(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "tensor.load", "reading files is not allowed in a sandboxed runtime")
	}
	entries, meta, err := core.LoadCheckpoint(L.CheckString(1))
	raise(L, err)
	out := L.NewTable()
	for _, e := range entries {
		out.RawSetString(e.Name, env.push(L, e.Tensor))
	}
	for k, v := range meta {
		if len(v) < 2 {
			continue
		}
		switch v[:2] {
		case "n:":
			f, err := strconv.ParseFloat(v[2:], 64)
			if err != nil {
				raise(L, fmt.Errorf("tensor.load: bad number for %s", k))
			}
			out.RawSetString(k, lua.LNumber(f))
		case "b:":
			out.RawSetString(k, lua.LBool(v[2:] == "true"))
		default:
			out.RawSetString(k, lua.LString(v[2:]))
		}
	}
	L.Push(out)
	return 1
}
