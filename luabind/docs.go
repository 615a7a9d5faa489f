package luabind

//go:generate go run ../scripts/gendocs

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
)

// The API's one doc source is docs.txt: help() reads it, docs/API.md is
// generated from it (go run ./scripts/gendocs) and docs_test.go checks that
// it names exactly what the Lua globals reach.
//
// Its format, one item a line ('#' starts a comment line):
//
//	[nn] Neural-network layers and functions.        a section: a library's name, or a title with a space
//	nn.Linear(in_features, out_features, bias=true) -- A linear layer.   an entry: signature -- summary
//	```lua                                             a section's example: Lua lines, kept verbatim,
//	local m = nn.Linear(2, 3)                          up to a line ``` (at most one a section)
//	```
//
// Examples are printed by help("section") and under the section in
// docs/API.md, whose every ```lua block tests/docs_examples_test.go runs.
//
// An entry's name is its signature up to the first '(' or '{': "tensor.zeros",
// "x:matmul" (a tensor method, also tensor.matmul(x, ...)), "nn.Linear",
// "nn.Module:parameters", "optimizer:step" (a method of what optim.sgd
// returns).

//go:embed docs.txt
var docsSource string

// DocEntry documents one Lua name.
type DocEntry struct {
	Name      string // "tensor.zeros", "x:matmul", "nn.Linear"
	Signature string // PyTorch-style argument names, 1-based dims
	Summary   string // one line
	Section   string // the key of its section
}

// DocSection is a library, or a group of names under a title.
type DocSection struct {
	Key     string // a library's Lua name ("nn.init"), or a title (has a space)
	Summary string
	Entries []DocEntry
	Example string // Lua code, one or more lines without the last newline; "" if none
}

// IsLibrary says whether the section's key is a Lua name (a library table).
func (s *DocSection) IsLibrary() bool { return !strings.Contains(s.Key, " ") }

// apiDocs is docs.txt parsed, with its indexes.
type apiDocs struct {
	sections []*DocSection
	byName   map[string]*DocEntry
	byKey    map[string]*DocSection
}

var loadDocs = sync.OnceValues(func() (*apiDocs, error) { return parseDocs(docsSource) })

// Docs returns the API documentation, section by section, as docs.txt
// orders it.
func Docs() ([]DocSection, error) {
	d, err := loadDocs()
	if err != nil {
		return nil, err
	}
	out := make([]DocSection, len(d.sections))
	for i, s := range d.sections {
		out[i] = *s
	}
	return out, nil
}

// parseDocs reads the format described above.
func parseDocs(src string) (*apiDocs, error) {
	d := &apiDocs{byName: map[string]*DocEntry{}, byKey: map[string]*DocSection{}}
	var cur *DocSection
	names := map[string]bool{}
	var example []string // the lines of an open example, nil outside one
	exampleLine := 0     // where the open example started
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		lineNo := i + 1
		if example != nil { // inside ```lua ... ```: Lua, kept as it is
			if line != "```" {
				example = append(example, strings.TrimRight(raw, " \t\r"))
				continue
			}
			if len(example) == 1 {
				return nil, fmt.Errorf("docs.txt:%d: an empty example", exampleLine)
			}
			cur.Example = strings.Join(example[1:], "\n")
			example = nil
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == "```lua":
			switch {
			case cur == nil:
				return nil, fmt.Errorf("docs.txt:%d: an example before any [section]", lineNo)
			case cur.Example != "":
				return nil, fmt.Errorf("docs.txt:%d: a second example in [%s] (one a section)", lineNo, cur.Key)
			}
			example, exampleLine = []string{line}, lineNo
		case strings.HasPrefix(line, "["):
			end := strings.Index(line, "]")
			if end < 2 {
				return nil, fmt.Errorf("docs.txt:%d: a section is [key] summary", lineNo)
			}
			key := line[1:end]
			if d.byKey[key] != nil {
				return nil, fmt.Errorf("docs.txt:%d: section [%s] twice", lineNo, key)
			}
			cur = &DocSection{Key: key, Summary: strings.TrimSpace(line[end+1:])}
			d.sections = append(d.sections, cur)
			d.byKey[key] = cur
		default:
			if cur == nil {
				return nil, fmt.Errorf("docs.txt:%d: an entry before any [section]", lineNo)
			}
			sig, summary, ok := strings.Cut(line, " -- ")
			sig, summary = strings.TrimSpace(sig), strings.TrimSpace(summary)
			if !ok || sig == "" || summary == "" {
				return nil, fmt.Errorf("docs.txt:%d: an entry is: signature -- summary", lineNo)
			}
			name := sig
			if i := strings.IndexAny(sig, "({ "); i >= 0 {
				name = sig[:i]
			}
			if names[name] {
				return nil, fmt.Errorf("docs.txt:%d: %s documented twice", lineNo, name)
			}
			names[name] = true
			cur.Entries = append(cur.Entries, DocEntry{Name: name, Signature: sig, Summary: summary, Section: cur.Key})
		}
	}
	if example != nil {
		return nil, fmt.Errorf("docs.txt:%d: an example that no ``` line closes", exampleLine)
	}
	for _, s := range d.sections {
		for i := range s.Entries {
			d.byName[s.Entries[i].Name] = &s.Entries[i]
		}
	}
	return d, nil
}

