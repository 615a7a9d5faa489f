package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runtime"
)

// TestSetTensorCopiesHostValues: a host tensor handed to a script is a
// copy (runtime/doc.go says so). A Go slice rewritten between DoString
// calls never shows through, neither half-way (a direct read new, a
// computed value from an upload cached in the pass old) nor after a tape.
func TestSetTensorCopiesHostValues(t *testing.T) {
	const read = `return (x * 1):sum():item(), x:totable()[1], x:sum():item()`
	for name, set := range map[string]func(rt *runtime.Runtime, x *core.Tensor) error{
		"SetTensor": func(rt *runtime.Runtime, x *core.Tensor) error { return rt.SetTensor("x", x) },
		"SetGlobal": func(rt *runtime.Runtime, x *core.Tensor) error { return rt.SetGlobal("x", x) },
		"Register": func(rt *runtime.Runtime, x *core.Tensor) error {
			rt.Register("get", func([]any) ([]any, error) { return []any{x}, nil })
			_, err := rt.DoString(context.Background(), `x = get()`)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			rt := newRuntime(t, true)
			xs := []float32{1, 2, 3}
			x, err := core.FromFloat32(xs, 3)
			require.NoError(t, err)
			require.NoError(t, set(rt, x))
			assert.Equal(t, []any{6.0, 1.0, 6.0}, doString(t, rt, read))

			for i := range xs {
				xs[i] = 10
			}
			assert.Equal(t, []any{6.0, 1.0, 6.0}, doString(t, rt, read), "the script's copy, whole")
			doString(t, rt, `with_grad_tape(function() return (x * 2):sum() end)`)
			assert.Equal(t, []any{6.0, 1.0, 6.0}, doString(t, rt, read), "after a tape too")

			// The script's own writes stay in its copy.
			doString(t, rt, `no_grad(function() x:fill_(5) end)`)
			assert.Equal(t, []float32{10, 10, 10}, xs)
			got, err := rt.Tensor("x")
			require.NoError(t, err)
			vals, err := got.Float32s()
			require.NoError(t, err)
			assert.Equal(t, []float32{5, 5, 5}, vals)
		})
	}
}

// TestSetTensorKeepsDtypeAndGrad: the copy is the same kind of tensor.
func TestSetTensorKeepsDtypeAndGrad(t *testing.T) {
	rt := newRuntime(t, true)
	x, err := core.FromFloat32([]float32{1, 2}, 2)
	require.NoError(t, err)
	require.NoError(t, x.SetRequiresGrad(true))
	require.NoError(t, rt.SetTensor("p", x))
	assert.Equal(t, []any{true, 2.0}, doString(t, rt, `return p:requires_grad(), (p * p):sum():item() - 3`))
}
