package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// runScript runs scripts/<name> with args and returns what it printed.
func runScript(t *testing.T, name string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Threads: 2, Stdout: &out})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoFile(context.Background(), filepath.Join("..", "scripts", name), args...)
	require.NoError(t, err, out.String())
	return out.String()
}

// number finds the first float that re captures in out.
func number(t *testing.T, out, re string) float64 {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	require.NotNil(t, m, "no %q in:\n%s", re, out)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestDemoScript runs the README demo: the loss falls, a step uploads only
// its batch, and the reloaded checkpoint classifies the training points.
func TestDemoScript(t *testing.T) {
	out := runScript(t, "train.lua", "600", filepath.Join(t.TempDir(), "m.gguf"))
	first, last := number(t, out, `loss ([0-9.]+) ->`), number(t, out, `-> ([0-9.]+);`)
	assert.Less(t, last, first/5, out)
	assert.Equal(t, 4800.0, number(t, out, `([0-9]+) B uploaded per step`), "400 points x 2 coords as f32 + 400 labels as i32")
	assert.GreaterOrEqual(t, number(t, out, `accuracy ([0-9.]+)%`), 95.0, out)
}

func TestXORScript(t *testing.T) {
	out := runScript(t, "xor.lua")
	assert.Contains(t, out, "4 of 4 right")
}

func TestRegressionScript(t *testing.T) {
	out := runScript(t, "regression.lua")
	for i, want := range []float64{3, -2, 0.5} {
		re := []string{`learnt y = ([-+0-9.]+) x1`, `x1 ([-+0-9.]+) x2`, `x2 ([-+0-9.]+)`}[i]
		assert.InDelta(t, want, number(t, out, re), 0.05, fmt.Sprintf("coefficient %d", i+1))
	}
}

func TestCharLMScript(t *testing.T) {
	out := runScript(t, "charlm.lua", "200")
	uniform := number(t, out, `uniform guessing: ([0-9.]+)`)
	last := number(t, out, `step +200 +loss ([0-9.]+)`)
	assert.Less(t, last, uniform*0.75, "the model learnt something about its own source")
	assert.Contains(t, out, "sample:\nloc")
}

// TestStepsReplayAsOnADevice: a training step computed by the CPU as a GPU
// computes it (GGLUA_ASYNC=1) repeats the last step's graphs, addresses
// included, so that most are replayed (a device relaunches a captured CUDA
// graph). Its activations (1 MiB) need buffers of their own: a pass pool
// whose buffers came back from the cache in another order from step to
// step made every graph a new one.
func TestStepsReplayAsOnADevice(t *testing.T) {
	const code = `
local model = nn.Sequential{nn.Linear(16, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)}
model:to_gpu("persistent")
local opt = optim.adam(model:parameters(), {lr = 1e-4})
local x = to_gpu(tensor.randn(256, 16), "persistent")
local y = {}
for i = 1, 256 do y[i] = i % 10 + 1 end
y = to_gpu(tensor(y, {dtype = "i32"}), "persistent")
for _ = 1, 24 do
  opt:zero_grad()
  backward(with_grad_tape(function() return nn.cross_entropy(model(x), y) end))
  opt:step()
end
sync()
local s = residency.stats()
print(s.graph_computes, s.graph_replays)`
	cmd := exec.Command(gglua, "-e", code)
	cmd.Env = append(os.Environ(), "GGLUA_ASYNC=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	computes := number(t, string(out), `([0-9]+)\s+[0-9]+\s*$`)
	replayed := number(t, string(out), `[0-9]+\s+([0-9]+)\s*$`)
	// 24 of 54: the first steps not, nor the one after the pass pool's
	// buffer shrinks to what the steps use (the ninth: the first pass made
	// the data).
	assert.Greater(t, replayed, computes/4, string(out))
}
