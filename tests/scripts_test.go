package tests

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestDemoScript runs the README demo: the loss must fall and the persistent
// pool stay as it was after the first step.
func TestDemoScript(t *testing.T) {
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: &out})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoFile(context.Background(), "../scripts/train.lua", "300")
	require.NoError(t, err)
	assert.Contains(t, out.String(), "persistent pool 1048576 B  h2d 6400 B")
	assert.Contains(t, out.String(), "step  300")
	var acc float64
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "accuracy: ") {
			_, err := fmt.Sscanf(line, "accuracy: %f%%", &acc)
			require.NoError(t, err)
		}
	}
	assert.GreaterOrEqual(t, acc, 90.0, out.String())
}
