package llm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gglua/gglua/ggmlcgo"
)

// Token types, as llama.cpp's converters write tokenizer.ggml.token_type.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Tokenizer is a model's tokenizer as llama.cpp reads it from the file's
// tokenizer.ggml keys: SentencePiece ("llama") or byte-level BPE ("gpt2",
// with the GPT-2 or Llama 3 pre-tokenizer). Token ids are 0-based.
type Tokenizer struct {
	kind, pre string // tokenizer.ggml.model and .pre
	tokens    []string
	scores    []float32
	types     []int32
	ids       map[string]int    // text to id; the last of equal texts wins, as in llama.cpp
	merges    []string          // BPE merges as the file lists them ("a b")
	ranks     map[[2]string]int // a merge's rank, the first of equal pairs wins
	special   []int             // control, user-defined and unknown tokens, longest text first

	BOS, EOS int // -1 where the vocabulary has none
	eog      map[int]bool

	addBOS, addEOS, addSpacePrefix, cleanSpaces, ignoreMerges bool
	split                                                     func([]rune) []int // BPE's pre-tokenizer: word lengths in code points
	unsupported                                               error              // why Tokenize refuses, for a tokenizer gglua does not implement
}

// readTokenizer reads the tokenizer of a model file whose embedding has n
// rows; a file without one gives nil (logits by id still work).
func readTokenizer(g *ggmlcgo.GGUFFile, n int) (*Tokenizer, error) {
	kind, ok := g.String("tokenizer.ggml.model")
	if !ok {
		return nil, nil
	}
	v := &Tokenizer{kind: kind, BOS: -1, EOS: -1, eog: map[int]bool{}}
	v.pre, _ = g.String("tokenizer.ggml.pre")
	if v.tokens, ok = g.Strings("tokenizer.ggml.tokens"); !ok {
		return nil, fmt.Errorf("tokenizer.ggml.tokens is missing or not an array of strings")
	}
	if len(v.tokens) != n {
		return nil, fmt.Errorf("tokenizer.ggml.tokens has %d tokens, the embedding %d rows", len(v.tokens), n)
	}
	if scores, ok := g.Floats("tokenizer.ggml.scores"); ok {
		if len(scores) < n {
			return nil, fmt.Errorf("tokenizer.ggml.scores has %d scores for %d tokens", len(scores), n)
		}
		for _, s := range scores[:n] {
			v.scores = append(v.scores, float32(s))
		}
	} else {
		v.scores = make([]float32, n)
	}
	if types, ok := g.Ints("tokenizer.ggml.token_type"); ok {
		if len(types) < n {
			return nil, fmt.Errorf("tokenizer.ggml.token_type has %d types for %d tokens", len(types), n)
		}
		for _, t := range types[:n] {
			v.types = append(v.types, int32(t))
		}
	} else {
		v.types = make([]int32, n)
		for i := range v.types {
			v.types[i] = typeNormal
		}
	}
	v.ids = make(map[string]int, n)
	for i, t := range v.tokens {
		if t == "" {
			t = "[EMPTY_" + strconv.Itoa(i) + "]"
			v.tokens[i] = t
		}
		v.ids[t] = i
	}
	switch kind {
	case "llama":
		v.BOS, v.EOS = 1, 2
		v.addBOS, v.addSpacePrefix = true, true
	case "gpt2":
		v.BOS, v.EOS = 11, 11
		v.cleanSpaces = true
		merges, ok := g.Strings("tokenizer.ggml.merges")
		if !ok {
			return nil, fmt.Errorf("tokenizer.ggml.merges is missing: a BPE tokenizer needs its merges")
		}
		v.merges = merges
		v.ranks = make(map[[2]string]int, len(merges))
		for i, m := range merges {
			var pair [2]string
			if j := strings.IndexByte(m[min(1, len(m)):], ' '); j >= 0 {
				pair = [2]string{m[:j+1], m[j+2:]}
			}
			if _, dup := v.ranks[pair]; !dup {
				v.ranks[pair] = i
			}
		}
		switch v.pre {
		case "gpt-2", "phi-2", "mpt", "olmo":
			v.split = splitGPT2
		case "llama3", "llama-v3", "llama-bpe":
			v.split, v.ignoreMerges, v.addBOS = splitLlama3, true, true
		default:
			v.unsupported = fmt.Errorf("the BPE pre-tokenizer %q is not one gglua implements (gpt-2, llama-bpe)", v.pre)
		}
	default:
		v.unsupported = fmt.Errorf("the tokenizer %q is not one gglua implements (llama: SentencePiece, gpt2: BPE)", kind)
	}
	for _, k := range []struct {
		key string
		dst *int
	}{{"tokenizer.ggml.bos_token_id", &v.BOS}, {"tokenizer.ggml.eos_token_id", &v.EOS}} {
		if *k.dst >= n {
			*k.dst = -1
		}
		if id, ok := g.Int(k.key); ok && id >= 0 && id < int64(n) {
			*k.dst = int(id)
		}
	}
	for _, k := range []struct {
		key string
		dst *bool
	}{{"tokenizer.ggml.add_bos_token", &v.addBOS}, {"tokenizer.ggml.add_eos_token", &v.addEOS},
		{"tokenizer.ggml.add_space_prefix", &v.addSpacePrefix}} {
		if b, ok := g.Bool(k.key); ok {
			*k.dst = b
		}
	}
	if v.addBOS && v.BOS < 0 || v.addEOS && v.EOS < 0 {
		return nil, fmt.Errorf("the tokenizer adds a BOS or EOS token it does not name")
	}
	// Generation ends at the end-of-sequence token, the end-of-turn ones
	// the file names, and the chat templates' end tokens, as llama.cpp's.
	if v.EOS >= 0 {
		v.eog[v.EOS] = true
	}
	for _, key := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if id, ok := g.Int(key); ok && id >= 0 && id < int64(n) {
			v.eog[int(id)] = true
		}
	}
	for _, t := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "<|eom_id|>"} {
		if id, ok := v.ids[t]; ok && v.types[id] == typeControl {
			v.eog[id] = true
		}
	}
	for id, t := range v.types {
		if t == typeControl || t == typeUserDefined || t == typeUnknown {
			v.special = append(v.special, id)
		}
	}
	sort.SliceStable(v.special, func(i, j int) bool { return len(v.tokens[v.special[i]]) > len(v.tokens[v.special[j]]) })
	return v, nil
}

