package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runtime"
)

// opt:add_param_group against PyTorch: core/testdata/torch_optim_add_group.json,
// written by scripts/reference/optim_add_group.py (torch 1.13).

type addGroupCase struct {
	Name          string
	Kind          string
	Defaults      map[string]any
	First         map[string]any
	Group         map[string]any
	Before, After int
	Scheduler     map[string]any
	W, B, X       torchRNNTensor
	Steps         []struct {
		W, B []float64
		LRs  []float64
	}
	ParamGroups []map[string]any `json:"param_groups"`
}

// luaSettings writes an options table whose values may be lists (betas),
// keys sorted, with extra entries (such as params = {b}) first.
func luaSettings(opts map[string]any, extra ...string) string {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := append([]string(nil), extra...)
	for _, k := range keys {
		v := opts[k]
		if list, ok := v.([]any); ok {
			items := make([]string, len(list))
			for i, x := range list {
				items[i] = luaValue(x)
			}
			parts = append(parts, k+" = {"+strings.Join(items, ", ")+"}")
			continue
		}
		parts = append(parts, k+" = "+luaValue(v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// addGroupScript runs c in gglua: the trace of w, b and the rates after
// every step, the state_dict's param_groups, and how far a fresh optimizer
// that loaded the state_dict (its group added the same way) strays from
// the original over one more step.
func addGroupScript(c addGroupCase) string {
	var b strings.Builder
	params := "{w}"
	if c.First != nil {
		params = "{" + luaSettings(c.First, "params = {w}") + "}"
	}
	sched := "nil"
	switch s := c.Scheduler; {
	case s == nil:
	case s["kind"] == "step":
		sched = fmt.Sprintf("optim.lr_scheduler.step(opt, {step_size = %v, gamma = %v})", s["step_size"], s["gamma"])
	default:
		sched = fmt.Sprintf("optim.lr_scheduler.cosine(opt, {t_max = %v, eta_min = %v})", s["t_max"], s["eta_min"])
	}
	fmt.Fprintf(&b, "local w0, b0, x = %s, %s, %s\n", luaTensor(c.W), luaTensor(c.B), luaTensor(c.X))
	fmt.Fprintf(&b, "local function make(w, b) return optim.%s(%s, %s) end\n", c.Kind, params, luaSettings(c.Defaults))
	fmt.Fprintf(&b, "local group = function(b) return %s end\n", luaSettings(c.Group, "params = {b}"))
	fmt.Fprintf(&b, "local before, after = %d, %d\n", c.Before, c.After)
	b.WriteString(`
local w, b = tensor.param(w0:clone()), tensor.param(b0:clone())
local opt = make(w, b)
local sched
local function loss(w, b) return ((x:matmul(w) + b - 1) ^ 2):sum() end
local function step(opt, w, b)
  opt:zero_grad()
  backward(with_grad_tape(function() return loss(w, b) end))
  opt:step()
end
local trace = {}
local function record()
  local lrs = {}
  for g = 1, #opt.param_groups do lrs[g] = opt.param_groups[g].lr end
  trace[#trace + 1] = {w = w:clone(), b = b:clone(), lrs = lrs}
end
for _ = 1, before do step(opt, w, b); record() end
opt:add_param_group(group(b))
`)
	fmt.Fprintf(&b, "sched = %s\n", sched)
	b.WriteString(`
for _ = 1, after do
  step(opt, w, b)
  if sched then sched:step() end
  record()
end
local sd = opt:state_dict()
-- the round trip: a fresh optimizer, its group added, loads the state
local w2, b2 = tensor.param(w:clone()), tensor.param(b:clone())
local opt2 = make(w2, b2)
opt2:add_param_group(group(b2))
opt2:load_state_dict(sd)
step(opt, w, b)
step(opt2, w2, b2)
local stray = math.max((w - w2):abs():max():item(), (b - b2):abs():max():item())
return {trace = trace, param_groups = sd.param_groups, stray = stray, groups2 = #opt2.param_groups}
`)
	return b.String()
}

func closeValues(t *testing.T, want []float64, got any, what string) {
	t.Helper()
	x, ok := got.(*core.Tensor)
	require.True(t, ok, "%s: got %T", what, got)
	vals, err := x.Float32s()
	require.NoError(t, err)
	require.Len(t, vals, len(want), what)
	for i, w := range want {
		assert.InDelta(t, w, float64(vals[i]), 1e-4*math.Max(1, math.Abs(w)), "%s[%d]", what, i)
	}
}

// TestAddParamGroupAgainstPyTorch: a group added by add_param_group takes
// the optimizer's defaults for what it leaves out (not another group's
// settings), is updated from then on as PyTorch updates it (SGD's momentum
// starting with its first step), is scheduled by a scheduler made after
// it, and survives state_dict/load_state_dict.
func TestAddParamGroupAgainstPyTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "core", "testdata", "torch_optim_add_group.json"))
	require.NoError(t, err)
	var f struct{ Cases []addGroupCase }
	require.NoError(t, json.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Cases)
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, Stdout: io.Discard})
			require.NoError(t, err)
			defer rt.Close()
			res, err := rt.DoString(context.Background(), addGroupScript(c))
			require.NoError(t, err)
			r := res[0].(map[string]any)
			trace := r["trace"].([]any)
			require.Len(t, trace, len(c.Steps))
			for i, want := range c.Steps {
				got := trace[i].(map[string]any)
				closeValues(t, want.W, got["w"], fmt.Sprintf("step %d: w", i+1))
				closeValues(t, want.B, got["b"], fmt.Sprintf("step %d: b", i+1))
				lrs := got["lrs"].([]any)
				require.Len(t, lrs, len(want.LRs), "step %d: groups", i+1)
				for g, lr := range want.LRs {
					assert.InDelta(t, lr, lrs[g].(float64), 1e-9, "step %d: lr of group %d", i+1, g+1)
				}
			}
			groups := r["param_groups"].([]any)
			require.Len(t, groups, len(c.ParamGroups))
			for g, want := range c.ParamGroups {
				got := groups[g].(map[string]any)
				for k, v := range want {
					switch wv := v.(type) {
					case float64:
						assert.InDelta(t, wv, got[k].(float64), 1e-6*math.Max(1, math.Abs(wv)), "param_groups[%d].%s", g+1, k)
					case bool:
						assert.Equal(t, wv, got[k], "param_groups[%d].%s", g+1, k)
					case []any:
						gl := got[k].([]any)
						require.Len(t, gl, len(wv), "param_groups[%d].%s", g+1, k)
						for i := range wv {
							assert.InDelta(t, wv[i].(float64), gl[i].(float64), 1e-6, "param_groups[%d].%s[%d]", g+1, k, i+1)
						}
					}
				}
				_, hasInitial := want["initial_lr"]
				_, gotInitial := got["initial_lr"]
				assert.Equal(t, hasInitial, gotInitial, "param_groups[%d]: initial_lr present", g+1)
			}
			assert.Equal(t, 2.0, r["groups2"])
			assert.Less(t, r["stray"].(float64), 1e-6, "the optimizer restored from the state dict takes the same step")
		})
	}
}
