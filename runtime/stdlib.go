package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The standard library functions that a script could use to run past its
// deadline or to take the host's memory in one call, which no check
// between VM instructions reaches.
//
// Every runtime gets string.find, match, gmatch (and gfind) and gsub on a
// pattern matcher that asks the call's context every few thousand steps
// (strpattern.go, internal/luapattern): a backtracking pattern such as
// ".-.-.-.-b" on a long string ends with the context. gmatch and gsub go
// match by match, and table.concat joins in one pass (gopher-lua's pushed
// every element on the Lua stack, which grows one step at a time: a table
// of a million strings took minutes). These follow Lua 5.1's manual, and
// the pattern functions are checked against the lua5.1 interpreter.
//
// A sandbox also bounds what one call may make:
//   - strings: string.rep, string.gsub, string.format, table.concat and
//     the ".." operator (a call luacompile makes of it: concatOp) refuse a
//     result of more than maxStringBytes (an ErrMemory);
//   - values pushed at once: unpack and string.byte refuse more than
//     maxResults (Lua 5.1's own limit; gopher-lua grows its stack one
//     step per value, so a million took minutes);
//   - table.sort of a long table without a comparator compares through a
//     function that asks the context;
//   - coroutines start with small stacks (smallThreads).

// maxStringBytes bounds the strings that string.rep, string.gsub,
// string.format and table.concat make in a sandbox: string.rep("x", 1e12)
// would otherwise take the host down in one call.
const maxStringBytes = 64 << 20

// maxResults bounds how many values unpack and string.byte push in a
// sandbox: Lua 5.1's LUAI_MAXCSTACK ("too many results to unpack").
const maxResults = 8000

// sortCheckLen is the length from which a sandbox's table.sort without a
// comparator compares through a Go function that asks the context.
const sortCheckLen = 1 << 14

// guardedLib holds what the replaced functions of one runtime share.
type guardedLib struct {
	sandbox bool
	causes  *causes
}

// causes remembers the Go errors behind the Lua errors that the runtime's
// own functions raise (as luabind does for its bindings), so that a
// host's errors.Is reaches them.
type causes struct {
	list [8]struct {
		msg string
		err error
	}
	next int
}

// raise raises err's message as a Lua error and remembers err.
func (c *causes) raise(L *lua.LState, err error) {
	msg := err.Error()
	c.list[c.next%len(c.list)].msg, c.list[c.next%len(c.list)].err = msg, err
	c.next++
	L.RaiseError("%s", msg)
}

// cause is the latest remembered error whose message luaMessage holds.
func (c *causes) cause(luaMessage string) error {
	for i := 1; i <= len(c.list); i++ {
		r := c.list[(c.next-i+2*len(c.list))%len(c.list)]
		if r.err != nil && strings.Contains(luaMessage, r.msg) {
			return r.err
		}
	}
	return nil
}

// installStdlib replaces the functions described above in L's libraries.
func installStdlib(L *lua.LState, sandbox bool, c *causes) {
	s := &guardedLib{sandbox: sandbox, causes: c}
	if str, ok := L.GetGlobal("string").(*lua.LTable); ok {
		str.RawSetString("find", L.NewFunction(s.find))
		str.RawSetString("match", L.NewFunction(s.match))
		gmatch := L.NewFunction(s.gmatch)
		str.RawSetString("gmatch", gmatch)
		str.RawSetString("gfind", gmatch)
		str.RawSetString("gsub", L.NewFunction(s.gsub))
		str.RawSetString("format", L.NewFunction(s.format))
		str.RawSetString("byte", L.NewFunction(s.stringByte))
		if sandbox {
			str.RawSetString("rep", L.NewFunction(s.bounded("string.rep", str.RawGetString("rep"), repBytes)))
		}
	}
	if tab, ok := L.GetGlobal("table").(*lua.LTable); ok {
		tab.RawSetString("concat", L.NewFunction(s.concat))
		if sandbox {
			tab.RawSetString("sort", L.NewFunction(s.sort(tab.RawGetString("sort"))))
		}
	}
	if sandbox {
		L.SetGlobal(sandboxConcat, L.NewFunction(s.concatOp))
		L.SetGlobal("unpack", L.NewFunction(s.counted(L.GetGlobal("unpack"), unpackCount, "too many results to unpack")))
		if co, ok := L.GetGlobal("coroutine").(*lua.LTable); ok {
			for _, name := range []string{"create", "wrap"} {
				if f, ok := co.RawGetString(name).(*lua.LFunction); ok && f.IsG {
					co.RawSetString(name, L.NewFunction(smallThreads(f.GFunction)))
				}
			}
		}
	}
}

