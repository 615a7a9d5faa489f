package tests

import (
	"bytes"
	"context"
	"fmt"
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
