// Package luapattern matches Lua 5.1 patterns (the reference manual,
// §5.4.1) in a way a caller can stop.
//
// gopher-lua's matcher cannot be interrupted: a backtracking pattern such
// as ".-.-.-.-b" on a long subject runs for hours inside one call to
// string.match, where no check between VM instructions reaches it. This
// matcher asks a Check function every few thousand steps and ends with its
// error. It is written from the manual's description and checked against
// the reference interpreter's answers (testdata/lua51_patterns.json, made
// by scripts/reference/lua_patterns.lua under lua5.1).
//
// A pattern is checked whole when it is compiled (Compile), so a malformed
// pattern is an error even where Lua 5.1 would not have reached the broken
// part; matching itself cannot fail except through Check.
package luapattern

import (
	"errors"
	"fmt"
)

// ErrMalformed is the error of a pattern that is not a Lua pattern; the
// message says why, in Lua's words.
var ErrMalformed = errors.New("malformed pattern")

// maxCaptures is Lua 5.1's LUA_MAXCAPTURES.
const maxCaptures = 32

// maxDepth bounds the matcher's recursion (one level per pattern item
// that can backtrack): a pattern of a million '?' items would otherwise
// take a million Go frames.
const maxDepth = 5000

// checkEvery is how many matching steps go between two calls of Check.
const checkEvery = 1 << 12

// Pattern is a compiled (checked) pattern.
type Pattern struct {
	src      string
	start    int // where matching begins in src: 1 after an anchoring '^'
	captures int
}

// Compile checks pattern p. A '^' at its start anchors it.
func Compile(p string) (*Pattern, error) { return compile(p, true) }

// CompileUnanchored checks p for string.gmatch, where a leading '^' is an
// ordinary character (Lua 5.1: an anchor would prevent the iteration).
func CompileUnanchored(p string) (*Pattern, error) { return compile(p, false) }

// Anchored reports whether p matches only at the position it is tried at
// first.
func (p *Pattern) Anchored() bool { return p.start == 1 }

// Capture is one capture of a match: the text s[Start:End], or for a
// position capture "()" the 1-based position Start+1 (End == Start).
type Capture struct {
	Start, End int
	Position   bool
}

// Match is one match: the subject's s[Start:End] and the captures.
type Match struct {
	Start, End int
	Captures   []Capture
}

// Matcher matches compiled patterns; Check (may be nil) is asked every few
// thousand steps and an error from it ends the match.
type Matcher struct {
	Check func() error
	st    state // reused from one MatchAt to the next; its step count carries over
}

// MatchAt tries p against s at byte offset at (0 <= at <= len(s)) only,
// and returns the match or nil.
func (m *Matcher) MatchAt(p *Pattern, s string, at int) (*Match, error) {
	st := &m.st
	st.s, st.p, st.check, st.caps, st.err = s, p.src, m.Check, st.caps[:0], nil
	end := st.match(at, p.start, 0)
	if st.err != nil {
		return nil, st.err
	}
	if end < 0 {
		return nil, nil
	}
	out := &Match{Start: at, End: end, Captures: make([]Capture, len(st.caps))}
	for i, c := range st.caps {
		if c.length == positionCapture {
			out.Captures[i] = Capture{Start: c.start, End: c.start, Position: true}
		} else {
			out.Captures[i] = Capture{Start: c.start, End: c.start + c.length}
		}
	}
	return out, nil
}

// The length a capture has while it is open, and the one of a position
// capture.
const (
	openCapture     = -1
	positionCapture = -2
)

type capture struct{ start, length int }

// state is one attempt of a pattern at one position.
type state struct {
	s, p  string
	caps  []capture
	steps int
	check func() error
	err   error
}

// tick counts n steps of work and reports whether matching must stop.
func (st *state) tick(n int) bool {
	if st.err != nil {
		return true
	}
	st.steps += n
	if st.steps >= checkEvery {
		st.steps = 0
		if st.check != nil {
			st.err = st.check()
		}
	}
	return st.err != nil
}

