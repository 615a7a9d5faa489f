package luabind

import (
	"fmt"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
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
	o := readOpts(L, "llm.load", 2)
	dtype := o.str("dtype", "")
	device := o.str("device", "")
	o.done()
	if L.GetTop() > 2 {
		argError(L, "llm.load", "takes a path and an options table")
	}
	if device != "" { // "cuda" names the current "cuda0" too
		cur := env.Engine.DeviceName()
		if n, ok := strings.CutPrefix(cur, strings.ToLower(device)); !ok || strings.Trim(n, "0123456789") != "" {
			argError(L, "llm.load", "device %q is not the current device %q: call device.use(%q) first (a model loads onto the current device)",
				device, cur, device)
		}
	}
	m, err := llm.Load(env.Engine, path, llm.LoadOptions{DType: dtype})
	raise(L, err)
	ud := L.NewUserData()
	ud.Value = m
	L.SetMetatable(ud, modelMetatable(L, env))
	L.Push(ud)
	return 1
}

// modelMethods are a model's methods (m:name(...)).
func (env *Env) modelMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{"detokenize": env.llmDetokenize, "eval": env.llmTrain(false), "generate": env.llmGenerate,
		"logits": env.llmLogits, "lora": env.llmLoRA, "parameters": env.llmParameters, "save": env.llmSave, "state_dict": env.llmStateDict,
		"tokenize": env.llmTokenize, "train": env.llmTrain(true)}
}

func checkModel(L *lua.LState, fn string) *llm.Model {
	return checkSelf[*llm.Model](L, fn, "a model (llm.load's)")
}

// checkSelf is argument 1, a userdata holding a T, or an error naming what.
func checkSelf[T any](L *lua.LState, fn, what string) T {
	if ud, ok := L.Get(1).(*lua.LUserData); ok {
		if v, ok := ud.Value.(T); ok {
			return v
		}
	}
	argError(L, fn, "expected %s as self, got %s", what, luaTypeName(L.Get(1)))
	var none T
	return none
}

func modelMetatable(L *lua.LState, env *Env) lua.LValue {
	return objectMetatable(L, modelTypeName, "model", env.modelMethods(), func(L *lua.LState) (map[string]lua.LValue, string) {
		m := checkModel(L, "model")
		c := m.Config
		return map[string]lua.LValue{"name": lua.LString(c.Name), "vocab": lua.LNumber(c.Vocab), "layers": lua.LNumber(c.Layers),
				"embd": lua.LNumber(c.Embd), "ffn": lua.LNumber(c.FFN), "heads": lua.LNumber(c.Heads), "heads_kv": lua.LNumber(c.HeadsKV),
				"context": lua.LNumber(c.Context), "training": lua.LBool(m.Training)},
			fmt.Sprintf("llm model %q (llama: %d layers, width %d, %d heads on %d key/value heads, vocabulary of %d)",
				c.Name, c.Layers, c.Embd, c.Heads, c.HeadsKV, c.Vocab)
	})
}

// objectMetatable is the metatable of a userdata type whose values have
// methods and read-only fields: fields gives self's (argument 1) and its
// __tostring text.
func objectMetatable(L *lua.LState, typeName, what string, methods map[string]lua.LGFunction,
	fields func(*lua.LState) (map[string]lua.LValue, string)) lua.LValue {
	if mt := L.GetTypeMetatable(typeName); mt != lua.LNil {
		return mt
	}
	table := L.SetFuncs(L.NewTable(), functions(what+":", methods))
	mt := L.NewTypeMetatable(typeName)
	L.SetFuncs(mt, map[string]lua.LGFunction{
		"__index": func(L *lua.LState) int {
			key := L.CheckString(2)
			if f := table.RawGetString(key); f != lua.LNil {
				L.Push(f)
				return 1
			}
			all, _ := fields(L)
			v, ok := all[key]
			if !ok {
				argError(L, what, "no method or field named '%s'", key)
			}
			L.Push(v)
			return 1
		},
		"__tostring": func(L *lua.LState) int {
			_, text := fields(L)
			L.Push(lua.LString(text))
			return 1
		},
	})
	return mt
}

