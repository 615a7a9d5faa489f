package llm_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/llm"
	"github.com/gglua/gglua/runtime"
)

// The Lua library over package llm: a model's fields, its logits for
// 1-based ids equal to Go's for llama.cpp's 0-based ones, argmax giving
// the next token's id, and every bad call an error naming the call and
// the script's line.
func TestLuaLLM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	vocab := writeModel(t, path, 3)

	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	defer e.Close()
	m, err := llm.Load(e, path)
	require.NoError(t, err)
	ids := []int{1, 260, 261, 3, vocab - 1}
	y, err := m.Logits(ids)
	require.NoError(t, err)
	want, err := y.Float32s()
	require.NoError(t, err)
	best := 0
	for j := 1; j < vocab; j++ {
		if want[4*vocab+j] > want[4*vocab+best] {
			best = j
		}
	}

	rt := luaRuntime(t, path)
	ctx := context.Background()
	vals, err := rt.DoString(ctx, `
local m = llm.load(path)
local y = m:logits({2, 261, 262, 4, m.vocab})
local batch = m:logits({{9, 8, 7, 6, 5}, {2, 261, 262, 4, m.vocab}})
assert(batch:dim() == 3 and batch:size(1) == 2 and batch:size(2) == 5 and batch:size(3) == m.vocab)
assert((batch[2] - y):abs():max():item() < 1e-5, "a batch's row is its sequence's logits")
local ids = tensor({{9, 8, 7, 6, 5}, {2, 261, 262, 4, m.vocab}}):int()
assert((m:logits(ids) - batch):abs():max():item() == 0, "a tensor of ids reads as the table")
assert((m:logits(ids[2]) - y):abs():max():item() == 0, "a [T] tensor of ids is one sequence")
local f = llm.load(path, {dtype = "f16", device = "cpu"})
assert(#f:parameters() == 3 + 9 * f.layers and f:state_dict()["blk.1.ffn_up.weight"]:dtype() == "f16")
assert(f:parameters()[1]:requires_grad())
return y, y[5]:argmax():item(), m.vocab, m.layers, m.embd, m.ffn, m.heads, m.heads_kv, m.name, tostring(m)`)
	require.NoError(t, err)
	got, err := vals[0].(*core.Tensor).Float32s()
	require.NoError(t, err)
	assert.Equal(t, want, got, "Lua's 1-based ids are Go's 0-based ones")
	assert.Equal(t, float64(best+1), vals[1], "argmax is the next token's 1-based id")
	assert.Equal(t, []any{float64(vocab), 2.0, 256.0, 512.0, 8.0, 4.0, "gglua-test"}, vals[2:9])
	assert.Contains(t, vals[9], "2 layers, width 256, 8 heads on 4 key/value heads")

	for code, msg := range map[string]string{
		`m:logits({0})`:                        "model:logits: token 1 is 0, not an id from 1",
		`m:logits({1, m.vocab + 1})`:           "token 2 is 276, not an id from 1 to the vocabulary's 275",
		`m:logits({1.5})`:                      "token 1 is 1.5",
		`m:logits({"a"})`:                      "token 1 is a string, not an id",
		`m:logits({})`:                         "model:logits: expected 1 to",
		`m:logits(5)`:                          "model:logits: expected a text or a table of token ids, got number",
		`m:logits({{1, 2}, {3}})`:              "sequence 2 has 1 token(s) where the first has 2",
		`m:logits({{1, 2}, 3})`:                "model:logits: sequence 2 of the batch is a number, not a table of token ids",
		`m:logits({{1, 2}, {3, 0}})`:           "model:logits: sequence 2: token 2 is 0, not an id from 1",
		`m:logits(tensor({{1, 2}, {3, 0.5}}))`: "model:logits: id 4 of the tensor (row 2, column 2) is 0.5, not an id from 1",
		`m:logits(tensor.zeros(2, 2, 2))`:      "expected a [T] or [B, T] tensor of at most",
		`local row = {} for i = 1, 1025 do row[i] = 1 end local b = {} for i = 1, 1024 do b[i] = row end m:logits(b)`: "a batch of 1024 sequences of 1025 ids is more than 1048576 ids",
		`m.logits(5, {1})`:                  "expected a model (llm.load's) as self",
		`return m.nothing`:                  "no method or field named 'nothing'",
		`llm.load(path, {device = "cuda"})`: `llm.load: device "cuda" is not the current device "cpu": call device.use("cuda") first`,
		`llm.load(path, {dtype = "q4_0"})`:  `dtype "q4_0": expected f32, f16 or bf16`,
		`llm.load(path, {dtyp = "f32"})`:    "llm.load: unknown option dtyp",
		`llm.load(path .. ".missing")`:      "m.gguf.missing",
	} {
		_, err := rt.DoString(ctx, "local m = llm.load(path)\n"+code)
		require.Error(t, err, code)
		assert.Contains(t, err.Error(), msg, code)
		assert.Contains(t, err.Error(), ":2:", "%s: the error names the script's line", code)
	}

	sb, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard, Sandbox: true})
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, sb.SetGlobal("path", path))
	_, err = sb.DoString(ctx, `return llm.load(path)`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "llm.load: reading files is not allowed in a sandboxed runtime")
}

