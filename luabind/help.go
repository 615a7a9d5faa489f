package luabind

import (
	"fmt"
	"io"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// help(name_or_value) prints the documentation of docs.txt (docs.go) to
// the runtime's Stdout: help() an overview, help("nn") a library,
// help("matmul") or help("tensor.zeros") a name, help(tensor.zeros) a
// function found by identity, help(x) a tensor, help(nn.Linear) a class,
// help(m) a module.

// maxHelpName is longer than any documented name: help of a longer string
// answers at once (a 256 MB string was lowercased once a name).
const maxHelpName = 256

func openHelp(L *lua.LState, env *Env) {
	L.SetGlobal("help", newFunction(L, "help", env.help))
}

func (env *Env) help(L *lua.LState) int {
	d, err := loadDocs()
	if err != nil {
		argError(L, "help", "the documentation does not parse: %s", err.Error())
	}
	h := &helper{L: L, env: env, d: d}
	if L.GetTop() == 0 {
		h.overview()
	} else {
		h.value(L.Get(1))
	}
	_, _ = io.WriteString(env.stdout(), h.b.String())
	return 0
}

type helper struct {
	L   *lua.LState
	env *Env
	d   *apiDocs
	b   strings.Builder
}

func (h *helper) printf(format string, args ...any) { fmt.Fprintf(&h.b, format, args...) }

// firstSentence is s up to its first ". " (the whole of a one-liner).
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func (h *helper) overview() {
	h.printf("gglua: Lua scripting of tensor programs on ggml, with PyTorch's semantics and 1-based dims.\n\nLibraries:\n")
	var rows [][2]string
	for _, s := range h.d.sections {
		if s.IsLibrary() {
			rows = append(rows, [2]string{s.Key, firstSentence(s.Summary)})
		}
	}
	h.table(rows)
	h.printf("\nGlobal functions:\n")
	rows = nil
	for _, n := range h.d.roots() {
		if e := h.d.byName[n]; e != nil {
			rows = append(rows, [2]string{e.Signature, e.Summary})
		}
	}
	h.table(rows)
	h.printf("\nObjects: tensors (help(\"tensor\")), modules (help(\"nn.Module\")), optimizer, scheduler, loader, bar.\n")
	h.printf("help(\"name\") for one name (help(\"matmul\"), help(\"tensor.zeros\"), help(\"nn.Linear\")); help(value) for a function, tensor or module.\n")
}

// table prints two columns, the first padded.
func (h *helper) table(rows [][2]string) {
	w := 0
	for _, r := range rows {
		w = max(w, len(r[0]))
	}
	w = min(w, 28)
	for _, r := range rows {
		if len(r[0]) > w {
			h.printf("  %s\n  %-*s  %s\n", r[0], w, "", r[1])
			continue
		}
		h.printf("  %-*s  %s\n", w, r[0], r[1])
	}
}

// value prints the help of a name or a value.
func (h *helper) value(v lua.LValue) {
	if s, ok := v.(lua.LString); ok {
		h.name(string(s))
		return
	}
	switch v.(type) {
	case *lua.LFunction, *lua.LTable:
		for _, it := range h.env.surface(h.L, h.d.roots()) {
			if it.value == v {
				h.name(it.name)
				return
			}
		}
	}
	switch v := v.(type) {
	case *lua.LUserData:
		if t := toTensor(v); t != nil {
			h.tensor(t)
			return
		}
		if toLoader(v) != nil {
			h.printf("%s\n\n", h.L.ToStringMeta(v).String())
			h.name("loader")
			return
		}
	case *lua.LTable:
		h.table_(v)
		return
	case *lua.LFunction:
		h.printf("a function gglua does not document (the script's own, or Lua's standard library's).\n")
		return
	case *lua.LNilType:
		h.printf("help(nil): nothing to describe (a misspelt name?). help() lists what there is.\n")
		return
	}
	h.printf("help: a %s; help() lists what there is.\n", luaTypeName(v))
}

// table_ prints the help of a table that is not a library or a class: a
// module, an optimizer, a scheduler, a progress bar, a shape.
func (h *helper) table_(t *lua.LTable) {
	mt, _ := t.Metatable.(*lua.LTable)
	switch {
	case mt != nil && mt.RawGetString("__index") == mt: // a module instance
		h.printf("a module: %s\n\n", h.L.ToStringMeta(t).String())
		h.class(mt)
	case t.RawGetString("__index") == t: // a class the script made
		h.class(t)
	case mt != nil && mt.RawGetString("__name") == lua.LString("optimizer"):
		h.name("optimizer")
	case mt != nil && mt == h.L.GetTypeMetatable(shapeTypeName):
		h.printf("a shape: %s (a list of sizes, from x:shape())\n", h.L.ToStringMeta(t).String())
	case isFunction(t, "last_epoch") && isFunction(t, "step"):
		h.name("scheduler")
	case isFunction(t, "set") && mt != nil && mt.RawGetString("__call") != lua.LNil:
		h.name("bar")
	default:
		h.printf("a table of %d entries that gglua does not document; help() lists what there is.\n", countEntries(t))
	}
}

func isFunction(t *lua.LTable, k string) bool {
	_, ok := t.RawGetString(k).(*lua.LFunction)
	return ok
}

func countEntries(t *lua.LTable) int {
	n := 0
	t.ForEach(func(_, _ lua.LValue) { n++ })
	return n
}

// class prints a module class: its entry when documented, else its name.
func (h *helper) class(c *lua.LTable) {
	for _, it := range h.env.surface(h.L, h.d.roots()) {
		if it.value == c {
			h.name(it.name)
			return
		}
	}
	h.printf("module class %s (made with nn.Module:extend); its methods: help(\"nn.Module\").\n", h.L.ToStringMeta(c.RawGetString("__name")).String())
}

func (h *helper) tensor(t *core.Tensor) {
	h.printf("a tensor of shape %s, dtype %s, on %s", bracketed(t.Shape()), t.Dtype().String(), t.Device())
	if t.OnDevice() {
		h.printf(" (pool %s)", t.Scope())
	}
	h.printf("\n")
	switch {
	case t.IsLeaf() && t.RequiresGrad():
		h.printf("  a parameter (requires grad): x.grad holds its gradient after backward.\n")
	case t.IsParam():
		h.printf("  a frozen parameter (requires_grad off): it gets no gradient, and optimizers skip it.\n")
	case t.RequiresGrad():
		h.printf("  computed from parameters: backward(x) reaches them.\n")
	}
	h.printf("Its methods: help(\"tensor\") lists them; help(\"matmul\") shows one.\n")
}

// name prints the help of a name: a library, an entry, a method's short
// name, or the methods of an object kind ("optimizer").
func (h *helper) name(s string) {
	d := h.d
	if len(s) > maxHelpName { // no name is this long: nothing to look up, or to echo
		h.printf("no help for a string of %d bytes (names are shorter). help() lists what there is.\n", len(s))
		return
	}
	if sec := d.byKey[s]; sec != nil {
		h.library(sec)
		return
	}
	if e := d.byName[s]; e != nil {
		h.entry(e)
		return
	}
	if rest, ok := strings.CutPrefix(s, "tensor."); ok {
		if e := d.byName["x:"+rest]; e != nil {
			h.entry(e)
			return
		}
	}
	if methods := h.withPrefix(s + ":"); len(methods) > 0 { // "optimizer", "x"
		h.section(d.byKey[methods[0].Section])
		return
	}
	var hits []*DocEntry
	for _, sec := range d.sections {
		for i, e := range sec.Entries {
			if shortName(e.Name) == s {
				hits = append(hits, &sec.Entries[i])
			}
		}
	}
	if len(hits) > 0 {
		for i, e := range hits {
			if i > 0 {
				h.printf("\n")
			}
			h.entry(e)
		}
		return
	}
	h.printf("no help for %q.", s)
	var near []string
	lower := strings.ToLower(s)
	for n := range d.byName {
		if strings.Contains(strings.ToLower(n), lower) {
			near = append(near, n)
		}
	}
	sort.Strings(near)
	if len(near) > 12 {
		near = append(near[:12], "...")
	}
	if len(near) > 0 {
		h.printf(" Close: %s.", strings.Join(near, ", "))
	}
	h.printf(" help() lists what there is.\n")
}

// shortName is a name's last part: "matmul" of "x:matmul", "zeros" of
// "tensor.zeros".
func shortName(n string) string {
	if i := strings.LastIndexAny(n, ".:"); i >= 0 {
		return n[i+1:]
	}
	return n
}

// withPrefix are the entries whose names start with p, in docs.txt's order.
func (h *helper) withPrefix(p string) []*DocEntry {
	var out []*DocEntry
	for _, sec := range h.d.sections {
		for i := range sec.Entries {
			if strings.HasPrefix(sec.Entries[i].Name, p) {
				out = append(out, &sec.Entries[i])
			}
		}
	}
	return out
}

func (h *helper) entry(e *DocEntry) {
	h.printf("%s\n  %s\n", e.Signature, e.Summary)
	if rest, ok := strings.CutPrefix(e.Name, "x:"); ok && h.d.byName["tensor."+rest] == nil {
		h.printf("  Also tensor.%s(x, ...). Tensor methods: help(\"tensor\").\n", rest)
	}
	if methods := h.withPrefix(e.Name + ":"); len(methods) > 0 {
		h.printf("Methods:\n")
		h.entries(methods)
	}
	if rest, ok := strings.CutPrefix(e.Name, "nn."); ok && e.Name != "nn.Module" && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
		h.printf("A module class: every instance also has nn.Module's methods (help(\"nn.Module\")).\n")
	}
}

