package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runtime"
)

// PyTorch's activations (core/testdata/torch_activations.json, written by
// scripts/reference/activations.py, torch 1.13): each case's values and
// gradients through nn.<fn> in Lua, at the corners of each formula (0,
// the bounds, softplus's threshold) and at NaN and the infinities.

type jsonFloats []float64

// UnmarshalJSON reads numbers and the strings "nan", "inf" and "-inf".
func (f *jsonFloats) UnmarshalJSON(b []byte) error {
	var raw []any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*f = make(jsonFloats, len(raw))
	for i, v := range raw {
		switch x := v.(type) {
		case float64:
			(*f)[i] = x
		case string:
			n, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return err
			}
			(*f)[i] = n
		}
	}
	return nil
}

type activationCase struct {
	Name       string     `json:"name"`
	Fn         string     `json:"fn"`
	Args       []float64  `json:"args"`
	Shape      []int      `json:"shape"`
	Input      jsonFloats `json:"input"`
	Cotangent  jsonFloats `json:"cotangent"`
	Output     jsonFloats `json:"output"`
	GradInput  jsonFloats `json:"grad_input"`
	Weight     jsonFloats `json:"weight"`
	GradWeight jsonFloats `json:"grad_weight"`
}

// luaFloats writes a tensor of values of shape (NaN and the infinities
// as Lua expressions).
func luaFloats(v []float64, shape ...int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		switch {
		case math.IsNaN(x):
			parts[i] = "0/0"
		case math.IsInf(x, 1):
			parts[i] = "math.huge"
		case math.IsInf(x, -1):
			parts[i] = "-math.huge"
		case x == 0 && math.Signbit(x):
			parts[i] = "-0.0"
		default:
			parts[i] = strconv.FormatFloat(float64(float32(x)), 'g', -1, 32)
		}
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	return fmt.Sprintf("tensor{%s}:reshape{%s}", strings.Join(parts, ", "), strings.Join(dims, ", "))
}

func TestActivationsMatchTorch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "core", "testdata", "torch_activations.json"))
	require.NoError(t, err)
	var f struct {
		Cases []activationCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Cases)
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	for _, c := range f.Cases {
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = ", " + strconv.FormatFloat(a, 'g', -1, 64)
		}
		weight, call := "", fmt.Sprintf("nn.%s(x%s)", c.Fn, strings.Join(args, ""))
		if c.Weight != nil {
			weight = "local w = tensor.param(" + luaFloats(c.Weight, len(c.Weight)) + ")\n"
			call = "nn.prelu(x, w)"
		}
		script := fmt.Sprintf("local x = tensor.param(%s)\n%slocal cot = %s\nlocal y\n"+
			"local loss = with_grad_tape(function() y = %s; return (y * cot):sum() end)\nbackward(loss)\n"+
			"return y, x.grad, %s", luaFloats(c.Input, c.Shape...), weight, luaFloats(c.Cotangent, c.Shape...), call,
			map[bool]string{true: "w.grad", false: "nil"}[c.Weight != nil])
		res, err := rt.DoString(context.Background(), script)
		require.NoError(t, err, c.Name)
		for k, want := range []jsonFloats{c.Output, c.GradInput, c.GradWeight} {
			if want == nil {
				continue
			}
			got, err := res[k].(*core.Tensor).Float32s()
			require.NoError(t, err)
			require.Len(t, got, len(want), c.Name)
			for i, w := range want {
				g := float64(got[i])
				what := fmt.Sprintf("%s: %s %d (input %g)", c.Name, []string{"value", "input's gradient", "weight's gradient"}[k], i,
					c.Input[min(i, len(c.Input)-1)])
				switch {
				case math.IsNaN(w):
					assert.True(t, math.IsNaN(g), "%s: want NaN, got %g", what, g)
				case math.IsInf(w, 0):
					assert.Equal(t, w, g, what)
				default:
					assert.InDelta(t, w, g, 2e-6*math.Max(1, math.Abs(w)), what)
				}
			}
		}
	}
}

// The modules hold their arguments (positional or named) and compute their
// functionals; PReLU's slopes are a parameter named weight; bad arguments
// and inplace=true are refused naming the call and the script's line.
func TestActivationModules(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	ctx := context.Background()
	res, err := rt.DoString(ctx, `
local x = tensor{{-2, -0.5, 0, 1.5}, {3, -3, 0.2, 25}}
local same = 0
for _, c in ipairs{{nn.LeakyReLU(0.2), nn.leaky_relu(x, 0.2)}, {nn.ELU{alpha = 0.5}, nn.elu(x, 0.5)},
    {nn.SELU(), nn.selu(x)}, {nn.Softplus(2, 10), nn.softplus(x, {beta = 2, threshold = 10})}, {nn.Mish(), nn.mish(x)},
    {nn.Hardtanh(-1, 2), nn.hardtanh(x, -1, 2)}, {nn.Hardswish(), nn.hardswish(x)}} do
  if c[1](x):eq(c[2]):all():item() == 1 then same = same + 1 end
end
local p = nn.PReLU(4, 0.1)
local names = {}
for k in pairs(p:state_dict()) do names[#names + 1] = k end
return same, tostring(nn.Softplus{beta = 2}), names[1], #p:parameters(), p(x):sum():item()`)
	require.NoError(t, err)
	assert.Equal(t, 7.0, res[0], "every module computes its functional")
	assert.Equal(t, "Softplus(beta=2, threshold=20)", res[1])
	assert.Equal(t, "weight", res[2])
	assert.Equal(t, 1.0, res[3])
	assert.InDelta(t, -0.2-0.05+1.5+3-0.3+0.2+25, res[4], 1e-5)
	for code, msg := range map[string]string{
		`nn.leaky_relu(tensor{1}, 0.1, true)`:       "nn.leaky_relu: inplace=true is not supported",
		`nn.ELU{alph = 1}`:                          "nn.ELU: unknown option alph (expected alpha)",
		`nn.elu(tensor{1}, "x")`:                    "nn.elu: alpha must be a number, got string",
		`nn.hardtanh(tensor{1}, 2, 1)`:              "nn.hardtanh: min_val 2 is above max_val 1",
		`nn.prelu(tensor{{1, 2, 3}}, tensor{1, 2})`: "nn.prelu: weight of 2 slopes needs an input of 2 channels (dim 2), got shape 1x3",
		`nn.PReLU(0)`:                               "nn.PReLU: num_parameters must be a positive integer, got 0",
		`nn.softplus(tensor{1}, 1, 20, false, 9)`:   "nn.softplus: 4 arguments after the input, at most 3",
		`nn.Hardswish{inplace = true}`:              "nn.Hardswish: inplace=true is not supported",
		`nn.mish("x")`:                              "nn.mish: expected a tensor, got string",
	} {
		_, err := rt.DoString(ctx, "local _ = 1\n"+code)
		require.Error(t, err, code)
		assert.Contains(t, err.Error(), msg, code)
		assert.Contains(t, err.Error(), ":2:", "%s: the error names the script's line", code)
	}
}
