package llm

import (
	"container/heap"
	"strings"
	"unicode"
)

// bpe tokenizes text as llama.cpp's byte-level BPE: the pre-tokenizer
// splits it into words, each word's bytes are spelled as GPT-2's
// printable code points, and each word's characters are merged by rank.
func (v *Tokenizer) bpe(text string, out []int) []int {
	cpts := codepoints(text)
	start := 0
	for _, n := range v.split(cpts) {
		var w strings.Builder
		for _, c := range cpts[start : start+n] {
			for _, b := range appendCodepoint(nil, c) {
				w.WriteString(byteRunes[b])
			}
		}
		start += n
		out = v.bpeWord(w.String(), out)
	}
	return out
}

// bpeWord merges one pre-tokenized word's characters, the lowest-ranked
// merge first.
func (v *Tokenizer) bpeWord(word string, out []int) []int {
	if id, ok := v.ids[word]; ok && v.ignoreMerges {
		return append(out, id)
	}
	syms := symbols(word)
	q := &bigrams{bpe: true}
	text := func(i int) string { return word[syms[i].start : syms[i].start+syms[i].n] }
	add := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		if rank, ok := v.ranks[[2]string{text(left), text(right)}]; ok {
			heap.Push(q, bigram{left: left, right: right, rank: rank, text: text(left) + text(right)})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	for q.Len() > 0 {
		b := heap.Pop(q).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || text(b.left)+text(b.right) != b.text {
			continue // outdated
		}
		join(syms, b.left, b.right)
		add(l.prev, b.left)
		add(b.left, l.next)
	}
	for i := 0; i >= 0 && len(syms) > 0; i = syms[i].next {
		s := text(i)
		if id, ok := v.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ { // as llama.cpp: each byte that is a token
			if id, ok := v.ids[s[j:j+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// byteRunes spells each byte as GPT-2's byte-level BPE does: printable
// Latin-1 bytes as themselves, the others as code points from 256 on.
var byteRunes, runeBytes = func() ([256]string, map[rune]byte) {
	var spell [256]string
	back := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			r = rune(256 + n)
			n++
		}
		spell[b] = string(r)
		back[r] = byte(b)
	}
	return spell, back
}()

// decodeBytes turns a BPE token's text back into its bytes; a code point
// that spells no byte shows as llama.cpp shows it.
func decodeBytes(text string) string {
	var b []byte
	for _, c := range codepoints(text) {
		if x, ok := runeBytes[c]; ok {
			b = append(b, x)
			continue
		}
		b = append(b, "[UNK_BYTE_0x"...)
		for _, u := range appendCodepoint(nil, c) {
			b = append(b, "0123456789abcdef"[u>>4], "0123456789abcdef"[u&15])
		}
		b = append(b, text...)
		b = append(b, ']')
	}
	return string(b)
}

// codepoints decodes UTF-8 as llama.cpp does: a byte that starts no valid
// sequence is U+FFFD; lead and continuation bits are all it checks.
func codepoints(s string) []rune {
	cont := func(i int) bool { return i < len(s) && s[i]&0xC0 == 0x80 }
	var out []rune
	for i := 0; i < len(s); {
		b := rune(s[i])
		switch {
		case b < 0x80:
			out, i = append(out, b), i+1
		case b&0x40 == 0:
			out, i = append(out, 0xFFFD), i+1
		case b&0x20 == 0 && cont(i+1):
			out, i = append(out, (b&0x1F)<<6|rune(s[i+1])&0x3F), i+2
		case b&0x20 == 0:
			out, i = append(out, 0xFFFD), i+1
		case b&0x10 == 0 && cont(i+1) && cont(i+2):
			out, i = append(out, (b&0x0F)<<12|(rune(s[i+1])&0x3F)<<6|rune(s[i+2])&0x3F), i+3
		case b&0x10 == 0:
			out, i = append(out, 0xFFFD), i+1
		case b&0x08 == 0 && cont(i+1) && cont(i+2) && cont(i+3):
			c := (b&0x07)<<18 | (rune(s[i+1])&0x3F)<<12 | (rune(s[i+2])&0x3F)<<6 | rune(s[i+3])&0x3F
			if c > unicode.MaxRune { // llama.cpp throws on these; one replacement character here
				c = 0xFFFD
			}
			out, i = append(out, c), i+4
		default:
			out, i = append(out, 0xFFFD), i+1
		}
	}
	return out
}

// appendCodepoint encodes c as llama.cpp does (surrogates included, as
// three bytes).
func appendCodepoint(b []byte, c rune) []byte {
	switch {
	case c <= 0x7F:
		return append(b, byte(c))
	case c <= 0x7FF:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c)&0x3F)
	case c <= 0xFFFF:
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	}
	return append(b, 0xF0|byte(c>>18), 0x80|byte(c>>12)&0x3F, 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
}
