package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runtime"
)

func ExampleRuntime_DoString() {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	vals, err := rt.DoString(context.Background(), `
		local w = to_gpu(tensor{{1, 2}, {3, 4}}, "persistent")
		return w:scope(), w:sum():item(), {a = 1, b = "two"}`)
	if err != nil {
		panic(err)
	}
	fmt.Println(vals[0], vals[1], vals[2])
	// Output: persistent 10 map[a:1 b:two]
}

func ExampleRuntime_SetTensor() {
	rt, err := runtime.New(runtime.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	x, _ := core.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	rt.SetTensor("x", x)
	if _, err := rt.DoString(context.Background(), `y = x:sum(2) * 10`); err != nil {
		panic(err)
	}
	y, err := rt.Tensor("y")
	if err != nil {
		panic(err)
	}
	v, _ := y.Float32s()
	fmt.Println(y.Shape(), v)
	// Output: [2] [60 150]
}

func ExampleRuntime_Register() {
	rt, err := runtime.New(runtime.Options{Threads: 1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	rt.Register("scale", func(args []any) ([]any, error) {
		f, ok := args[0].(float64)
		if !ok {
			return nil, errors.New("expected a number")
		}
		return []any{f * 1.5}, nil
	})
	vals, _ := rt.DoString(context.Background(), `return scale(4)`)
	_, err = rt.DoString(context.Background(), `return scale("x")`)
	fmt.Println(vals[0], err != nil)
	// Output: 6 true
}

// trainTiny fits y = 2x + 1 with one Linear layer and returns its weight.
func trainTiny(t *testing.T, rt *runtime.Runtime) float64 {
	vals, err := rt.DoString(context.Background(), `
		tensor.manual_seed(1)
		local x = tensor{{0}, {1}, {2}, {3}}
		local y = x * 2 + 1
		local m = nn.Linear(1, 1)
		local opt = optim.sgd(m:parameters(), {lr = 0.05, momentum = 0.9})
		for _ = 1, 200 do
			opt:zero_grad()
			backward(with_grad_tape(function() return nn.mse_loss(m(x), y) end))
			opt:step()
		end
		return m.weight:item()`)
	require.NoError(t, err)
	return vals[0].(float64)
}

// TestParallelRuntimes trains in several runtimes at once; each has its own
// device state, and all get the result a lone runtime gets. Run with -race.
func TestParallelRuntimes(t *testing.T) {
	solo, err := runtime.New(runtime.Options{Threads: 1})
	require.NoError(t, err)
	want := trainTiny(t, solo)
	solo.Close()
	assert.InDelta(t, 2, want, 0.05)

	var wg sync.WaitGroup
	got := make([]float64, 4)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
			if !assert.NoError(t, err) {
				return
			}
			defer rt.Close()
			got[i] = trainTiny(t, rt)
		}(i)
	}
	wg.Wait()
	for i := range got {
		assert.Equal(t, want, got[i], "runtime %d", i)
	}
}

func TestCloseFreesEveryDeviceBuffer(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1})
	require.NoError(t, err)
	_, err = rt.DoString(context.Background(), `w = to_gpu(tensor.ones(64, 64), "persistent"); a = to_gpu(tensor.ones(8))`)
	require.NoError(t, err)
	res := rt.Engine().Residency()
	require.Positive(t, res.Ledger().TotalBufferBytes)
	rt.Close()
	assert.Zero(t, res.Ledger().TotalBufferBytes)
}

// cancelWithin cancels a running script 200 ms after it has called the Go
// function computing() (a script that has no such call: after 300 ms), and
// reports how long it took to return after the cancel. computing() lets a
// script say that it is past its Lua part (under load, building a graph
// can take longer than any fixed wait).
func cancelWithin(t *testing.T, rt *runtime.Runtime, code string) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{}, 1)
	rt.Register("computing", func([]any) ([]any, error) {
		started <- struct{}{}
		return nil, nil
	})
	go func() {
		_, err := rt.DoString(ctx, code)
		done <- err
	}()
	if strings.Contains(code, "computing()") {
		select {
		case <-started:
			time.Sleep(200 * time.Millisecond)
		case <-time.After(30 * time.Second):
			t.Fatal("the script did not reach computing()")
		}
	} else {
		time.Sleep(300 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
		return time.Since(start), err
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not stop")
	}
	return 0, nil
}

func TestCancellationStopsScriptsAndGraphs(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 2, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	elapsed, _ := cancelWithin(t, rt, `while true do end`)
	assert.Less(t, elapsed, time.Second, "between VM instructions")

	// One graph of a 4096x1024x4096 product (seconds of work even with
	// fast kernels; built in row blocks), cancelled while it computes: the
	// CPU backend stops between nodes.
	elapsed, err = cancelWithin(t, rt, `
		local a, b = tensor.randn(4096, 1024), tensor.randn(1024, 4096)
		return with_grad_tape(function() -- a step is never computed early
			local s = a:matmul(b):sum()
			computing()
			return s:item()
		end)`)
	assert.Less(t, elapsed, time.Second, "between graph nodes")
	assert.ErrorContains(t, err, "aborted")

	// The runtime goes on.
	vals, err := rt.DoString(context.Background(), `return (tensor{1, 2} * 3):sum():item()`)
	require.NoError(t, err)
	assert.Equal(t, 9.0, vals[0])
}

func TestValuesBothWays(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true})
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, rt.SetGlobal("cfg", map[string]any{"lr": 0.5, "layers": []any{4, 2}, "name": "m"}))
	vals, err := rt.DoString(context.Background(), `return cfg.lr * 2, #cfg.layers, cfg.name, tensor{1, 2}, nil, true`)
	require.NoError(t, err)
	require.Len(t, vals, 6)
	assert.Equal(t, 1.0, vals[0])
	assert.Equal(t, 2.0, vals[1])
	assert.Equal(t, "m", vals[2])
	x, ok := vals[3].(*core.Tensor)
	require.True(t, ok)
	assert.Equal(t, []int{2}, x.Shape())
	assert.Nil(t, vals[4])
	assert.Equal(t, true, vals[5])
	assert.Error(t, rt.SetGlobal("bad", struct{}{}))
	_, err = rt.Tensor("cfg")
	assert.ErrorContains(t, err, "not a tensor")
}

// A chunk's compile counts against the call's context: gopher-lua's
// compiler is quadratic in a function's constants (8,000 take about 0.15 s
// here, 30,000 2 s) and looks at no context, so DoString waits for it only
// until the deadline (outside a sandbox, which refuses such a chunk at
// once). The abandoned compile finishes in the background.
func TestCompilingStopsAtTheDeadline(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	parts := make([]string, 8000)
	for i := range parts {
		parts[i] = strconv.Itoa(i) + ".5"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = rt.DoString(ctx, "return {"+strings.Join(parts, ", ")+"}")
	assert.Less(t, time.Since(start), 100*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "compiling <string>")
	vals, err := rt.DoString(context.Background(), `return 1 + 1`)
	require.NoError(t, err)
	assert.Equal(t, 2.0, vals[0])
}