// IsEnd says whether id ends a generation (end of sequence or of a turn).
func (v *Tokenizer) IsEnd(id int) bool { return v.eog[id] }

// Tokenize is llama.cpp's llama_tokenize: text to 0-based ids, with the
// BOS (and EOS) the vocabulary asks for where addSpecial, and special
// tokens' texts ("<s>", "<|eot_id|>") read as those tokens where
// parseSpecial (user-defined tokens always are).
func (v *Tokenizer) Tokenize(text string, addSpecial, parseSpecial bool) ([]int, error) {
	if v.unsupported != nil {
		return nil, v.unsupported
	}
	var out []int
	if addSpecial && v.addBOS {
		out = append(out, v.BOS)
	}
	prevSpecial := true // SentencePiece prefixes a space to the text after a special token
	for _, f := range v.partition(text, parseSpecial) {
		if f.id >= 0 {
			out = append(out, f.id)
			prevSpecial = true
			continue
		}
		var err error
		if v.kind == "llama" {
			s := f.text
			if v.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out, err = v.spm(strings.ReplaceAll(s, " ", "▁"), out)
		} else {
			out = v.bpe(f.text, out)
		}
		if err != nil {
			return nil, err
		}
		prevSpecial = false
	}
	if addSpecial && v.addEOS {
		out = append(out, v.EOS)
	}
	return out, nil
}

// fragment is a piece of the text to tokenize, or a special token found in it.
type fragment struct {
	text string
	id   int // -1 for text
}

// partition splits text at the special tokens' texts, longest first, as
// llama.cpp's tokenizer_st_partition does.
func (v *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{text, -1}}
	for _, id := range v.special {
		if !parseSpecial && v.types[id] != typeUserDefined {
			continue
		}
		tok := v.tokens[id]
		var next []fragment
		for _, f := range frags {
			for f.id < 0 {
				i := strings.Index(f.text, tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{f.text[:i], -1})
				}
				next = append(next, fragment{tok, id})
				f.text = f.text[i+len(tok):]
				if f.text == "" {
					break
				}
			}
			if f.id >= 0 || f.text != "" {
				next = append(next, f)
			}
		}
		frags = next
	}
	return frags
}

// Detokenize is llama.cpp's llama_detokenize of 0-based ids, special tokens
// neither removed nor shown: each token's text, SentencePiece's first
// prefixed space dropped, BPE's spaces before punctuation cleaned.
func (v *Tokenizer) Detokenize(ids []int) (string, error) {
	var b []byte
	lstrip := v.addSpacePrefix
	for i, id := range ids {
		if id < 0 || id >= len(v.tokens) {
			return "", fmt.Errorf("detokenize: token %d (id %d) is outside the vocabulary of %d", i+1, id, len(v.tokens))
		}
		piece := v.piece(id)
		if lstrip && strings.HasPrefix(piece, " ") {
			piece = piece[1:]
		}
		lstrip = false
		b = append(b, piece...)
	}
	if v.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b), nil
}

// piece is one token's text as llama.cpp's token_to_piece gives it.
func (v *Tokenizer) piece(id int) string {
	text := v.tokens[id]
	switch v.types[id] {
	case typeUserDefined:
		return text
	case typeNormal:
		if v.kind == "llama" {
			return strings.ReplaceAll(text, "▁", " ")
		}
		return decodeBytes(text)
	case typeByte:
		if len(text) == 6 {
			if b, err := strconv.ParseUint(text[3:5], 16, 8); err == nil {
				return string([]byte{byte(b)})
			}
		}
	}
	return "" // control, unknown and unused tokens show nothing
}

// cleanSpaces undoes a BPE tokenizer's spaces before punctuation and
// English contractions (" ?" " 's" " ' "), as llama.cpp's clean_spaces
// does: three passes compacting t in place, each reading what the pass
// has already written (which decides chains like " ' ' ").
func cleanSpaces(t []byte) []byte {
	if len(t) == 0 {
		return t
	}
	n := len(t)
	pass := func(step func(i, n int, total *int) int) {
		total := 1
		for i := 1; i < n; i++ {
			i = step(i, n, &total)
		}
		n = total
	}
	pass(func(i, n int, total *int) int { // " ?" " !" " ." " ,"
		x := t[i]
		if t[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			*total--
		}
		t[*total] = x
		*total++
		return i
	})
	pass(func(i, n int, total *int) int { // " ' "
		x := t[i]
		if x == '\'' && i+1 < n && t[i-1] == ' ' && t[i+1] == ' ' {
			*total--
			i++
			t[i] = 0
		}
		t[*total] = x
		*total++
		return i
	})
	pass(func(i, n int, total *int) int { // " 's" " 'm" " 're" " 've"
		x := t[i]
		if t[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := t[i+1]
			if x1 == 's' || x1 == 'm' || i+2 < n && (x1 == 'r' || x1 == 'v') && t[i+2] == 'e' {
				*total--
			}
		}
		t[*total] = x
		*total++
		return i
	})
	return t[:n]
}
