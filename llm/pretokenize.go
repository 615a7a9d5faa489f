package llm

import "unicode"

// The BPE pre-tokenizers split a text into words before merging, by the
// regular expressions of GPT-2 and Llama 3. llama.cpp matches them with
// hand-written scanners, whose results these follow exactly (including
// where they differ from the expressions); each returns the words'
// lengths in code points.

// scanner is a text's code points with llama.cpp's character classes;
// positions past the end are in no class.
type scanner struct {
	c    []rune
	lens []int
	end  int // where the last word ended
}

func (s *scanner) in(p int) bool     { return p >= 0 && p < len(s.c) }
func (s *scanner) letter(p int) bool { return s.in(p) && unicode.IsLetter(s.c[p]) }
func (s *scanner) number(p int) bool { return s.in(p) && unicode.IsNumber(s.c[p]) }
func (s *scanner) space(p int) bool  { return s.in(p) && isSpace(s.c[p]) }
func (s *scanner) other(p int) bool  { return !s.space(p) && !s.letter(p) && !s.number(p) }
func (s *scanner) newline(p int) bool {
	return s.in(p) && (s.c[p] == '\r' || s.c[p] == '\n')
}

// word ends the current word at p and returns p.
func (s *scanner) word(p int) int {
	if p > s.end {
		s.lens = append(s.lens, p-s.end)
	}
	s.end = p
	return p
}

// isSpace is the regular expressions' \s, as llama.cpp's table has it.
func isSpace(c rune) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return c >= 0x2000 && c <= 0x200A
}

// contraction is the length of 's 't 're 've 'm 'll 'd at p (lower case
// only unless fold), or 0.
func (s *scanner) contraction(p int, fold bool) int {
	if s.c[p] != '\'' || !s.in(p+1) {
		return 0
	}
	at := func(i int) rune {
		if !s.in(i) {
			return -1
		}
		if fold {
			return unicode.ToLower(s.c[i])
		}
		return s.c[i]
	}
	switch a := at(p + 1); {
	case a == 's' || a == 't' || a == 'm' || a == 'd':
		return 2
	case s.in(p+2) && (a == 'r' || a == 'v') && at(p+2) == 'e', s.in(p+2) && a == 'l' && at(p+2) == 'l':
		return 3
	}
	return 0
}

// spaces scans the white space at p: its length and, for Llama 3, the
// end of its last line break (0 if none).
func (s *scanner) spaces(p int) (n, lastBreak int) {
	for s.space(p + n) {
		if s.newline(p + n) {
			lastBreak = p + n + 1
		}
		n++
	}
	return n, lastBreak
}

// splitGPT2 is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(c []rune) []int {
	s := &scanner{c: c}
	for p := 0; p < len(c); {
		if n := s.contraction(p, false); n > 0 {
			p = s.word(p + n)
			continue
		}
		q := p // after an optional leading space
		if c[p] == ' ' {
			q = p + 1
		}
		var class func(int) bool
		switch {
		case s.letter(q):
			class = s.letter
		case s.number(q):
			class = s.number
		case s.in(q) && s.other(q):
			class = s.other
		}
		if class != nil {
			for q < len(c) && class(q) {
				q++
			}
			p = s.word(q)
			continue
		}
		p = s.word(p + whitespace(s, p))
	}
	return s.lens
}

// whitespace is \s+(?!\S)|\s+ at p: all of a run of spaces, less its last
// where something follows it (that space then leads the next word); one
// character where p is not a space.
func whitespace(s *scanner, p int) int {
	n, _ := s.spaces(p)
	switch {
	case n > 1 && s.in(p+n):
		return n - 1
	case n > 0:
		return n
	}
	return 1
}

// splitLlama3 is (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(c []rune) []int {
	s := &scanner{c: c}
	for p := 0; p < len(c); {
		if n := s.contraction(p, true); n > 0 {
			p = s.word(p + n)
			continue
		}
		if !s.newline(p) && !s.number(p) && (s.letter(p) || s.letter(p+1)) {
			for p++; s.letter(p); p++ {
			}
			p = s.word(p)
			continue
		}
		if s.number(p) {
			for start := p; s.number(p); {
				if p++; p-start >= 3 {
					start = s.word(p)
				}
			}
			p = s.word(p)
			continue
		}
		q := p
		if c[p] == ' ' {
			q = p + 1
		}
		if s.other(q) { // past the end counts too: a last lone space is a word
			for s.in(q) && s.other(q) {
				q++
			}
			for s.newline(q) {
				q++
			}
			p = s.word(q)
			continue
		}
		if _, lastBreak := s.spaces(p); lastBreak > 0 {
			p = s.word(lastBreak)
			continue
		}
		p = s.word(p + whitespace(s, p))
	}
	return s.lens
}
