package llm

import (
	"encoding/hex"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// The vocabularies llama.cpp tests its tokenizers with (models/ in its
// source): SentencePiece (Llama 2), and byte-level BPE with the Llama 3
// and the GPT-2 pre-tokenizers.
var testVocabs = []string{"llama-spm", "llama-bpe", "gpt-2"}

func loadTokenizer(t *testing.T, path string) *Tokenizer {
	t.Helper()
	g, err := ggmlcgo.OpenGGUF(path)
	require.NoError(t, err)
	defer g.Close()
	tokens, ok := g.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	tok, err := readTokenizer(g, len(tokens))
	require.NoError(t, err)
	return tok
}

// llama.cpp's own test vectors (.inp: texts between __ggml_vocab_test__
// lines; .out: the ids of each), tokenized as its test-tokenizer-0 does:
// no BOS, special tokens not parsed.
func TestTokenizerVectors(t *testing.T) {
	ref := findLlamaRef(t)
	for _, name := range testVocabs {
		path := filepath.Join(ref.src, "models", "ggml-vocab-"+name+".gguf")
		tok := loadTokenizer(t, path)
		inp, err := os.ReadFile(path + ".inp")
		require.NoError(t, err)
		out, err := os.ReadFile(path + ".out")
		require.NoError(t, err)
		const sep = "\n__ggml_vocab_test__\n"
		texts := strings.Split(strings.TrimSuffix(string(inp), sep), sep)
		want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		require.Len(t, want, len(texts), name)
		for i, text := range texts {
			ids, err := tok.Tokenize(text, false, false)
			require.NoError(t, err)
			assert.Equal(t, strings.TrimSpace(want[i]), joinIDs(ids), "%s: %q", name, text)
		}
	}
}

// Texts no test vector has (broken UTF-8, special tokens' texts, every
// kind of white space and contraction, mixed scripts) and random id
// sequences, through llama.cpp's llama_tokenize and llama_detokenize and
// through gglua's, for each vocabulary.
func TestTokenizerAsLlamaCpp(t *testing.T) {
	ref := findLlamaRef(t)
	pieces := []string{"Hello", "world", " ", "  ", "   ", "\n", "\r\n", "\n\n", "\t", " \t\n ", "'s", "'RE", "'ll", "'",
		"ve", "123", "4567", "3.14", "é", "É", "我们", "🦙", "😶\u200d🌫️", "\xff", "\xc3", "\xe2\x96", "\xed\xa0\x80",
		"<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|endoftext|>", "?", "!", " ,", ".", "—", "\u00a0", "\u3000",
		"Ǆ", "ا", "ק", "ก", "▁", "▁▁", "Ġ", "x", "ABC", "__", "```", "$", "½", "Ⅻ", "\x00", "\x7f"}
	rng := rand.New(rand.NewSource(1))
	var texts []string
	for i := 0; i < 300; i++ {
		var b strings.Builder
		for k := rng.Intn(12); k >= 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, name := range testVocabs {
		path := filepath.Join(ref.src, "models", "ggml-vocab-"+name+".gguf")
		tok := loadTokenizer(t, path)
		var in strings.Builder
		for _, s := range texts {
			in.WriteString(hex.EncodeToString([]byte(s)) + "\n")
		}
		want := ref.lines(t, in.String(), path, "--tokenize")
		require.Len(t, want, len(texts))
		special := ref.lines(t, in.String(), path, "--tokenize-special")
		require.Len(t, special, len(texts))
		var seqs []string
		for i, s := range texts {
			ids, err := tok.Tokenize(s, false, false)
			require.NoError(t, err)
			assert.Equal(t, want[i], joinIDs(ids), "%s: tokenize %q", name, s)
			ids, err = tok.Tokenize(s, true, true)
			require.NoError(t, err)
			assert.Equal(t, special[i], joinIDs(ids), "%s: tokenize %q with BOS, special tokens parsed", name, s)
			seqs = append(seqs, want[i], special[i])
		}
		for i := 0; i < 200; i++ { // any ids: control, byte and unused tokens too
			var ids []int
			for k := rng.Intn(8); k >= 0; k-- {
				ids = append(ids, rng.Intn(len(tok.tokens)))
			}
			if i%4 == 0 {
				ids[0] = rng.Intn(300)
			}
			seqs = append(seqs, joinIDs(ids))
		}
		want = ref.lines(t, strings.Join(seqs, "\n")+"\n", path, "--detokenize")
		require.Len(t, want, len(seqs))
		for i, seq := range seqs {
			var ids []int
			for _, f := range strings.Fields(seq) {
				id, err := strconv.Atoi(f)
				require.NoError(t, err)
				ids = append(ids, id)
			}
			text, err := tok.Detokenize(ids)
			require.NoError(t, err)
			got := hex.EncodeToString([]byte(text))
			if !assert.Equal(t, want[i], got, "%s: detokenize %v", name, ids) {
				w, _ := hex.DecodeString(want[i])
				t.Logf("want %q got %q", w, text)
			}
		}
	}
}

func joinIDs(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, " ")
}

// lines runs the reference on the model at path with stdin and returns
// its output's lines.
func (r llamaRef) lines(t *testing.T, stdin, path string, args ...string) []string {
	t.Helper()
	out := r.runWith(t, stdin, append([]string{path}, args...)...)
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}