func (h *helper) entries(es []*DocEntry) {
	rows := make([][2]string, len(es))
	for i, e := range es {
		rows[i] = [2]string{e.Name, e.Summary}
	}
	h.table(rows)
}

func (h *helper) section(sec *DocSection) {
	h.printf("%s: %s\n", sec.Key, sec.Summary)
	es := make([]*DocEntry, len(sec.Entries))
	for i := range sec.Entries {
		es[i] = &sec.Entries[i]
	}
	h.entries(es)
	h.example(sec)
}

// example prints a section's example, indented, if it has one.
func (h *helper) example(sec *DocSection) {
	if sec.Example == "" {
		return
	}
	h.printf("Example:\n")
	for _, line := range strings.Split(sec.Example, "\n") {
		h.printf("%s\n", strings.TrimRight("  "+line, " "))
	}
}

// library prints a library: its summary, its functions and classes (the
// names right under it, wherever docs.txt lists them), its sub-libraries,
// and for tensor the methods.
func (h *helper) library(sec *DocSection) {
	if !sec.IsLibrary() {
		h.section(sec)
		return
	}
	h.printf("%s: %s\n", sec.Key, sec.Summary)
	var children []*DocEntry
	for _, e := range h.withPrefix(sec.Key + ".") {
		if !strings.ContainsAny(e.Name[len(sec.Key)+1:], ".:") {
			children = append(children, e)
		}
	}
	h.entries(children)
	var subs [][2]string
	for _, s := range h.d.sections {
		if rest, ok := strings.CutPrefix(s.Key, sec.Key+"."); ok && s.IsLibrary() && !strings.Contains(rest, ".") {
			subs = append(subs, [2]string{s.Key, firstSentence(s.Summary)})
		}
	}
	if len(subs) > 0 {
		h.printf("Libraries:\n")
		h.table(subs)
	}
	if sec.Key == "tensor" {
		h.printf("Methods (x:name(...), also tensor.name(x, ...)):\n")
		h.entries(h.withPrefix("x:"))
	}
	h.example(sec)
}

// bracketed is a shape as x:shape() prints: [2, 3].
func bracketed(shape []int) string {
	parts := make([]string, len(shape))
	for i, n := range shape {
		parts[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// shapeTypeName is the metatable of the tables x:shape() returns.
const shapeTypeName = "gglua.shape"

// shapeList is sizes as a Lua list that prints as [2, 3].
func shapeList(L *lua.LState, sizes []int) *lua.LTable {
	t := intList(L, sizes)
	mt := L.GetTypeMetatable(shapeTypeName)
	if mt == lua.LNil {
		m := L.NewTypeMetatable(shapeTypeName)
		m.RawSetString("__tostring", L.NewFunction(shapeToString))
		mt = m
	}
	t.Metatable = mt
	return t
}

// shapeToString is a shape's __tostring: its entries as they are now.
func shapeToString(L *lua.LState) int {
	t := L.CheckTable(1)
	parts := make([]string, t.Len())
	for i := range parts {
		parts[i] = L.ToStringMeta(t.RawGetInt(i + 1)).String()
	}
	L.Push(lua.LString("[" + strings.Join(parts, ", ") + "]"))
	return 1
}