// smallThreads wraps coroutine.create or wrap so that the coroutine's call
// stack and Lua stack start small and grow on demand: gopher-lua gives each
// the main thread's full call stack (CallStackSize frames, some 300 KB),
// and a loop making coroutines would take gigabytes in milliseconds,
// faster than the heap watchdog looks.
func smallThreads(fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		saved := L.Options
		L.Options.MinimizeStackMemory = true
		L.Options.RegistrySize = 128
		L.Options.RegistryGrowStep = 1024
		defer func() { L.Options = saved }()
		return fn(L) // in this frame: its arguments and name
	}
}

// stop is the error that ended the call L runs in (its context's cause),
// or nil.
func stop(L *lua.LState) error {
	if ctx := L.Context(); ctx != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// tooBig raises the sandbox's size error for a result of n bytes.
func (s *guardedLib) tooBig(L *lua.LState, fn string, n float64) {
	s.causes.raise(L, fmt.Errorf("%s: a result of %.0f bytes is more than the %d a sandbox allows: %w", fn, n, maxStringBytes, ErrMemory))
}

// table.concat(t [, sep [, i [, j]]]), as Lua 5.1's manual has it: the
// strings or numbers t[i] .. sep .. t[j] (i defaults to 1, j to #t), joined
// in one pass (gopher-lua pushed every element on its stack, which grows one
// step at a time: a million strings took minutes); in a sandbox the result
// is bounded by maxStringBytes.
func (s *guardedLib) concat(L *lua.LState) int {
	tbl := L.CheckTable(1)
	sep := ""
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		sep = L.CheckString(2) // a number is its text
	}
	i, j := L.OptInt(3, 1), L.OptInt(4, tbl.Len())
	size := 0.0
	for k := i; k <= j; k++ {
		switch v := tbl.RawGetInt(k).(type) {
		case lua.LString:
			size += float64(len(v))
		case lua.LNumber:
			size += 24 // a number's text is at most this long
		default:
			L.RaiseError("invalid value (at index %d) in table for 'concat'", k)
		}
		if k < j {
			size += float64(len(sep))
		}
	}
	if s.sandbox && size > maxStringBytes {
		s.tooBig(L, "table.concat", size)
	}
	var b strings.Builder
	b.Grow(int(min(size, maxStringBytes)))
	for k := i; k <= j; k++ {
		if k%(1<<16) == 0 {
			if err := stop(L); err != nil {
				s.causes.raise(L, fmt.Errorf("table.concat: %w", err))
			}
		}
		b.WriteString(lua.LVAsString(tbl.RawGetInt(k)))
		if k < j {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// bounded wraps a string function of the sandbox: size gives an upper
// bound of its result's bytes from its arguments, and a bound past
// maxStringBytes is an error.
func (s *guardedLib) bounded(fn string, orig lua.LValue, size func(L *lua.LState) float64) lua.LGFunction {
	return func(L *lua.LState) int {
		if n := size(L); n > maxStringBytes {
			s.tooBig(L, fn, n)
		}
		return callOriginal(L, orig)
	}
}

// callOriginal calls orig with this call's arguments and returns its
// results.
func callOriginal(L *lua.LState, orig lua.LValue) int {
	args := L.GetTop()
	L.Push(orig)
	for i := 1; i <= args; i++ {
		L.Push(L.Get(i))
	}
	L.Call(args, lua.MultRet)
	return L.GetTop() - args
}

// sandboxConcat is the global that a sandbox's ".." calls (luacompile's
// Options.Concat), named so that no script refers to it by accident.
const sandboxConcat = "(..)" // a name no Lua source spells: tracebacks show "in function '(..)'"

// concatOp is a sandbox's "..": luacompile makes every chain a .. b .. c a
// call of it, and it joins as the VM does (right to left, a run of strings
// and numbers at once, __concat for the rest), but refuses a result past
// maxStringBytes before making it: s = s .. s in a loop reached 4 GiB in
// one step, past any limit the heap watchdog checks between allocations.
func (s *guardedLib) concatOp(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.RaiseError("concat: no operands")
	}
	rhs := L.Get(n)
	for i := n - 1; i >= 1; {
		lhs := L.Get(i)
		if lua.LVCanConvToString(lhs) && lua.LVCanConvToString(rhs) {
			// The run of strings and numbers ending at rhs, each made a
			// string once, right to left.
			run, size := []string{lua.LVAsString(rhs)}, float64(0)
			for ; i >= 1 && lua.LVCanConvToString(L.Get(i)); i-- {
				run = append(run, lua.LVAsString(L.Get(i)))
			}
			for _, p := range run {
				size += float64(len(p))
			}
			if size > maxStringBytes {
				s.tooBig(L, "..", size)
			}
			slices.Reverse(run)
			rhs = lua.LString(strings.Join(run, ""))
			continue
		}
		op := L.GetMetaField(lhs, "__concat")
		if op == lua.LNil {
			op = L.GetMetaField(rhs, "__concat")
		}
		if op.Type() != lua.LTFunction {
			L.RaiseError("cannot perform concat operation between %s and %s", lhs.Type().String(), rhs.Type().String())
		}
		L.Push(op)
		L.Push(lhs)
		L.Push(rhs)
		L.Call(2, 1)
		rhs = L.Get(-1)
		L.Pop(1)
		i--
	}
	L.Push(rhs)
	return 1
}

// repBytes bounds string.rep(s, n [, sep]).
func repBytes(L *lua.LState) float64 {
	s, n := L.CheckString(1), L.CheckNumber(2)
	return float64(n) * float64(len(s)+len(L.OptString(3, "")))
}

// counted wraps a function of the sandbox that pushes count(L) values: more
// than maxResults is the error msg, as in Lua 5.1.
func (s *guardedLib) counted(orig lua.LValue, count func(L *lua.LState) float64, msg string) lua.LGFunction {
	return func(L *lua.LState) int {
		if count(L) > maxResults {
			L.RaiseError("%s", msg)
		}
		return callOriginal(L, orig)
	}
}

// unpackCount is how many values unpack(t, i, j) pushes.
func unpackCount(L *lua.LState) float64 {
	tb := L.CheckTable(1)
	start := L.OptInt(2, 1)
	end := L.OptInt(3, tb.Len())
	return float64(end) - float64(start) + 1
}

// sort wraps table.sort: a long table sorted without a comparator is
// compared through a Go function that asks the context (the same order:
// it answers as the built-in comparison does).
func (s *guardedLib) sort(orig lua.LValue) lua.LGFunction {
	return func(L *lua.LState) int {
		if L.GetTop() == 1 && L.CheckTable(1).Len() >= sortCheckLen {
			calls := 0
			L.Push(L.NewFunction(func(L *lua.LState) int {
				if calls++; calls%(1<<12) == 0 {
					if err := stop(L); err != nil {
						s.causes.raise(L, fmt.Errorf("table.sort: %w", err))
					}
				}
				L.Push(lua.LBool(L.LessThan(L.Get(1), L.Get(2))))
				return 1
			}))
		}
		return callOriginal(L, orig)
	}
}