// match matches p[pi:] against s[si:] and returns where the match ends in
// s, or -1. depth counts its nested calls.
func (st *state) match(si, pi, depth int) int {
	if depth > maxDepth {
		st.err = fmt.Errorf("%w (pattern too complex)", ErrMalformed)
		return -1
	}
	s, p := st.s, st.p
	for {
		if st.tick(1) {
			return -1
		}
		if pi == len(p) {
			return si
		}
		switch p[pi] {
		case '(':
			if pi+1 < len(p) && p[pi+1] == ')' {
				return st.withCapture(si, pi+2, positionCapture, depth)
			}
			return st.withCapture(si, pi+1, openCapture, depth)
		case ')':
			return st.closingCapture(si, pi+1, depth)
		case '$':
			if pi+1 == len(p) {
				if si == len(s) {
					return si
				}
				return -1
			}
		case '%':
			switch c := p[pi+1]; {
			case c == 'b':
				if si = st.balanced(si, p[pi+2], p[pi+3]); si < 0 {
					return -1
				}
				pi += 4
				continue
			case c == 'f':
				end := setEnd(p, pi+2)
				prev, next := byte(0), byte(0)
				if si > 0 {
					prev = s[si-1]
				}
				if si < len(s) {
					next = s[si]
				}
				if inSet(prev, p, pi+2, end) || !inSet(next, p, pi+2, end) {
					return -1
				}
				pi = end
				continue
			case c >= '0' && c <= '9':
				if si = st.backReference(si, int(c-'1')); si < 0 {
					return -1
				}
				pi += 2
				continue
			}
		}
		// A single-character class, maybe followed by a quantifier.
		end := itemEnd(p, pi)
		ok := si < len(s) && matchesItem(s[si], p, pi, end)
		if end < len(p) {
			switch p[end] {
			case '?':
				if ok {
					if r := st.match(si+1, end+1, depth+1); r >= 0 {
						return r
					}
				}
				pi = end + 1
				continue
			case '*':
				return st.longest(si, pi, end, depth)
			case '+':
				if !ok {
					return -1
				}
				return st.longest(si+1, pi, end, depth)
			case '-':
				return st.shortest(si, pi, end, depth)
			}
		}
		if !ok {
			return -1
		}
		si, pi = si+1, end
	}
}

// longest matches the item p[pi:end] as many times as it can from si, then
// the rest of the pattern, giving back one repetition at a time.
func (st *state) longest(si, pi, end, depth int) int {
	n := 0
	for si+n < len(st.s) && matchesItem(st.s[si+n], st.p, pi, end) {
		n++
	}
	st.tick(n)
	for ; n >= 0; n-- {
		if r := st.match(si+n, end+1, depth+1); r >= 0 || st.err != nil {
			return r
		}
	}
	return -1
}

// shortest matches the item p[pi:end] as few times as it can from si
// before the rest of the pattern.
func (st *state) shortest(si, pi, end, depth int) int {
	for {
		if r := st.match(si, end+1, depth+1); r >= 0 || st.err != nil {
			return r
		}
		if si >= len(st.s) || !matchesItem(st.s[si], st.p, pi, end) {
			return -1
		}
		si++
	}
}

// withCapture opens a capture at si and matches the rest from pi.
func (st *state) withCapture(si, pi, length, depth int) int {
	st.caps = append(st.caps, capture{start: si, length: length})
	r := st.match(si, pi, depth+1)
	if r < 0 {
		st.caps = st.caps[:len(st.caps)-1]
	}
	return r
}

// closingCapture closes the innermost open capture at si and matches the
// rest from pi.
func (st *state) closingCapture(si, pi, depth int) int {
	l := len(st.caps) - 1
	for st.caps[l].length != openCapture { // Compile saw the '(' of this ')'
		l--
	}
	st.caps[l].length = si - st.caps[l].start
	r := st.match(si, pi, depth+1)
	if r < 0 {
		st.caps[l].length = openCapture
	}
	return r
}

// balanced matches %bxy at si: an x, then text where x and y balance, then
// the y that closes the first x. It returns the end or -1.
func (st *state) balanced(si int, open, close byte) int {
	s := st.s
	if si >= len(s) || s[si] != open {
		return -1
	}
	level := 1
	for i := si + 1; i < len(s); i++ {
		switch s[i] {
		case close: // checked first, as Lua does: %bxx closes at the next x
			if level--; level == 0 {
				st.tick(i - si)
				return i + 1
			}
		case open:
			level++
		}
	}
	st.tick(len(s) - si)
	return -1
}

// backReference matches the text of capture l (closed, Compile checked)
// again at si.
func (st *state) backReference(si, l int) int {
	c := st.caps[l]
	if c.length == positionCapture { // Lua 5.1 reads its length as huge: never matches
		return -1
	}
	text := st.s[c.start : c.start+c.length]
	if len(st.s)-si < len(text) || st.s[si:si+len(text)] != text {
		return -1
	}
	return si + len(text)
}

// itemEnd is where the single-character class at p[pi] ends: after '%x',
// after a set's ']', else after one character.
func itemEnd(p string, pi int) int {
	switch p[pi] {
	case '%':
		return pi + 2
	case '[':
		return setEnd(p, pi)
	}
	return pi + 1
}

