package luabind

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/llm"
)

// The llm library: language models of llama.cpp's GGUF files (package llm).
// A model is a userdata: m:logits(ids), m:tokenize(text),
// m:detokenize(ids), m:generate(prompt), and its shape as fields
// (m.vocab, m.layers, ...). In Lua a token id is 1-based, as every gglua index (and
// Torch7's LookupTable): llama.cpp's id + 1, so that a token's logit is at
// its id's column and argmax gives the next token.
func openLLM(L *lua.LState, env *Env) {
	lib := L.NewTable()
	L.SetFuncs(lib, functions("llm.", map[string]lua.LGFunction{"load": env.llmLoad}))
	L.SetGlobal("llm", lib)
}

const modelTypeName = "gglua.llm.model"

// llm.load(path) reads a llama-family model.
func (env *Env) llmLoad(L *lua.LState) int {
	if env.Sandbox {
		argError(L, "llm.load", "reading files is not allowed in a sandboxed runtime")
	}
	path := L.CheckString(1)
	if L.GetTop() > 1 {
		argError(L, "llm.load", "takes a path alone (options such as device and dtype are not supported yet)")
	}
	m, err := llm.Load(env.Engine, path)
	raise(L, err)
	ud := L.NewUserData()
	ud.Value = m
	L.SetMetatable(ud, modelMetatable(L, env))
	L.Push(ud)
	return 1
}

// modelMethods are a model's methods (m:name(...)).
func (env *Env) modelMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{"detokenize": env.llmDetokenize, "generate": env.llmGenerate, "logits": env.llmLogits,
		"tokenize": env.llmTokenize}
}

func checkModel(L *lua.LState, fn string) *llm.Model {
	if ud, ok := L.Get(1).(*lua.LUserData); ok {
		if m, ok := ud.Value.(*llm.Model); ok {
			return m
		}
	}
	argError(L, fn, "expected a model (llm.load's) as self, got %s", luaTypeName(L.Get(1)))
	return nil
}

func modelMetatable(L *lua.LState, env *Env) lua.LValue {
	if mt := L.GetTypeMetatable(modelTypeName); mt != lua.LNil {
		return mt
	}
	methods := L.SetFuncs(L.NewTable(), functions("model:", env.modelMethods()))
	mt := L.NewTypeMetatable(modelTypeName)
	L.SetFuncs(mt, map[string]lua.LGFunction{
		"__index": func(L *lua.LState) int {
			m := checkModel(L, "model")
			key := L.CheckString(2)
			if f := methods.RawGetString(key); f != lua.LNil {
				L.Push(f)
				return 1
			}
			c := m.Config
			fields := map[string]lua.LValue{"name": lua.LString(c.Name), "vocab": lua.LNumber(c.Vocab), "layers": lua.LNumber(c.Layers),
				"embd": lua.LNumber(c.Embd), "ffn": lua.LNumber(c.FFN), "heads": lua.LNumber(c.Heads), "heads_kv": lua.LNumber(c.HeadsKV),
				"context": lua.LNumber(c.Context)}
			v, ok := fields[key]
			if !ok {
				argError(L, "model", "no method or field named '%s'", key)
			}
			L.Push(v)
			return 1
		},
		"__tostring": func(L *lua.LState) int {
			c := checkModel(L, "model").Config
			L.Push(lua.LString(fmt.Sprintf("llm model %q (llama: %d layers, width %d, %d heads on %d key/value heads, vocabulary of %d)",
				c.Name, c.Layers, c.Embd, c.Heads, c.HeadsKV, c.Vocab)))
			return 1
		},
	})
	return mt
}

// m:logits(ids) is a [T, vocab] tensor of each position's logits for the
// token ids (a table of 1-based ids).
func (env *Env) llmLogits(L *lua.LState) int {
	m := checkModel(L, "model:logits")
	t, err := m.Logits(checkIDs(L, "model:logits", 2, m.Vocab))
	return env.pushResult(L, t, err)
}