// m:logits(text or ids) is a [T, vocab] tensor of each position's logits
// for a text (tokenized as m:tokenize does) or a table of 1-based ids; for
// a batch, a table of B tables of T ids each, a [B, T, vocab] tensor. A
// tensor of ids, [T] or [B, T] (Hugging Face's input_ids, 1-based), is
// read as the table would be.
func (env *Env) llmLogits(L *lua.LState) int {
	const fn = "model:logits"
	m := checkModel(L, fn)
	if x := toTensor(L.Get(2)); x != nil {
		batch := tensorIDs(L, fn, x, m.Vocab)
		if x.Dim() == 1 {
			t, err := m.Logits(batch[0])
			return env.pushResult(L, t, err)
		}
		t, err := m.LogitsBatch(batch)
		return env.pushResult(L, t, err)
	}
	if tbl, ok := L.Get(2).(*lua.LTable); ok {
		if _, nested := tbl.RawGetInt(1).(*lua.LTable); nested {
			t, err := m.LogitsBatch(checkBatch(L, fn, tbl, m.Vocab))
			return env.pushResult(L, t, err)
		}
	}
	t, err := m.Logits(checkPrompt(L, fn, m))
	return env.pushResult(L, t, err)
}

// tensorIDs reads x, a [T] or [B, T] tensor of 1-based token ids, as B
// (or one) sequences of 0-based ids.
func tensorIDs(L *lua.LState, fn string, x *core.Tensor, vocab int) [][]int {
	shape := x.Shape()
	if len(shape) < 1 || len(shape) > 2 || x.Numel() > 1<<20 {
		argError(L, fn, "expected a [T] or [B, T] tensor of at most %d token ids, got shape %s", 1<<20, core.ShapeString(shape))
	}
	v, err := x.Float32s()
	raise(L, err)
	T := shape[len(shape)-1]
	batch := make([][]int, len(v)/T)
	for i, f := range v {
		if f != float32(math.Trunc(float64(f))) || f < 1 || float64(f) > float64(vocab) {
			argError(L, fn, "id %d of the tensor (row %d, column %d) is %g, not an id from 1 to the vocabulary's %d", i+1, i/T+1, i%T+1, f, vocab)
		}
		batch[i/T] = append(batch[i/T], int(f)-1)
	}
	return batch
}

// checkBatch reads tbl, a table of tables of 1-based token ids (a batch's
// sequences), as 0-based ids.
func checkBatch(L *lua.LState, fn string, tbl *lua.LTable, vocab int) [][]int {
	n := tbl.Len()
	if n > 1<<16 {
		argError(L, fn, "expected at most %d sequences, got %d", 1<<16, n)
	}
	batch := make([][]int, n)
	for b := range batch {
		seq, ok := tbl.RawGetInt(b + 1).(*lua.LTable)
		if !ok {
			argError(L, fn, "sequence %d of the batch is a %s, not a table of token ids", b+1, luaTypeName(tbl.RawGetInt(b+1)))
		}
		batch[b] = readIDs(L, fmt.Sprintf("%s: sequence %d", fn, b+1), seq, vocab)
		if n*len(batch[b]) > 1<<20 {
			argError(L, fn, "a batch of %d sequences of %d ids is more than %d ids", n, len(batch[b]), 1<<20)
		}
	}
	return batch
}

// checkPrompt reads argument 2, a text (tokenized with the BOS token and
// special tokens parsed, as llama.cpp's tools read a prompt) or a table of
// 1-based ids, as 0-based ids.
func checkPrompt(L *lua.LState, fn string, m *llm.Model) []int {
	switch v := L.Get(2).(type) {
	case lua.LString:
		ids, err := m.Tokenize(string(v), true, true)
		raise(L, err)
		if len(ids) == 0 {
			argError(L, fn, "the text has no tokens")
		}
		return ids
	case *lua.LTable:
		return checkIDs(L, fn, 2, m.Vocab)
	}
	argError(L, fn, "expected a text or a table of token ids, got %s", luaTypeName(L.Get(2)))
	return nil
}

// checkIDs reads argument n, a table of 1-based token ids, as 0-based ids.
func checkIDs(L *lua.LState, fn string, n, vocab int) []int {
	tbl, ok := L.Get(n).(*lua.LTable)
	if !ok {
		argError(L, fn, "expected a table of token ids, got %s", luaTypeName(L.Get(n)))
	}
	return readIDs(L, fn, tbl, vocab)
}