// surfaceItem is a name the Lua globals reach and the value it has.
type surfaceItem struct {
	name    string
	value   lua.LValue
	library bool // a library table (its doc is a section)
}

// moduleStandard are the methods every module class may define, documented
// once, as nn.Module's: a subclass's own are not names of their own.
var moduleStandard = map[string]bool{"init": true, "forward": true, "describe": true, "new": true}

// surface lists every function, library table and module class reachable
// from the given globals, named as docs.txt names them. The tensor methods
// are "x:name"; tensor.name that is a method is one of them.
func (env *Env) surface(L *lua.LState, roots []string) []surfaceItem {
	var out []surfaceItem
	seen := map[*lua.LTable]bool{}
	functionNames := map[string]bool{}
	for k := range env.tensorFunctions() {
		functionNames[k] = true
	}
	tensorLib := L.GetGlobal("tensor")
	var walk func(name string, v lua.LValue)
	walk = func(name string, v lua.LValue) {
		switch v := v.(type) {
		case *lua.LFunction:
			out = append(out, surfaceItem{name: name, value: v})
		case *lua.LTable:
			if seen[v] {
				return
			}
			seen[v] = true
			if rawget(v, "__index") == v { // a module class
				out = append(out, surfaceItem{name: name, value: v})
				_, hasParent := v.Metatable.(*lua.LTable)
				for _, k := range sortedKeys(v) {
					if f, ok := v.RawGetString(k).(*lua.LFunction); ok && !strings.HasPrefix(k, "__") && !(hasParent && moduleStandard[k]) {
						out = append(out, surfaceItem{name: name + ":" + k, value: f})
					}
				}
				return
			}
			out = append(out, surfaceItem{name: name, value: v, library: true})
			for _, k := range sortedKeys(v) {
				if strings.HasPrefix(k, "__") {
					continue
				}
				child := name + "." + k
				if v == tensorLib && !functionNames[k] && env.methods != nil && env.methods.RawGetString(k) != lua.LNil {
					child = "x:" + k // a method, also callable as tensor.k(x, ...)
					out = append(out, surfaceItem{name: child, value: v.RawGetString(k)})
					continue
				}
				walk(child, v.RawGetString(k))
			}
		}
	}
	for _, r := range roots {
		walk(r, L.GetGlobal(r))
	}
	if env.methods != nil {
		for _, k := range sortedKeys(env.methods) {
			out = append(out, surfaceItem{name: "x:" + k, value: env.methods.RawGetString(k)})
		}
	}
	return out
}

func rawget(t *lua.LTable, k string) lua.LValue { return t.RawGetString(k) }

// sortedKeys are t's string keys, sorted.
func sortedKeys(t *lua.LTable) []string {
	var ks []string
	t.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); ok {
			ks = append(ks, string(s))
		}
	})
	sort.Strings(ks)
	return ks
}

// roots are the globals the docs name: the libraries and global functions.
func (d *apiDocs) roots() []string {
	var out []string
	for _, s := range d.sections {
		if s.IsLibrary() && !strings.ContainsAny(s.Key, ".:") {
			out = append(out, s.Key)
		}
		for _, e := range s.Entries {
			if !strings.ContainsAny(e.Name, ".:") {
				out = append(out, e.Name)
			}
		}
	}
	return out
}

// APIMarkdown is docs/API.md: every section of docs.txt, in its order.
func APIMarkdown() (string, error) {
	d, err := loadDocs()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# gglua Lua API\n\n")
	b.WriteString("<!-- Generated from luabind/docs.txt by `go run ./scripts/gendocs` (or `go generate ./luabind`). DO NOT EDIT. -->\n\n")
	b.WriteString("Every name the gglua globals hold, grouped by library. Dims and indices are 1-based;\n")
	b.WriteString("argument names follow PyTorch. `x:name(...)` is a tensor method, also callable as\n")
	b.WriteString("`tensor.name(x, ...)`. In the REPL, `help(\"name\")` or `help(value)` prints the same text.\n\n")
	for _, s := range d.sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", s.Key, anchor(s.Key))
	}
	for _, s := range d.sections {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.Key, s.Summary) // each part starts with its blank line
		if len(s.Entries) > 0 {
			b.WriteString("\n| name | description |\n| --- | --- |\n")
			for _, e := range s.Entries {
				fmt.Fprintf(&b, "| `%s` | %s |\n", strings.ReplaceAll(e.Signature, "|", "\\|"), strings.ReplaceAll(e.Summary, "|", "\\|"))
			}
		}
		if s.Example != "" {
			fmt.Fprintf(&b, "\nExample:\n\n```lua\n%s\n```\n", s.Example)
		}
	}
	return b.String(), nil
}

// anchor is GitHub's heading anchor for a section key.
func anchor(key string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