// m:tokenize, m:detokenize and m:generate in Lua give Go's ids plus one
// and Go's text; a seed repeats a sampled generation; bad options are
// refused naming the call and the line.
func TestLuaTokenizeGenerate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	writeModel(t, path, 4)
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	defer e.Close()
	m, err := llm.Load(e, path)
	require.NoError(t, err)
	prompt, err := m.Tokenize("the cat sat", true, true)
	require.NoError(t, err)
	gen, err := m.Generate(prompt, llm.GenerateOptions{MaxTokens: 12, TopP: 1})
	require.NoError(t, err)
	text, err := m.Detokenize(gen)
	require.NoError(t, err)
	plus1 := func(ids []int) []any {
		out := []any{}
		for _, id := range ids {
			out = append(out, float64(id+1))
		}
		return out
	}

	rt := luaRuntime(t, path)
	ctx := context.Background()
	vals, err := rt.DoString(ctx, `
local m = llm.load(path)
local ids = m:tokenize("the cat sat")
local text, new = m:generate("the cat sat", {max_tokens = 12, temperature = 0})
local a = m:generate(ids, {max_tokens = 8, temperature = 1.5, seed = 7})
assert(m:logits("the cat sat"):eq(m:logits(ids)):all():item() == 1, "logits of a text are those of its tokens")
local b = m:generate(ids, {max_tokens = 8, temperature = 1.5, seed = 7})
return ids, text, new, m:detokenize(ids), a == b, #m:tokenize("the cat sat", {add_special = false})`)
	require.NoError(t, err)
	list := func(v any) []any { return v.([]any) }
	assert.Equal(t, plus1(prompt), list(vals[0]))
	assert.Equal(t, text, vals[1])
	assert.Equal(t, plus1(gen), list(vals[2]))
	back, err := m.Detokenize(prompt)
	require.NoError(t, err)
	assert.Equal(t, back, vals[3])
	assert.Equal(t, true, vals[4], "a seed repeats a sampled generation")
	assert.Equal(t, float64(len(prompt)-1), vals[5], "add_special = false leaves out the BOS token")

	for code, msg := range map[string]string{
		`m:generate("x", {max_token = 3})`:    "model:generate: unknown option max_token",
		`m:generate("x", {max_tokens = -1})`:  "option max_tokens is -1",
		`m:generate("x", {top_p = 0})`:        "0 < top_p <= 1",
		`m:generate("x", {max_tokens = 1e6})`: "past the model's context of 128",
		`m:generate(5)`:                       "expected a text or a table of token ids, got number",
		`m:generate({0})`:                     "token 1 is 0, not an id",
		`m:tokenize("x", {special = true})`:   "model:tokenize: unknown option special",
		`m:detokenize({m.vocab + 1})`:         "model:detokenize: token 1 is 276",
		`m:generate("x", {seed = 0.5})`:       "option seed is 0.5",
	} {
		_, err := rt.DoString(ctx, "local m = llm.load(path)\n"+code)
		require.Error(t, err, code)
		assert.Contains(t, err.Error(), msg, code)
		assert.Contains(t, err.Error(), ":2:", "%s: the error names the script's line", code)
	}
}

func writeModel(t *testing.T, path string, seed int64) int {
	require.NoError(t, llm.WriteRandom(path, llm.TestShape, seed))
	return llm.TestShape.Vocab
}

// luaRuntime is a runtime whose global path names the model file.
func luaRuntime(t *testing.T, path string) *runtime.Runtime {
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	require.NoError(t, rt.SetGlobal("path", path))
	return rt
}

// scripts/examples/finetune_gguf.lua on a q4_0 model: the loss falls, the
// adapter it saves makes llama.cpp generate the text the script printed
// after training, which differs from the text before.
func TestFinetuneExample(t *testing.T) {
	dir := t.TempDir()
	f32, q4 := filepath.Join(dir, "f32.gguf"), filepath.Join(dir, "q4_0.gguf")
	writeModel(t, f32, 4)
	llm.Quantize(t, f32, q4, "q4_0")
	text := filepath.Join(dir, "text.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("the cat sat on the mat and the dog sat on the cat. ", 8)), 0o644))
	adapter := filepath.Join(dir, "adapter.gguf")
	var out strings.Builder
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: &out})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoFile(context.Background(), filepath.Join("..", "scripts", "examples", "finetune_gguf.lua"), q4, text, adapter, "40", "24")
	require.NoError(t, err, out.String())
	t.Log(out.String())
	losses := regexp.MustCompile(`loss ([0-9.]+)`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, losses, 5, out.String())
	first, _ := strconv.ParseFloat(losses[0][1], 64)
	last, _ := strconv.ParseFloat(losses[4][1], 64)
	assert.Less(t, last, first/2, "the loss falls")
	before := regexp.MustCompile(`(?m)^before: (.*)$`).FindStringSubmatch(out.String())
	after := regexp.MustCompile(`(?m)^after: (.*)$`).FindStringSubmatch(out.String())
	require.NotNil(t, before)
	require.NotNil(t, after)
	assert.NotEqual(t, before[1], after[1], "the adapter changes the generation")

	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	defer e.Close()
	m, err := llm.Load(e, q4)
	require.NoError(t, err)
	ids, err := m.Tokenize(strings.Repeat("the cat sat on the mat and the dog sat on the cat. ", 8), true, true)
	require.NoError(t, err)
	args := []string{q4, "--lora", adapter, "--generate", "16"}
	for _, id := range ids[:4] {
		args = append(args, strconv.Itoa(id))
	}
	var gen []int
	for _, f := range strings.Fields(llm.Reference(t, args...)) {
		id, err := strconv.Atoi(f)
		require.NoError(t, err)
		gen = append(gen, id)
	}
	want, err := m.Detokenize(gen)
	require.NoError(t, err)
	assert.Equal(t, want, after[1], "llama.cpp with the saved adapter generates what the script printed")
}