// checkIDs reads argument n, a table of 1-based token ids, as 0-based ids.
func checkIDs(L *lua.LState, fn string, n, vocab int) []int {
	tbl, ok := L.Get(n).(*lua.LTable)
	if !ok {
		argError(L, fn, "expected a table of token ids, got %s", luaTypeName(L.Get(n)))
	}
	count := tbl.Len()
	if count == 0 || count > 1<<20 {
		argError(L, fn, "expected 1 to %d token ids, got %d", 1<<20, count)
	}
	ids := make([]int, count)
	for i := range ids {
		lv := tbl.RawGetInt(i + 1)
		v, ok := lv.(lua.LNumber)
		if !ok {
			argError(L, fn, "token %d is a %s, not an id", i+1, luaTypeName(lv))
		}
		if float64(v) != math.Trunc(float64(v)) || v < 1 || float64(v) > float64(vocab) {
			argError(L, fn, "token %d is %g, not an id from 1 to the vocabulary's %d", i+1, float64(v), vocab)
		}
		ids[i] = int(v) - 1
	}
	return ids
}

// pushIDs pushes 0-based ids as a table of 1-based ones.
func pushIDs(L *lua.LState, ids []int) {
	t := L.CreateTable(len(ids), 0)
	for i, id := range ids {
		t.RawSetInt(i+1, lua.LNumber(id+1))
	}
	L.Push(t)
}

// m:tokenize(text [, {add_special=true, parse_special=true}]) is the ids
// llama.cpp's tokenizer gives text, as its tools read a prompt: the BOS
// token first where the vocabulary asks for it, and special tokens'
// texts ("<s>", "<|eot_id|>") read as those tokens.
func (env *Env) llmTokenize(L *lua.LState) int {
	const fn = "model:tokenize"
	m := checkModel(L, fn)
	text := L.CheckString(2)
	o := readOpts(L, fn, 3)
	addSpecial, parseSpecial := o.boolean("add_special", true), o.boolean("parse_special", true)
	o.done()
	ids, err := m.Tokenize(text, addSpecial, parseSpecial)
	raise(L, err)
	pushIDs(L, ids)
	return 1
}

// m:detokenize(ids) is the text of a table of 1-based ids.
func (env *Env) llmDetokenize(L *lua.LState) int {
	const fn = "model:detokenize"
	m := checkModel(L, fn)
	s, err := m.Detokenize(checkIDs(L, fn, 2, m.Vocab))
	raise(L, err)
	L.Push(lua.LString(s))
	return 1
}

// m:generate(prompt [, {max_tokens=128, temperature=0.8, top_k=40,
// top_p=0.95, seed=}]) continues prompt (a text, tokenized as
// m:tokenize does, or a table of ids) and returns the new text and the
// new ids. The defaults are llama.cpp's; without a seed, one is drawn
// from gglua's generator (manual_seed makes a run repeat).
func (env *Env) llmGenerate(L *lua.LState) int {
	const fn = "model:generate"
	m := checkModel(L, fn)
	var prompt []int
	switch v := L.Get(2).(type) {
	case lua.LString:
		var err error
		prompt, err = m.Tokenize(string(v), true, true)
		raise(L, err)
	case *lua.LTable:
		prompt = checkIDs(L, fn, 2, m.Vocab)
	default:
		argError(L, fn, "expected a prompt (a text or a table of token ids), got %s", luaTypeName(v))
	}
	o := readOpts(L, fn, 3)
	maxTokens := o.number("max_tokens", 128)
	opts := llm.GenerateOptions{Temperature: o.number("temperature", 0.8), TopP: o.number("top_p", 0.95)}
	topK := o.number("top_k", 40)
	seed := o.number("seed", math.NaN())
	o.done()
	for _, c := range []struct {
		name string
		v    float64
		dst  *int
	}{{"max_tokens", maxTokens, &opts.MaxTokens}, {"top_k", topK, &opts.TopK}} {
		if c.v != math.Trunc(c.v) || c.v < 0 || c.v > 1<<24 {
			argError(L, fn, "option %s is %g: expected a whole number from 0 to %d", c.name, c.v, 1<<24)
		}
		*c.dst = int(c.v)
	}
	switch {
	case math.IsNaN(seed):
		opts.Seed = env.Engine.Rand().Int63()
	case seed != math.Trunc(seed) || math.Abs(seed) > 1<<53:
		argError(L, fn, "option seed is %g: expected a whole number", seed)
	default:
		opts.Seed = int64(seed)
	}
	ids, err := m.Generate(prompt, opts)
	raise(L, err)
	text := ""
	if m.Tokenizer != nil {
		text, err = m.Detokenize(ids)
		raise(L, err)
	}
	L.Push(lua.LString(text))
	pushIDs(L, ids)
	return 2
}
