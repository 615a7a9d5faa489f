package luabind

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/llm"
)

// The llm library: language models of llama.cpp's GGUF files (package llm).
// A model is a userdata: m:logits(ids), and its shape as fields (m.vocab,
// m.layers, ...). In Lua a token id is 1-based, as every gglua index (and
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
	return map[string]lua.LGFunction{"logits": env.llmLogits}
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
	tbl, ok := L.Get(2).(*lua.LTable)
	if !ok {
		argError(L, "model:logits", "expected a table of token ids, got %s", luaTypeName(L.Get(2)))
	}
	n := tbl.Len()
	if n == 0 || n > 1<<20 {
		argError(L, "model:logits", "expected 1 to %d token ids, got %d", 1<<20, n)
	}
	ids := make([]int, n)
	for i := range ids {
		lv := tbl.RawGetInt(i + 1)
		v, ok := lv.(lua.LNumber)
		if !ok {
			argError(L, "model:logits", "token %d is a %s, not an id", i+1, luaTypeName(lv))
		}
		if float64(v) != math.Trunc(float64(v)) || v < 1 || float64(v) > float64(m.Vocab) {
			argError(L, "model:logits", "token %d is %g, not an id from 1 to the vocabulary's %d", i+1, float64(v), m.Vocab)
		}
		ids[i] = int(v) - 1
	}
	t, err := m.Logits(ids)
	return env.pushResult(L, t, err)
}
