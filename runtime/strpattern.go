package runtime

import (
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/runtime/internal/luapattern"
)

// string.find, match, gmatch and gsub as Lua 5.1's manual describes them
// (§5.4), on internal/luapattern: a matcher that asks the call's context
// every few thousand steps, so a backtracking pattern on a long subject
// ends with the script's deadline. Their answers are checked against the
// lua5.1 interpreter's (testdata/lua51_patterns.json). Two deliberate
// differences, both errors where 5.1 went on: a malformed pattern is an
// error even where 5.1 would not have reached the broken part, and a
// replacement string ending in a lone '%' is an error (5.1 added a NUL).

// specials are the characters that make a pattern more than plain text.
const specials = "^$*+?.([%-"

// matcher is a pattern matcher that stops when L's call ends.
func matcher(L *lua.LState) *luapattern.Matcher {
	return &luapattern.Matcher{Check: func() error { return stop(L) }}
}

// compilePattern compiles the pattern argument of fn, or raises its error.
func (s *guardedLib) compilePattern(L *lua.LState, fn, p string, anchor bool) *luapattern.Pattern {
	compile := luapattern.Compile
	if !anchor {
		compile = luapattern.CompileUnanchored
	}
	pat, err := compile(p)
	if err != nil {
		s.matchFailed(L, fn, err)
	}
	return pat
}

// matchFailed raises a matcher's error: a malformed pattern in Lua's
// words, the end of the call (deadline, memory) with its cause.
func (s *guardedLib) matchFailed(L *lua.LState, fn string, err error) {
	if errors.Is(err, luapattern.ErrMalformed) {
		L.RaiseError("%s: %s", fn, err.Error())
	}
	s.causes.raise(L, fmt.Errorf("%s: %w", fn, err))
}

// startIndex is Lua 5.1's reading of a start position: 1-based, negative
// from the end, clamped to [0, len(str)] as a Go offset.
func startIndex(str string, pos int) int {
	if pos < 0 {
		pos += len(str) + 1
	}
	return min(max(pos-1, 0), len(str))
}

// search finds the first match of pat in str from offset at (only there if
// pat is anchored).
func (s *guardedLib) search(L *lua.LState, fn string, pat *luapattern.Pattern, str string, at int) *luapattern.Match {
	m := matcher(L)
	for ; at <= len(str); at++ {
		md, err := m.MatchAt(pat, str, at)
		if err != nil {
			s.matchFailed(L, fn, err)
		}
		if md != nil || pat.Anchored() {
			return md
		}
	}
	return nil
}

// pushCapture pushes capture i of md, or the whole match when md has no
// captures and i is 0; a higher index is an error.
func pushCapture(L *lua.LState, str string, md *luapattern.Match, i int) {
	switch {
	case i < len(md.Captures) && md.Captures[i].Position:
		L.Push(lua.LNumber(md.Captures[i].Start + 1))
	case i < len(md.Captures):
		L.Push(lua.LString(str[md.Captures[i].Start:md.Captures[i].End]))
	case i == 0:
		L.Push(lua.LString(str[md.Start:md.End]))
	default:
		L.RaiseError("invalid capture index %%%d", i+1)
	}
}

// pushCaptures pushes every capture of md (the whole match if it has none)
// and returns how many.
func pushCaptures(L *lua.LState, str string, md *luapattern.Match) int {
	n := max(len(md.Captures), 1)
	for i := range n {
		pushCapture(L, str, md, i)
	}
	return n
}