// setEnd is the index after the ']' that closes the set opening at p[pi]
// (Compile checked it is there). The first character of the set, after
// an optional '^', is never the closing ']' ("[]]" is the set of ']').
func setEnd(p string, pi int) int {
	i := pi + 1
	if i < len(p) && p[i] == '^' {
		i++
	}
	for first := true; ; first = false {
		if i >= len(p) {
			return -1
		}
		if p[i] == ']' && !first {
			return i + 1
		}
		if p[i] == '%' {
			i++
		}
		i++
	}
}

// matchesItem reports whether c is in the class p[pi:end].
func matchesItem(c byte, p string, pi, end int) bool {
	switch p[pi] {
	case '.':
		return true
	case '%':
		return inClass(c, p[pi+1])
	case '[':
		return inSet(c, p, pi, end)
	}
	return p[pi] == c
}

// inSet reports whether c is in the set p[pi:end] ('[' ... ']').
func inSet(c byte, p string, pi, end int) bool {
	i, last := pi+1, end-1 // last is the closing ']'
	negate := p[i] == '^'
	if negate {
		i++
	}
	for ; i < last; i++ {
		switch {
		case p[i] == '%' && i+1 < last:
			i++
			if inClass(c, p[i]) {
				return !negate
			}
		case i+2 < last && p[i+1] == '-':
			if p[i] <= c && c <= p[i+2] {
				return !negate
			}
			i += 2
		case p[i] == c:
			return !negate
		}
	}
	return negate
}

// inClass reports whether c is in the class %cl: a letter names a class
// (its capital the complement), any other character stands for itself.
func inClass(c, cl byte) bool {
	var in bool
	switch cl | 0x20 {
	case 'a':
		in = isAlpha(c)
	case 'c':
		in = c < 0x20 || c == 0x7f
	case 'd':
		in = '0' <= c && c <= '9'
	case 'l':
		in = 'a' <= c && c <= 'z'
	case 'p':
		in = c > 0x20 && c < 0x7f && !isAlpha(c) && !('0' <= c && c <= '9')
	case 's':
		in = c == ' ' || ('\t' <= c && c <= '\r')
	case 'u':
		in = 'A' <= c && c <= 'Z'
	case 'w':
		in = isAlpha(c) || ('0' <= c && c <= '9')
	case 'x':
		in = ('0' <= c && c <= '9') || ('a' <= c|0x20 && c|0x20 <= 'f')
	case 'z':
		in = c == 0
	default:
		return cl == c
	}
	if 'A' <= cl && cl <= 'Z' {
		return !in
	}
	return in
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// compile checks pattern p whole, in the order Lua 5.1 would meet its
// errors, and counts its captures.
func compile(p string, anchor bool) (*Pattern, error) {
	pat := &Pattern{src: p}
	if anchor && len(p) > 0 && p[0] == '^' {
		pat.start = 1
	}
	bad := func(why string) (*Pattern, error) { return nil, fmt.Errorf("%w (%s)", ErrMalformed, why) }
	var open []int // the captures still open, innermost last
	var closed []bool
	for i := pat.start; i < len(p); {
		switch p[i] {
		case '(':
			if len(closed) == maxCaptures {
				return bad("too many captures")
			}
			if i+1 < len(p) && p[i+1] == ')' {
				closed = append(closed, true)
				i += 2
			} else {
				open = append(open, len(closed))
				closed = append(closed, false)
				i++
			}
			continue
		case ')':
			if len(open) == 0 {
				return bad("invalid pattern capture")
			}
			closed[open[len(open)-1]] = true
			open = open[:len(open)-1]
			i++
			continue
		case '%':
			if i+1 == len(p) {
				return bad("ends with '%'")
			}
			switch c := p[i+1]; {
			case c == 'b':
				if i+3 >= len(p) {
					return bad("unbalanced pattern: %b needs two characters")
				}
				i += 4
				continue
			case c == 'f':
				if i+2 >= len(p) || p[i+2] != '[' {
					return bad("missing '[' after '%f' in pattern")
				}
				end := setEnd(p, i+2)
				if end < 0 {
					return bad("missing ']'")
				}
				i = end
				continue
			case c >= '0' && c <= '9':
				if l := int(c - '1'); l < 0 || l >= len(closed) || !closed[l] {
					return bad(fmt.Sprintf("invalid capture index %%%c", c))
				}
				i += 2
				continue
			}
		}
		end := itemEnd(p, i)
		if end < 0 {
			return bad("missing ']'")
		}
		i = end
		if i < len(p) && (p[i] == '?' || p[i] == '*' || p[i] == '+' || p[i] == '-') {
			i++
		}
	}
	if len(open) > 0 {
		return bad("unfinished capture")
	}
	pat.captures = len(closed)
	return pat, nil
}
