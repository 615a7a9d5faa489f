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
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runtime"
)

// PyTorch's recurrent layers and nn.init bounds: core/testdata/torch_rnn.json,
// written by scripts/reference/rnn.py (torch 1.13).

type torchRNNTensor struct {
	Name   string    `json:"name"`
	Shape  []int     `json:"shape"`
	Values []float64 `json:"values"`
}

type torchRNNCase struct {
	Name      string                    `json:"name"`
	Class     string                    `json:"class"`
	Args      []int                     `json:"args"`
	Opts      map[string]any            `json:"opts"`
	Params    []torchRNNTensor          `json:"params"`
	Input     torchRNNTensor            `json:"input"`
	H0        *torchRNNTensor           `json:"h0"`
	C0        *torchRNNTensor           `json:"c0"`
	Cotangent torchRNNTensor            `json:"cotangent"`
	Output    torchRNNTensor            `json:"output"`
	HN        torchRNNTensor            `json:"h_n"`
	CN        *torchRNNTensor           `json:"c_n"`
	Loss      float64                   `json:"loss"`
	Grads     map[string]torchRNNTensor `json:"grads"`
}

type torchInitCase struct {
	Fn    string         `json:"fn"`
	Shape []int          `json:"shape"`
	Opts  map[string]any `json:"opts"`
	Bound float64        `json:"bound"`
	Std   float64        `json:"std"`
}

