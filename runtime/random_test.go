package runtime_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

const draws = `local t = {} for i = 1, 20 do t[i] = math.random(1, 1000000) end t[21] = math.random() return t`

func doString(t *testing.T, rt *runtime.Runtime, code string) []any {
	t.Helper()
	got, err := rt.DoString(context.Background(), code)
	require.NoError(t, err)
	return got
}

// TestRandomseedMakesRunsReproducible: each runtime has its own generator;
// the same seed gives the same numbers, in any runtime, however another
// runtime draws in between.
func TestRandomseedMakesRunsReproducible(t *testing.T) {
	a, b := newRuntime(t, true), newRuntime(t, true)
	doString(t, a, `math.randomseed(42)`)
	doString(t, b, `math.randomseed(42)`)
	first := doString(t, a, draws)
	doString(t, b, `for i = 1, 7 do math.random() end math.randomseed(42)`)
	assert.Equal(t, first, doString(t, b, draws), "same seed, same numbers")
	doString(t, a, `math.randomseed(42)`)
	assert.Equal(t, first, doString(t, a, draws), "seeding again starts over")
	doString(t, a, `math.randomseed(43)`)
	assert.NotEqual(t, first, doString(t, a, draws), "another seed, other numbers")

	// Unseeded, every runtime starts from the same seed (as Lua 5.1).
	c, d := newRuntime(t, true), newRuntime(t, true)
	assert.Equal(t, doString(t, c, draws), doString(t, d, draws))
}

func TestRandomIntervals(t *testing.T) {
	rt := newRuntime(t, true)
	got := doString(t, rt, `
		math.randomseed(7)
		local lo, hi, seen, range_ok = 1, 0, {}, true
		for i = 1, 2000 do
			local u = math.random()
			if u < 0 or u >= 1 then range_ok = false end
			local k = math.random(3)
			if k ~= 1 and k ~= 2 and k ~= 3 then range_ok = false end
			seen[k] = true
			local j = math.random(-2, 2)
			if j < -2 or j > 2 or j ~= math.floor(j) then range_ok = false end
			seen["j" .. j] = true
		end
		local all = seen[1] and seen[2] and seen[3] and seen["j-2"] and seen["j2"] and seen["j0"]
		return range_ok, all and true or false, math.random(5, 5), math.random(1)`)
	assert.Equal(t, []any{true, true, 5.0, 1.0}, got)

	for code, msg := range map[string]string{
		`math.random(0)`:       "interval is empty",
		`math.random(-3)`:      "interval is empty",
		`math.random(2, 1)`:    "interval is empty",
		`math.random(1.5)`:     "no integer representation",
		`math.random(1, 2.5)`:  "no integer representation",
		`math.random(0/0)`:     "no integer representation",
		`math.random(1/0)`:     "no integer representation",
		`math.random(1, 2, 3)`: "wrong number of arguments",
		`math.random("x")`:     "number expected",
		`math.randomseed(0/0)`: "finite number",
	} {
		_, err := rt.DoString(context.Background(), code)
		assert.ErrorContains(t, err, msg, code)
	}
}

// TestTrainScriptIsReproducible: scripts/train.lua seeds math.random (its
// data) and tensor.manual_seed (its weights); two runs with the same
// threads print the same losses.
func TestTrainScriptIsReproducible(t *testing.T) {
	run := func() []string {
		var out bytes.Buffer
		rt, err := runtime.New(runtime.Options{Threads: 2, Stdout: &out})
		require.NoError(t, err)
		defer rt.Close()
		_, err = rt.DoFile(context.Background(), filepath.Join("..", "scripts", "train.lua"), "30", filepath.Join(t.TempDir(), "m.gguf"))
		require.NoError(t, err, out.String())
		losses := regexp.MustCompile(`loss[ =]([0-9.e+-]+)(?: -> ([0-9.e+-]+))?`).FindAllString(out.String(), -1)
		require.NotEmpty(t, losses, out.String())
		return losses
	}
	first := run()
	assert.Equal(t, first, run())
}