// string.find(s, pattern [, init [, plain]]): where the first match starts
// and ends, then its captures; nil if none.
func (s *guardedLib) find(L *lua.LState) int {
	str, p := L.CheckString(1), L.CheckString(2)
	at := startIndex(str, L.OptInt(3, 1))
	if lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(p, specials) {
		if i := strings.Index(str[at:], p); i >= 0 {
			L.Push(lua.LNumber(at + i + 1))
			L.Push(lua.LNumber(at + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	md := s.search(L, "string.find", s.compilePattern(L, "string.find", p, true), str, at)
	if md == nil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(lua.LNumber(md.Start + 1))
	L.Push(lua.LNumber(md.End))
	for i := range md.Captures {
		pushCapture(L, str, md, i)
	}
	return 2 + len(md.Captures)
}

// string.match(s, pattern [, init]): the captures of the first match (the
// match itself if it has none); nil if none.
func (s *guardedLib) match(L *lua.LState) int {
	str, p := L.CheckString(1), L.CheckString(2)
	at := startIndex(str, L.OptInt(3, 1))
	md := s.search(L, "string.match", s.compilePattern(L, "string.match", p, true), str, at)
	if md == nil {
		L.Push(lua.LNil)
		return 1
	}
	return pushCaptures(L, str, md)
}

// string.gmatch(s, pattern): an iterator over the matches, found one at a
// time; an empty match moves on by one character. A leading '^' is an
// ordinary character here, as in Lua 5.1.
func (s *guardedLib) gmatch(L *lua.LState) int {
	str, p := L.CheckString(1), L.CheckString(2)
	pat := s.compilePattern(L, "string.gmatch", p, false)
	next := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := matcher(L)
		for at := next; at <= len(str); at++ {
			md, err := m.MatchAt(pat, str, at)
			if err != nil {
				s.matchFailed(L, "string.gmatch", err)
			}
			if md != nil {
				next = md.End
				if md.End == at {
					next++
				}
				return pushCaptures(L, str, md)
			}
		}
		next = len(str) + 1
		return 0
	}))
	return 1
}

// string.gsub(s, pattern, repl [, n]): s with its first n matches (all by
// default) replaced, and how many were; in a sandbox the result is bounded
// by maxStringBytes.
func (s *guardedLib) gsub(L *lua.LState) int {
	str, p := L.CheckString(1), L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTTable, lua.LTFunction:
	default:
		L.ArgError(3, "string/function/table expected")
	}
	limit := L.OptInt(4, len(str)+1)
	pat := s.compilePattern(L, "string.gsub", p, true)
	m := matcher(L)
	var out strings.Builder
	grow := func(text string) {
		if s.sandbox && out.Len()+len(text) > maxStringBytes {
			s.tooBig(L, "string.gsub", float64(out.Len())+float64(len(text)))
		}
		out.WriteString(text)
	}
	at, count := 0, 0
	for count < limit {
		md, err := m.MatchAt(pat, str, at)
		if err != nil {
			s.matchFailed(L, "string.gsub", err)
		}
		if md != nil {
			count++
			grow(s.replacement(L, str, repl, md))
		}
		switch {
		case md != nil && md.End > at:
			at = md.End
		case at < len(str):
			grow(str[at : at+1])
			at++
		default:
			at = len(str) + 1
		}
		if at > len(str) || pat.Anchored() {
			break
		}
	}
	if at <= len(str) {
		grow(str[at:])
	}
	L.Push(lua.LString(out.String()))
	L.Push(lua.LNumber(count))
	return 2
}

// replacement is what gsub puts in place of the match md: repl's text
// with its %-escapes, the table's value at the first capture, or the
// function's result for the captures; false or nil keeps the match.
func (s *guardedLib) replacement(L *lua.LState, str string, repl lua.LValue, md *luapattern.Match) string {
	var value lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		return expandReplacement(L, str, lua.LVAsString(r), md)
	case *lua.LTable:
		pushCapture(L, str, md, 0)
		value = L.GetTable(r, L.Get(-1))
		L.Pop(1)
	case *lua.LFunction:
		top := L.GetTop()
		L.Push(r)
		L.Call(pushCaptures(L, str, md), 1)
		value = L.Get(-1)
		L.SetTop(top)
	}
	switch value.Type() {
	case lua.LTNil:
		return str[md.Start:md.End]
	case lua.LTBool:
		if value == lua.LFalse {
			return str[md.Start:md.End]
		}
	case lua.LTString, lua.LTNumber:
		return lua.LVAsString(value)
	}
	L.RaiseError("invalid replacement value (a %s)", value.Type().String())
	return ""
}

// expandReplacement reads a gsub replacement string: "%0" is the match,
// "%1".."%9" a capture, '%' before any other character is that character.
func expandReplacement(L *lua.LState, str, repl string, md *luapattern.Match) string {
	if !strings.Contains(repl, "%") {
		return repl
	}
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i++; i == len(repl) {
			L.RaiseError("invalid use of '%%' in replacement string")
		}
		switch d := repl[i]; {
		case d == '0':
			b.WriteString(str[md.Start:md.End])
		case '1' <= d && d <= '9':
			pushCapture(L, str, md, int(d-'1'))
			b.WriteString(lua.LVAsString(L.Get(-1)))
			L.Pop(1)
		default:
			b.WriteByte(d)
		}
	}
	return b.String()
}
