package tests

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// nn.scaled_dot_product_attention and nn.MultiheadAttention against
// core/testdata/torch_attention.json (scripts/reference/attention.py):
// outputs, attention weights and gradients, to 1e-4.

// attentionLua runs one case (the global c) and returns what it computed,
// each tensor flattened.
const attentionLua = `
local function T(x, param)
  local t = tensor(x.values):reshape(x.shape)
  if param then t = tensor.param(t) end
  return t
end
local function flat(t) return t:reshape(t:numel()):totable() end
local out = {}
if c.q then
  local q, k, v = T(c.q, true), T(c.k, true), T(c.v, true)
  with_grad_tape(function()
    local y = nn.scaled_dot_product_attention(q, k, v, {
      attn_mask = c.mask and T(c.mask), attn_bias = c.bias and T(c.bias), is_causal = c.causal})
    out.out = flat(y)
    ;(y * T(c.w)):sum():backward()
  end)
  out.grad_q, out.grad_k, out.grad_v = flat(q.grad), flat(k.grad), flat(v.grad)
else
  local m = nn.MultiheadAttention(8, 2, {batch_first = c.batch_first})
  local sd = {}
  for name, p in pairs(c.params) do sd[name] = T(p) end
  m:load_state_dict(sd)
  m:eval()
  local query, key = T(c.query, true), T(c.key, true)
  with_grad_tape(function()
    local y, w = m(query, key, T(c.value), {
      key_padding_mask = c.key_padding_mask and T(c.key_padding_mask),
      attn_mask = c.attn_mask and T(c.attn_mask)})
    out.out, out.weights = flat(y), flat(w)
    ;(y * T(c.w)):sum():backward()
  end)
  out.grad_query, out.grad_key = flat(query.grad), flat(key.grad)
  out.grad_in_proj_weight, out.grad_out_proj_bias = flat(m.in_proj_weight.grad), flat(m.out_proj.bias.grad)
end
return out
`

func TestAttentionAgainstPyTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "core", "testdata", "torch_attention.json"))
	require.NoError(t, err)
	var ref struct{ SDPA, MHA []map[string]any }
	require.NoError(t, json.Unmarshal(raw, &ref))
	require.NotEmpty(t, ref.SDPA)
	require.NotEmpty(t, ref.MHA)
	check := func(t *testing.T, c map[string]any, keys []string) {
		rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
		require.NoError(t, err)
		defer rt.Close()
		require.NoError(t, rt.SetGlobal("c", c))
		vals, err := rt.DoString(context.Background(), attentionLua)
		require.NoError(t, err)
		got := vals[0].(map[string]any)
		for _, k := range keys {
			want := c[k].(map[string]any)["values"].([]any)
			g, ok := got[k].([]any)
			require.True(t, ok, "%s missing", k)
			require.Len(t, g, len(want), k)
			for i := range want {
				w := want[i].(float64)
				assert.InDelta(t, w, g[i].(float64), 1e-4*(1+math.Abs(w)), "%s[%d]", k, i)
			}
		}
	}
	for _, c := range ref.SDPA {
		t.Run("sdpa "+c["name"].(string), func(t *testing.T) {
			check(t, c, []string{"out", "grad_q", "grad_k", "grad_v"})
		})
	}
	for _, c := range ref.MHA {
		t.Run("mha "+c["name"].(string), func(t *testing.T) {
			check(t, c, []string{"out", "weights", "grad_query", "grad_key", "grad_in_proj_weight", "grad_out_proj_bias"})
		})
	}
}
