package tests

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestProgressOverALoader: progress(loader) knows its total (#loader) and
// shows an ETA, every epoch.
func TestProgressOverALoader(t *testing.T) {
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, Stdout: &out})
	require.NoError(t, err)
	defer rt.Close()
	got, err := rt.DoString(context.Background(), `
		local rows = {}
		for i = 1, 20 do rows[i] = {i} end
		local ld = data.loader(tensor(rows), nil, {batch = 2, shuffle = true})
		local seen = 0
		for epoch = 1, 2 do
			for xb in progress(ld) do seen = seen + xb:size(1) end
		end
		return #ld, seen`)
	require.NoError(t, err)
	assert.Equal(t, []any{10.0, 40.0}, got)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 20, out.String()) // a line per batch (every tenth of 10), two epochs
	assert.Contains(t, lines[0], "1/10 eta ")
	assert.Contains(t, lines[9], "100%")
	assert.Contains(t, lines[9], "10/10")
	assert.Contains(t, lines[10], "1/10 eta ")
}
