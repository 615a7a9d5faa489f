package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gglua/gglua/ggmlcgo"
)

var (
	loadOnce   sync.Once
	loadErrors error
)

// loadDynamicBackends loads, once per process, the ggml backend libraries
// (libggml-cuda.so, ...) found in GGLUA_BACKEND_PATH — a list of files or
// folders — or, when it is unset, in the folder of the executable. The CPU
// backend is compiled in and never loaded this way.
func loadDynamicBackends() error {
	loadOnce.Do(func() {
		var places []string
		if p := os.Getenv("GGLUA_BACKEND_PATH"); p != "" {
			places = filepath.SplitList(p)
		} else if exe, err := os.Executable(); err == nil {
			places = []string{filepath.Dir(exe)}
		}
		var errs []error
		for _, place := range places {
			files := []string{place}
			if st, err := os.Stat(place); err == nil && st.IsDir() {
				files, _ = filepath.Glob(filepath.Join(place, "libggml-*.so"))
			}
			for _, f := range files {
				base := filepath.Base(f)
				if strings.HasPrefix(base, "libggml-base") || strings.HasPrefix(base, "libggml-cpu") {
					continue
				}
				if _, err := ggmlcgo.LoadBackend(f); err != nil {
					errs = append(errs, err)
				}
			}
		}
		loadErrors = errors.Join(errs...)
	})
	if loadErrors != nil {
		return fmt.Errorf("loading ggml backends: %w", loadErrors)
	}
	return nil
}
