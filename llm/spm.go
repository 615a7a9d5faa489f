package llm

import (
	"container/heap"
	"fmt"
)

// symbol is a run of a text's bytes in the merge loops of both
// tokenizers: a doubly linked list over the text, n = 0 once merged away.
type symbol struct {
	start, n   int
	prev, next int
}

// bigram is a candidate merge of two neighbouring symbols.
type bigram struct {
	left, right int
	score       float32 // SentencePiece: the merged token's score, highest first
	rank        int     // BPE: the merge's rank, lowest first
	text        string
}

// bigrams is the merge queue; ties go to the leftmost pair, as in llama.cpp.
type bigrams struct {
	items []bigram
	bpe   bool
}

func (q *bigrams) Len() int { return len(q.items) }
func (q *bigrams) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if q.bpe && a.rank != b.rank {
		return a.rank < b.rank
	}
	if !q.bpe && a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}
func (q *bigrams) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *bigrams) Push(x any)    { q.items = append(q.items, x.(bigram)) }
func (q *bigrams) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// join merges symbol right into left, its neighbour, and unlinks it.
func join(syms []symbol, left, right int) {
	l, r := &syms[left], &syms[right]
	l.n += r.n
	r.n = 0
	l.next = r.next
	if r.next >= 0 {
		syms[r.next].prev = left
	}
}

// utf8Len is the length llama.cpp gives the character a byte starts (its
// high bits; a stray continuation byte is a character of its own).
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// symbols splits text into characters (at most its end).
func symbols(text string) []symbol {
	var syms []symbol
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

// spm tokenizes text (spaces already escaped as ▁) as SentencePiece does
// in llama.cpp: characters merged pairwise into the highest-scoring token
// until none applies; what is left and not a token becomes byte tokens.
func (v *Tokenizer) spm(text string, out []int) ([]int, error) {
	syms := symbols(text)
	q := &bigrams{}
	try := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		s := text[syms[left].start : syms[left].start+syms[left].n+syms[right].n]
		if id, ok := v.ids[s]; ok {
			heap.Push(q, bigram{left: left, right: right, score: v.scores[id], text: s})
		}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		b := heap.Pop(q).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != len(b.text) {
			continue // one side was merged since
		}
		join(syms, b.left, b.right)
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	for i := 0; i >= 0 && len(syms) > 0; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := v.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			id, ok := v.ids[fmt.Sprintf("<0x%02X>", s[j])]
			if !ok {
				id, ok = v.ids[s[j:j+1]]
			}
			if !ok {
				return nil, fmt.Errorf("tokenize: the byte 0x%02X has no token in this vocabulary", s[j])
			}
			out = append(out, id)
		}
	}
	return out, nil
}