func loadTorchRNN(t *testing.T) ([]torchRNNCase, []torchInitCase) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "core", "testdata", "torch_rnn.json"))
	require.NoError(t, err)
	var f struct {
		Cases []torchRNNCase  `json:"cases"`
		Init  []torchInitCase `json:"init"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Cases)
	require.NotEmpty(t, f.Init)
	return f.Cases, f.Init
}

// luaValue writes a JSON scalar as a Lua literal.
func luaValue(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return strconv.Quote(x)
	}
	panic(fmt.Sprintf("no Lua literal for %T", v))
}

// luaOpts writes an options table, keys sorted.
func luaOpts(opts map[string]any) string {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " = " + luaValue(opts[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// luaTensor writes an expression making the tensor (float32 values).
func luaTensor(t torchRNNTensor) string {
	vals := make([]string, len(t.Values))
	for i, v := range t.Values {
		vals[i] = strconv.FormatFloat(float64(float32(v)), 'g', -1, 32)
	}
	shape := make([]string, len(t.Shape))
	for i, s := range t.Shape {
		shape[i] = strconv.Itoa(s)
	}
	return fmt.Sprintf("tensor{%s}:reshape{%s}", strings.Join(vals, ", "), strings.Join(shape, ", "))
}

// rnnScript builds c's module in gglua, loads PyTorch's weights, runs the
// input through it and backward from PyTorch's loss; it returns the
// outputs, the loss, the gradients and the parameter names in order.
func rnnScript(c torchRNNCase) string {
	var b strings.Builder
	cell := strings.HasSuffix(c.Class, "Cell")
	ctor := fmt.Sprintf("nn.%s(%d, %d, %s)", c.Class, c.Args[0], c.Args[1], luaOpts(c.Opts))
	if cell { // the cells take their options positionally, as PyTorch's
		bias, nonlin := "nil", "nil"
		if v, ok := c.Opts["bias"]; ok {
			bias = luaValue(v)
		}
		if v, ok := c.Opts["nonlinearity"]; ok {
			nonlin = luaValue(v)
		}
		ctor = fmt.Sprintf("nn.%s(%d, %d, %s, %s)", c.Class, c.Args[0], c.Args[1], bias, nonlin)
	}
	fmt.Fprintf(&b, "tensor.manual_seed(1)\nlocal m = %s\nlocal sd = {}\n", ctor)
	for _, p := range c.Params {
		fmt.Fprintf(&b, "sd[%q] = %s\n", p.Name, luaTensor(p))
	}
	fmt.Fprintf(&b, "m:load_state_dict(sd)\nlocal x = tensor.param(%s)\n", luaTensor(c.Input))
	fmt.Fprintf(&b, "local cot = %s\nlocal h0, c0, hx\n", luaTensor(c.Cotangent))
	if c.H0 != nil {
		fmt.Fprintf(&b, "h0 = tensor.param(%s)\nhx = h0\n", luaTensor(*c.H0))
	}
	if c.C0 != nil {
		fmt.Fprintf(&b, "c0 = tensor.param(%s)\nhx = {h0, c0}\n", luaTensor(*c.C0))
	}
	fmt.Fprintf(&b, "local cell, lstm = %v, %v\n", cell, strings.HasPrefix(c.Class, "LSTM"))
	b.WriteString(`
local out, hn, cn
local loss = with_grad_tape(function()
  local a, s = m(x, hx)
  out = a
  if cell then
    hn = a
    cn = s
  elseif lstm then
    hn = s[1]
    cn = s[2]
  else
    hn = s
  end
  local l = (out * cot):sum()
  if not cell then l = l + hn:sum() end
  if cn then l = l + cn:sum() end
  return l
end)
backward(loss)
local grads, names = {input = x.grad}, {}
if h0 then grads.h0 = h0.grad end
if c0 then grads.c0 = c0.grad end
for i, np in ipairs(m:named_parameters()) do
  names[i] = np[1]
  grads[np[1]] = np[2].grad
end
return {output = out, h_n = hn, c_n = cn or false, loss = loss:item(), grads = grads, names = names}
`)
	return b.String()
}

func requireCloseTensor(t *testing.T, want torchRNNTensor, got any, what string) {
	t.Helper()
	x, ok := got.(*core.Tensor)
	require.True(t, ok, "%s: got %T, not a tensor", what, got)
	require.Equal(t, want.Shape, x.Shape(), "%s: shape", what)
	vals, err := x.Float32s()
	require.NoError(t, err, what)
	require.Len(t, vals, len(want.Values), what)
	for i, w := range want.Values {
		require.InDelta(t, w, float64(vals[i]), 1e-4*math.Max(1, math.Abs(w)), "%s[%d] (flat)", what, i)
	}
}

// TestRNNAgainstPyTorch: RNN (tanh, relu), GRU, LSTM and the cells, with
// PyTorch's weights, give PyTorch's outputs, final states and gradients
// (of the input, the initial state and every parameter), and name their
// parameters as PyTorch does, in its order.
func TestRNNAgainstPyTorch(t *testing.T) {
	cases, _ := loadTorchRNN(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, Stdout: io.Discard})
			require.NoError(t, err)
			defer rt.Close()
			res, err := rt.DoString(context.Background(), rnnScript(c))
			require.NoError(t, err)
			r := res[0].(map[string]any)
			names := make([]string, len(c.Params))
			for i, p := range c.Params {
				names[i] = p.Name
			}
			got := r["names"].([]any)
			gotNames := make([]string, len(got))
			for i, n := range got {
				gotNames[i] = n.(string)
			}
			assert.Equal(t, names, gotNames, "named_parameters: PyTorch's names in its order")
			requireCloseTensor(t, c.Output, r["output"], "output")
			requireCloseTensor(t, c.HN, r["h_n"], "h_n")
			if c.CN != nil {
				requireCloseTensor(t, *c.CN, r["c_n"], "c_n")
			}
			assert.InDelta(t, c.Loss, r["loss"].(float64), 1e-4*math.Max(1, math.Abs(c.Loss)), "loss")
			grads := r["grads"].(map[string]any)
			require.Len(t, grads, len(c.Grads), "gradients")
			for name, want := range c.Grads {
				requireCloseTensor(t, want, grads[name], "grad of "+name)
			}
		})
	}
}

// TestInitBoundsAgainstPyTorch: nn.init's uniform initialisers stay within
// PyTorch's bound and reach it; the normal ones have PyTorch's std; both
// centred on 0 (loose statistics on thousands of values).
func TestInitBoundsAgainstPyTorch(t *testing.T) {
	_, inits := loadTorchRNN(t)
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	for _, c := range inits {
		shape := make([]string, len(c.Shape))
		for i, s := range c.Shape {
			shape[i] = strconv.Itoa(s)
		}
		name := fmt.Sprintf("%s%v%v", c.Fn, c.Shape, c.Opts)
		res, err := rt.DoString(context.Background(), fmt.Sprintf(`
tensor.manual_seed(7)
local w = tensor.param(tensor.zeros(%s))
local same = nn.init.%s(w, %s)
local n = w:numel()
local flat = w:reshape(n)
local mean = flat:mean():item()
local std = math.sqrt(((flat - mean) * (flat - mean)):sum():item() / (n - 1))
return same == w, flat:abs():max():item(), mean, std`, strings.Join(shape, ", "), c.Fn, luaOpts(c.Opts)))
		require.NoError(t, err, name)
		assert.Equal(t, true, res[0], "%s returns its tensor", name)
		maxAbs, mean, std := res[1].(float64), res[2].(float64), res[3].(float64)
		if c.Bound > 0 {
			assert.LessOrEqual(t, maxAbs, c.Bound*(1+1e-6), "%s: within PyTorch's bound %g", name, c.Bound)
			assert.GreaterOrEqual(t, maxAbs, c.Bound*0.98, "%s: reaches PyTorch's bound %g", name, c.Bound)
			assert.InEpsilon(t, c.Bound/math.Sqrt(3), std, 0.05, "%s: std of uniform(-b, b)", name)
			assert.InDelta(t, 0, mean, c.Bound*0.05, name)
		} else {
			assert.InEpsilon(t, c.Std, std, 0.05, "%s: PyTorch's std", name)
			assert.InDelta(t, 0, mean, c.Std*0.05, name)
		}
	}
}
