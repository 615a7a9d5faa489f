package runtime

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
)

// A nil tensor given to SetTensor or SetGlobal makes the global nil (it
// was a Go panic).
func TestNilTensorIsNil(t *testing.T) {
	rt, err := New(Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	require.NoError(t, rt.SetTensor("t", nil))
	var p *core.Tensor
	require.NoError(t, rt.SetGlobal("u", p))
	require.NoError(t, rt.SetGlobal("w", []any{p}))
	vals, err := rt.DoString(context.Background(), "return t == nil, u == nil, #w")
	require.NoError(t, err)
	assert.Equal(t, []any{true, true, 0.0}, vals)
}

// A Runtime runs one call at a time: any other use meanwhile is ErrBusy
// (it was "internal error" results, and now and then a panic), a
// Register'd function's included, and Close from another goroutine cancels
// the running call and waits for it (it was a SIGSEGV).
func TestRuntimeRefusesConcurrentUse(t *testing.T) {
	rt, err := New(Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	started := make(chan struct{})
	rt.Register("started", func([]any) ([]any, error) {
		// A callback runs inside the call: it too is refused (it takes and
		// returns values), or every goroutine could come in with it.
		assert.ErrorIs(t, rt.SetGlobal("from_callback", 7.0), ErrBusy)
		close(started)
		return nil, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := rt.DoString(context.Background(), "started() local x = tensor.ones(64, 64) while true do x = x:matmul(x) * 1e-3 end")
		done <- err
	}()
	<-started
	_, err = rt.DoString(context.Background(), "return 1")
	assert.ErrorIs(t, err, ErrBusy)
	assert.ErrorIs(t, rt.SetGlobal("g", 1.0), ErrBusy)
	_, err = rt.Tensor("x")
	assert.ErrorIs(t, err, ErrBusy)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ { // Close from several goroutines at once
		wg.Add(1)
		go func() { defer wg.Done(); rt.Close() }()
	}
	wg.Wait()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled), "the running call ended by Close: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not end the running call")
	}
	_, err = rt.DoString(context.Background(), "return 1")
	assert.ErrorIs(t, err, ErrClosed)
}
