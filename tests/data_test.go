package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestCSVRefusesNonRegularFiles: data.csv on a FIFO used to block forever in
// open() (waiting for a writer), on /dev/zero to read until its size cap and on
// a folder to fail with a bare "is a directory". Each is now refused at once
// with an error naming data.csv, the path and what it is; a symbolic link to
// a regular file still reads (issue [11] #9).
func TestCSVRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "good.csv")
	require.NoError(t, os.WriteFile(csvPath, []byte("a,b\n1,2\n3,4\n"), 0o644))
	link := filepath.Join(dir, "link.csv")
	require.NoError(t, os.Symlink(csvPath, link))
	fifo := filepath.Join(dir, "fifo.csv")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	fifoLink := filepath.Join(dir, "fifo-link.csv")
	require.NoError(t, os.Symlink(fifo, fifoLink))
	folder := filepath.Join(dir, "folder.csv")
	require.NoError(t, os.Mkdir(folder, 0o755))

	rt, err := runtime.New(runtime.Options{Threads: 1})
	require.NoError(t, err)
	defer rt.Close()
	csvOf := func(path string) ([]any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		type result struct {
			vals []any
			err  error
		}
		done := make(chan result, 1)
		go func() {
			vals, err := rt.DoString(ctx, fmt.Sprintf(`local m = data.csv(%q, {header = true}) return m:sum():item(), m:size(1)`, path))
			done <- result{vals, err}
		}()
		select {
		case r := <-done:
			return r.vals, r.err
		case <-time.After(15 * time.Second):
			// The script is stuck in open(): let it go by giving the FIFO a
			// writer, and wait for it, so that the runtime is not closed
			// under it.
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			<-done
			t.Fatalf("data.csv(%q) still blocked after 15 s", path)
			return nil, nil
		}
	}

	for _, path := range []string{csvPath, link} {
		got, err := csvOf(path)
		require.NoError(t, err, path)
		assert.Equal(t, []any{10.0, 2.0}, got, path)
	}
	for path, kind := range map[string]string{
		fifo: "a FIFO", fifoLink: "a FIFO", folder: "a folder", "/dev/zero": "a character device",
	} {
		_, err := csvOf(path)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), "data.csv", path)
		assert.Contains(t, err.Error(), path, path)
		assert.Contains(t, err.Error(), "not a regular file ("+kind+")", path)
	}
	_, err = csvOf(filepath.Join(dir, "missing.csv"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data.csv")
	assert.Contains(t, err.Error(), "missing.csv")
}
