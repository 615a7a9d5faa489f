package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// nn.scaled_dot_product_attention (core/ops_attention.go); the module
// nn.MultiheadAttention is Lua, in nn_attention.lua.

func (env *Env) attentionFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"scaled_dot_product_attention": env.sdpa,
	}
}

// sdpa is nn.scaled_dot_product_attention(q, k, v [, {attn_mask=,
// attn_bias=, is_causal=false, scale=, dropout_p=0}]). attn_mask holds 0
// and 1 only (1: the query attends to the key), PyTorch's boolean mask;
// PyTorch's float mask (0 and -inf, added to the scores) is attn_bias, so
// that one cannot be taken for the other: a mask with other values is an
// error.
func (env *Env) sdpa(L *lua.LState) int {
	const fn = "nn.scaled_dot_product_attention"
	q, k, v := checkTensor(L, fn, 1), checkTensor(L, fn, 2), checkTensor(L, fn, 3)
	o := readOpts(L, fn, 4)
	opts := core.AttentionOptions{
		Causal:   o.boolean("is_causal", false),
		Scale:    o.number("scale", 0),
		DropoutP: o.number("dropout_p", 0),
		Training: true, // as PyTorch's function: dropout_p applies whenever given
	}
	if m := o.get("attn_mask"); m != lua.LNil {
		if opts.Mask = toTensor(m); opts.Mask == nil {
			argError(L, fn, "attn_mask must be a tensor, got %s", luaTypeName(m))
		}
		vals, err := opts.Mask.Float32s()
		raise(L, err)
		for i, x := range vals {
			if x != 0 && x != 1 {
				argError(L, fn, "attn_mask holds %g at element %d: it must hold 0 and 1 (1 attends); pass an additive mask (0 and -inf) as attn_bias", x, i+1)
			}
		}
	}
	if b := o.get("attn_bias"); b != lua.LNil {
		if opts.Bias = toTensor(b); opts.Bias == nil {
			argError(L, fn, "attn_bias must be a tensor, got %s", luaTypeName(b))
		}
	}
	o.done()
	t, err := env.Engine.ScaledDotProductAttention(q, k, v, opts)
	return env.pushResult(L, t, err)
}
