# make demo  - build bin/gglua with fast CPU kernels and run scripts/train.lua
# make test  - go vet, go test ./... and the race detector on parallel runtimes (what CI runs)
# make test-short - the fast tier: go vet and go test -short ./... (no mpirun tests, no pty
#              REPL tests, no new-op recipe build, no race run, no OpenBLAS rerun)
#
# A plain cgo build compiles ggml's CPU kernels with no SIMD at all (f32
# matmul 2-4 GFLOP/s). -O3 -march=x86-64-v3 (AVX2, FMA, F16C) runs any AVX2
# machine ~25x faster and measured faster than -march=native here. Override
# with `make CGO_CFLAGS=... CGO_CXXFLAGS=...`; nothing depends on them for
# correctness.

ifeq ($(shell uname -m),x86_64)
FAST_CFLAGS ?= -O3 -march=x86-64-v3
else
FAST_CFLAGS ?= -O3
endif
export CGO_CFLAGS ?= $(FAST_CFLAGS)
# ggml's repack.cpp trips a false -Wstringop-overflow at -O3.
export CGO_CXXFLAGS ?= $(FAST_CFLAGS) -Wno-stringop-overflow

# With Debian's libopenblas-dev installed, large matmuls run on OpenBLAS
# (build tag openblas): ggml's own f32 GEMM reaches ~100 GFLOP/s on two
# cores, OpenBLAS ~140. Without it gglua builds and runs on ggml alone.
ifneq ($(wildcard /usr/include/x86_64-linux-gnu/cblas.h /usr/include/cblas.h),)
ifneq ($(wildcard /usr/lib/x86_64-linux-gnu/libopenblas.so /usr/lib/libopenblas.so),)
TAGS ?= -tags openblas
endif
endif

# -rdynamic lets a dynamically loaded ggml backend (libggml-cuda.so) bind to
# the ggml compiled into gglua instead of loading a second copy.
GO_LDFLAGS := -extldflags=-rdynamic

.PHONY: all build demo test test-short fuzz bench clean

all: build

build:
	go build $(TAGS) -ldflags="$(GO_LDFLAGS)" -o bin/gglua ./cmd/gglua

demo: build
	./bin/gglua scripts/train.lua

test:
	go vet ./...
	go test ./...
	go test -race ./runtime/
	$(if $(TAGS),go test $(TAGS) ./ggmlcgo/ ./core/ ./tests/)

# The fast tier, for the edit-test loop; make test remains what CI runs.
test-short:
	go vet ./...
	go test -short ./...

# A short fuzz of random tensor programs and of the GGUF reader's bytes
# (CI runs it after the tests), about 20-30 s each here. The budgets are
# counts of runs, not durations: a duration ends in a race of Go's fuzzing
# coordinator (go.dev/issue/75804, fixed in Go 1.27) that fails a clean run
# with "context deadline exceeded" now and then (FuzzGGUF once here).
FUZZ_SCRIPTS ?= 2000x
FUZZ_GGUF ?= 150000x
fuzz:
	go test ./runtime/ -run '^$$' -fuzz FuzzScript -fuzztime $(FUZZ_SCRIPTS) -fuzzminimizetime 5s
	go test ./ggmlcgo/ -run '^$$' -fuzz FuzzGGUF -fuzztime $(FUZZ_GGUF) -fuzzminimizetime 5s

bench:
	go test $(TAGS) -run '^$$' -bench . -benchtime 2s ./ggmlcgo/ ./core/...
	scripts/bench/compare.sh

clean:
	rm -rf bin
