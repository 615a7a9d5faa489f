package main

import (
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// completer completes globals, fields after '.', and methods after ':'
// (of tensors, modules and other tables with a class).
type completer struct{ L *lua.LState }

func isWordRune(r rune) bool {
	return r == '_' || r == '.' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// Do is readline.AutoCompleter: the suffixes that complete the word before pos.
func (c completer) Do(line []rune, pos int) ([][]rune, int) {
	start := pos
	for start > 0 && isWordRune(line[start-1]) {
		start--
	}
	word := string(line[start:pos])
	cut := strings.LastIndexAny(word, ".:")
	var names []string
	partial := word
	if cut < 0 {
		names = keys(c.L, c.L.Get(lua.GlobalsIndex), false)
	} else {
		partial = word[cut+1:]
		v := c.resolve(word[:cut])
		names = keys(c.L, v, word[cut] == ':')
	}
	var out [][]rune
	for _, n := range names {
		if strings.HasPrefix(n, partial) && n != partial {
			out = append(out, []rune(n[len(partial):]))
		}
	}
	return out, len([]rune(partial))
}

// resolve follows a dotted path of globals and fields ("nn", "m.layers").
func (c completer) resolve(path string) lua.LValue {
	var v lua.LValue = c.L.Get(lua.GlobalsIndex)
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == ':' }) {
		tbl, ok := v.(*lua.LTable)
		if !ok {
			return lua.LNil
		}
		v = tbl.RawGetString(part)
	}
	return v
}

// keys lists the string keys of v; with methods, those reachable through its
// metatable's __index chain (a class), functions only.
func keys(L *lua.LState, v lua.LValue, methods bool) []string {
	seen := map[string]bool{}
	add := func(t *lua.LTable, funcsOnly bool) {
		t.ForEach(func(k, val lua.LValue) {
			s, ok := k.(lua.LString)
			if !ok || strings.HasPrefix(string(s), "_") {
				return
			}
			if funcsOnly && val.Type() != lua.LTFunction {
				return
			}
			seen[string(s)] = true
		})
	}
	if tbl, ok := v.(*lua.LTable); ok {
		add(tbl, methods)
	}
	if methods {
		if ud, ok := v.(*lua.LUserData); ok && ud.Value != nil {
			if lib, ok := L.GetGlobal("tensor").(*lua.LTable); ok {
				add(lib, true) // tensor methods are also tensor.fn
			}
		}
		cur := v
		for depth := 0; depth < 8; depth++ { // follow __index tables up the class chain
			idx, ok := L.GetMetaField(cur, "__index").(*lua.LTable)
			if !ok {
				break
			}
			add(idx, true)
			cur = idx
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
