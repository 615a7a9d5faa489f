package runtime

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// string.format and string.byte as Lua 5.1's manual describes them.
// gopher-lua handed the format and the Lua values to Go's fmt.Sprintf: a
// missing argument printed "%!d(MISSING)", "%5.1f" of the string "3"
// printed "%!f(lua.LString=3)", "%g" printed every digit, and string.byte(s)
// returned every byte instead of the first. Checked against lua5.1
// (testdata/lua51_patterns.json).

// formatDirective is one "%[flags][width][.precision]conversion".
type formatDirective struct {
	flags      string
	width      string // at most two digits, as in Lua 5.1
	precision  string // "" when absent, else "." and at most two digits
	conversion byte
}

// parseDirective reads the directive after a '%' at f[i:] and returns it
// with the index after it, or an error message.
func parseDirective(f string, i int) (formatDirective, int, string) {
	var d formatDirective
	start := i
	for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
		i++
	}
	if i-start > 5 {
		return d, i, "invalid format (repeated flags)"
	}
	d.flags = f[start:i]
	digits := func() (string, bool) {
		from := i
		for i < len(f) && '0' <= f[i] && f[i] <= '9' {
			i++
		}
		return f[from:i], i-from <= 2
	}
	var ok bool
	if d.width, ok = digits(); !ok {
		return d, i, "invalid format (width or precision too long)"
	}
	if i < len(f) && f[i] == '.' {
		i++
		p, ok := digits()
		if !ok {
			return d, i, "invalid format (width or precision too long)"
		}
		d.precision = "." + p
	}
	if i == len(f) {
		return d, i, "invalid option '%' to 'format'"
	}
	d.conversion = f[i]
	return d, i + 1, ""
}

// format is string.format(f, ...).
func (s *guardedLib) format(L *lua.LState) int {
	f := L.CheckString(1)
	var b strings.Builder
	arg := 1
	for i := 0; i < len(f); {
		if f[i] != '%' {
			next := strings.IndexByte(f[i:], '%')
			if next < 0 {
				next = len(f) - i
			}
			b.WriteString(f[i : i+next])
			i += next
			continue
		}
		if i+1 < len(f) && f[i+1] == '%' {
			b.WriteByte('%')
			i += 2
			continue
		}
		d, next, bad := parseDirective(f, i+1)
		if bad != "" {
			L.RaiseError("%s", bad)
		}
		i = next
		arg++
		if s.sandbox && b.Len() > maxStringBytes {
			s.tooBig(L, "string.format", float64(b.Len()))
		}
		b.WriteString(formatOne(L, d, arg))
	}
	if s.sandbox && b.Len() > maxStringBytes {
		s.tooBig(L, "string.format", float64(b.Len()))
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// formatOne formats argument arg by the directive d.
func formatOne(L *lua.LState, d formatDirective, arg int) string {
	spec := "%" + d.flags + d.width + d.precision
	switch d.conversion {
	case 'd', 'i':
		return fmt.Sprintf(spec+"d", int64(L.CheckNumber(arg)))
	case 'o', 'x', 'X':
		return fmt.Sprintf(spec+string(d.conversion), uint64(int64(L.CheckNumber(arg))))
	case 'u':
		return fmt.Sprintf(spec+"d", uint64(int64(L.CheckNumber(arg))))
	case 'c': // one byte, as C's (Go's %c writes a rune's UTF-8)
		return padBytes(string([]byte{byte(int64(L.CheckNumber(arg)))}), d)
	case 'e', 'E', 'f', 'g', 'G':
		x := float64(L.CheckNumber(arg))
		if math.IsInf(x, 0) || math.IsNaN(x) { // C's words, not Go's "+Inf" and "NaN"
			text := "inf"
			switch {
			case math.IsNaN(x):
				text = "nan"
			case x < 0:
				text = "-inf"
			case strings.Contains(d.flags, "+"):
				text = "+inf"
			}
			if d.conversion == 'E' || d.conversion == 'G' {
				text = strings.ToUpper(text)
			}
			return fmt.Sprintf("%"+strings.Trim(d.flags, "0+ #")+d.width+"s", text)
		}
		if d.precision == "" && (d.conversion == 'g' || d.conversion == 'G') {
			spec += ".6" // C's default; Go's %g prints every digit
		}
		return fmt.Sprintf(spec+string(d.conversion), x)
	case 'q':
		return quoteLua(L.CheckString(arg))
	case 's':
		v := L.CheckAny(arg)
		text := lua.LVAsString(v)
		if _, ok := v.(lua.LString); !ok {
			if _, isNum := v.(lua.LNumber); !isNum {
				text = L.ToStringMeta(v).String() // tostring's text, __tostring included
			}
		}
		if d.precision != "" { // at most that many bytes, as C's (Go counts runes); "." alone is 0
			p, _ := strconv.Atoi(d.precision[1:])
			text = text[:min(p, len(text))]
		}
		return padBytes(text, d)
	}
	L.RaiseError("invalid option '%%%c' to 'format'", d.conversion)
	return ""
}

// padBytes is text padded with spaces to d's width in bytes (Lua 5.1's C
// printf counts bytes; Go's counts runes), on the right with the '-' flag.
func padBytes(text string, d formatDirective) string {
	w, err := strconv.Atoi(d.width)
	if err != nil || w <= len(text) {
		return text
	}
	if strings.Contains(d.flags, "-") {
		return text + strings.Repeat(" ", w-len(text))
	}
	return strings.Repeat(" ", w-len(text)) + text
}

// quoteLua is %q: a string Lua reads back as the same bytes.
func quoteLua(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString("\\\n")
		case '\r':
			b.WriteString("\\r")
		case 0:
			b.WriteString("\\000")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// stringByte is string.byte(s [, i [, j]]): the codes of s[i..j], i
// defaulting to 1 and j to i, negative from the end; in a sandbox at most
// maxResults of them.
func (s *guardedLib) stringByte(L *lua.LState) int {
	str := L.CheckString(1)
	i := L.OptInt(2, 1)
	first, last := max(relativePosition(i, len(str)), 1), min(relativePosition(L.OptInt(3, i), len(str)), len(str))
	if first > last {
		return 0
	}
	if s.sandbox && last-first+1 > maxResults {
		L.RaiseError("string slice too long")
	}
	for k := first; k <= last; k++ {
		L.Push(lua.LNumber(str[k-1]))
	}
	return last - first + 1
}

// relativePosition is Lua 5.1's reading of a string position: negative
// counts from the end.
func relativePosition(p, n int) int {
	if p < 0 {
		return p + n + 1
	}
	return p
}
