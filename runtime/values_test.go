package runtime_test

import (
	"context"
	"io"
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

// Values cross between Lua and Go faithfully, or not at all (issue [19],
// item 12): a nil element keeps its place both ways, a table with names
// beside its elements keeps them, and keys that are one string in Go are
// refused.
func TestConversionsAreFaithful(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	rt.Register("echo", func(args []any) ([]any, error) { return args, nil })
	require.NoError(t, rt.SetGlobal("holes", []any{nil, 1.0, nil, 2.0}))
	vals, err := rt.DoString(context.Background(), `
		local e = echo({1, 2, nil, 4})
		return holes[1] == nil, holes[2], holes[3] == nil, holes[4], e[3] == nil, e[4]`)
	require.NoError(t, err)
	assert.Equal(t, []any{true, 1.0, true, 2.0, true, 4.0}, vals)

	vals, err = rt.DoString(context.Background(), `return {1, 2, x = 5}, {1, nil, 3}, {[1e9] = 1}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"1": 1.0, "2": 2.0, "x": 5.0}, vals[0], "names beside elements are kept")
	assert.Equal(t, []any{1.0, nil, 3.0}, vals[1], "a hole is a nil element")
	assert.Equal(t, map[string]any{"1000000000": 1.0}, vals[2], "a sparse table is a map")

	for code, want := range map[string]string{
		`return {[true] = 1, ["true"] = 2}`:  `keys`,
		`return {[1] = 1, ["1"] = 2, x = 3}`: `which are both "1" in Go`,
		`return {[{}] = 1}`:                  "a key of type table",
	} {
		_, err := rt.DoString(context.Background(), code)
		assert.ErrorIs(t, err, runtime.ErrConvert, code)
		assert.ErrorContains(t, err, want, code)
	}
}
