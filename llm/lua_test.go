package llm_test

import (
	"context"
	"io"
	"path/filepath"
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
	vocab := llm.WriteTestModel(t, path, 3)

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

	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, rt.SetGlobal("path", path))
	ctx := context.Background()
	vals, err := rt.DoString(ctx, `
local m = llm.load(path)
local y = m:logits({2, 261, 262, 4, m.vocab})
return y, y[5]:argmax():item(), m.vocab, m.layers, m.embd, m.ffn, m.heads, m.heads_kv, m.name, tostring(m)`)
	require.NoError(t, err)
	got, err := vals[0].(*core.Tensor).Float32s()
	require.NoError(t, err)
	assert.Equal(t, want, got, "Lua's 1-based ids are Go's 0-based ones")
	assert.Equal(t, float64(best+1), vals[1], "argmax is the next token's 1-based id")
	assert.Equal(t, []any{float64(vocab), 2.0, 256.0, 512.0, 8.0, 4.0, "gglua-test"}, vals[2:9])
	assert.Contains(t, vals[9], "2 layers, width 256, 8 heads on 4 key/value heads")

	for code, msg := range map[string]string{
		`m:logits({0})`:                     "model:logits: token 1 is 0, not an id from 1",
		`m:logits({1, m.vocab + 1})`:        "token 2 is 276, not an id from 1 to the vocabulary's 275",
		`m:logits({1.5})`:                   "token 1 is 1.5",
		`m:logits({"a"})`:                   "token 1 is a string, not an id",
		`m:logits({})`:                      "model:logits: expected 1 to",
		`m:logits(5)`:                       "expected a table of token ids, got number",
		`m.logits(5, {1})`:                  "expected a model (llm.load's) as self",
		`return m.nothing`:                  "no method or field named 'nothing'",
		`llm.load(path, {device = "cuda"})`: "llm.load: takes a path alone",
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
