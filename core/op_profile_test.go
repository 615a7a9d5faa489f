package core

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// TestOpProfile: under an op profile a graph computes node by node with the
// same values, and the report counts each op and shape it ran.
func TestOpProfile(t *testing.T) {
	compute := func(e *Engine) []float32 {
		x := host(t, []int{2, 3}, 1, -2, 3, -4, 5, -6)
		w := host(t, []int{4, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
		y, err := e.Linear(x, w)
		require.NoError(t, err)
		y, err = e.Relu(y)
		require.NoError(t, err)
		return values(t, y)
	}
	want := compute(newEngine(t))

	e := newEngine(t)
	t.Setenv("GGLUA_OPPROFILE", "1")
	e.profile = newOpProfile()
	require.NotNil(t, e.profile)
	require.Equal(t, want, compute(e))
	var out bytes.Buffer
	e.profile.write(&out, 10)
	report := out.String()
	require.Regexp(t, `op profile \(CPU\): \d+ graphs`, report)
	require.Regexp(t, regexp.MustCompile(`(?m)^\s+[0-9.]+\s+[0-9.]+\s+1  MUL_MAT 4x2x1x1$`), report)
	require.Regexp(t, regexp.MustCompile(`(?m)^\s+[0-9.]+\s+[0-9.]+\s+1  CUSTOM\(relu\)$`), report)

	// gglua's own CPU kernels are named after themselves.
	x := host(t, []int{4, 2}, 1, 2, 3, 4, 5, 6, 7, 8)
	require.NoError(t, e.Realize())
	tr, err := e.Transpose(x, 0, 1)
	require.NoError(t, err)
	_, err = e.Contiguous(tr)
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	out.Reset()
	e.profile.write(&out, 20)
	require.Contains(t, out.String(), "CUSTOM(transpose) 4x2x1x1")

	// A cancelled context stops a profiled compute as it stops a plain one.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.SetContext(ctx)
	_, err = e.Relu(host(t, []int{2}, 1, -1))
	require.NoError(t, err)
	require.ErrorIs(t, e.Realize(), ggmlcgo.ErrAborted)

	t.Setenv("GGLUA_OPPROFILE", "")
	require.Nil(t, newOpProfile())
}