// readIDs reads tbl, a table of 1-based token ids, as 0-based ids.
func readIDs(L *lua.LState, fn string, tbl *lua.LTable, vocab int) []int {
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
	prompt := checkPrompt(L, fn, m)
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

// m:train() and m:eval() switch the adapters' dropout on and off (as
// nn.Module's) and return m.
func (env *Env) llmTrain(on bool) lua.LGFunction {
	return func(L *lua.LState) int {
		checkModel(L, "model:train").Training = on
		L.Push(L.Get(1))
		return 1
	}
}

const loraTypeName = "gglua.llm.lora"

// m:lora({r=8, alpha=8, dropout=0, targets={"attn_q", "attn_v"}}) attaches
// LoRA adapters (PEFT's defaults) to the targeted weights of every layer
// and returns them: lora:parameters() for an optimizer, lora:save(path)
// for llama.cpp.
func (env *Env) llmLoRA(L *lua.LState) int {
	const fn = "model:lora"
	m := checkModel(L, fn)
	o := readOpts(L, fn, 2)
	r := o.number("r", 8)
	opts := llm.LoRAOptions{Alpha: o.number("alpha", 8), Dropout: o.number("dropout", 0), Targets: []string{"attn_q", "attn_v"}}
	if v := o.get("targets"); v != lua.LNil {
		tbl, ok := v.(*lua.LTable)
		if !ok || tbl.Len() == 0 {
			argError(L, fn, "option targets must be a table of weight names, got %s", luaTypeName(v))
		}
		opts.Targets = nil
		for i := 1; i <= tbl.Len(); i++ {
			name, ok := tbl.RawGetInt(i).(lua.LString)
			if !ok {
				argError(L, fn, "targets[%d] is a %s, not a weight's name", i, luaTypeName(tbl.RawGetInt(i)))
			}
			opts.Targets = append(opts.Targets, string(name))
		}
	}
	o.done()
	if r != math.Trunc(r) || r < 1 || r > 1<<16 {
		argError(L, fn, "option r is %g: expected a whole number from 1", r)
	}
	opts.R = int(r)
	l, err := m.AddLoRA(opts)
	raise(L, err)
	ud := L.NewUserData()
	ud.Value = l
	L.SetMetatable(ud, loraMetatable(L, env))
	L.Push(ud)
	return 1
}

func checkLoRA(L *lua.LState, fn string) *llm.LoRA {
	return checkSelf[*llm.LoRA](L, fn, "LoRA adapters (model:lora's)")
}

// loraMethods are LoRA adapters' methods (lora:name(...)).
func (env *Env) loraMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"parameters": func(L *lua.LState) int {
			env.pushTensors(L, checkLoRA(L, "lora:parameters").Parameters())
			return 1
		},
		"save": func(L *lua.LState) int {
			l := checkLoRA(L, "lora:save")
			if env.Sandbox {
				argError(L, "lora:save", "writing files is not allowed in a sandboxed runtime")
			}
			raise(L, l.Save(L.CheckString(2)))
			return 0
		},
	}
}

func loraMetatable(L *lua.LState, env *Env) lua.LValue {
	return objectMetatable(L, loraTypeName, "lora", env.loraMethods(), func(L *lua.LState) (map[string]lua.LValue, string) {
		l := checkLoRA(L, "lora")
		targets := L.NewTable()
		for _, t := range l.Targets {
			targets.Append(lua.LString(t))
		}
		return map[string]lua.LValue{"r": lua.LNumber(l.R), "alpha": lua.LNumber(l.Alpha), "dropout": lua.LNumber(l.Dropout), "targets": targets},
			fmt.Sprintf("LoRA adapters (r=%d, alpha=%g, dropout=%g) on %v: %d parameters", l.R, l.Alpha, l.Dropout, l.Targets, len(l.Parameters()))
	})
}

// m:save(path [, {dtype=}]) writes the model (adapters merged) as a GGUF
// file llama.cpp loads, each matrix in dtype or as it was read.
func (env *Env) llmSave(L *lua.LState) int {
	const fn = "model:save"
	m := checkModel(L, fn)
	if env.Sandbox {
		argError(L, fn, "writing files is not allowed in a sandboxed runtime")
	}
	path := L.CheckString(2)
	o := readOpts(L, fn, 3)
	name := o.str("dtype", "")
	o.done()
	var st llm.SaveType
	if name != "" {
		var err error
		st, err = llm.ParseSaveType(name)
		raise(L, err)
	}
	raise(L, m.Save(path, st))
	return 0
}

// m:parameters() is the model's trainable tensors (its f32, f16 and bf16
// weights, frozen once adapters are attached, then the adapters'), for an
// optimizer.
func (env *Env) llmParameters(L *lua.LState) int {
	env.pushTensors(L, checkModel(L, "model:parameters").Parameters())
	return 1
}

// pushTensors pushes a list of tensors.
func (env *Env) pushTensors(L *lua.LState, ts []*core.Tensor) {
	t := L.CreateTable(len(ts), 0)
	for i, x := range ts {
		t.RawSetInt(i+1, env.push(L, x))
	}
	L.Push(t)
}

// m:state_dict() is every tensor of the model by llama.cpp's name.
func (env *Env) llmStateDict(L *lua.LState) int {
	ws := checkModel(L, "model:state_dict").StateDict()
	t := L.CreateTable(0, len(ws))
	for _, w := range ws {
		t.RawSetString(w.Name, env.push(L, w.Tensor))
	}
	L.Push(t)
	return 1
}
