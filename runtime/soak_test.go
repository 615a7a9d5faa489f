package runtime_test

import (
	"bytes"
	"context"
	"os"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestSoak runs scripts/bench/soak.lua, which asserts that both pools stay
// flat and that RSS grows less than 5%, then checks that closing the
// runtime leaves no goroutine behind. A short run always; 10,000 steps with
// GGLUA_SOAK=1 (or GGLUA_SOAK=<steps>).
func TestSoak(t *testing.T) {
	steps := 100
	if s := os.Getenv("GGLUA_SOAK"); s != "" {
		steps = 10000
		if n, err := strconv.Atoi(s); err == nil && n > 1 {
			steps = n
		}
	}
	before := goruntime.NumGoroutine()
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Stdout: &out})
	require.NoError(t, err)
	_, err = rt.DoFile(context.Background(), "../scripts/bench/soak.lua", strconv.Itoa(steps))
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), "pools flat")
	rt.Close()
	deadline := time.Now().Add(2 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, goruntime.NumGoroutine(), before, "goroutines left behind")
}
