package tests

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestDemoScript runs the README demo for a few steps; the script asserts its
// own claims (flat persistent pool, batch-only uploads) as it goes.
func TestDemoScript(t *testing.T) {
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: &out})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoFile(context.Background(), "../scripts/train.lua", "60")
	require.NoError(t, err)
	assert.Contains(t, out.String(), "after 60 steps")
	assert.Contains(t, out.String(), "h2d/step 4096 B")
}
