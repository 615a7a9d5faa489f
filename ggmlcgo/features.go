package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import (
	"runtime"
	"strings"
)

// CPUFeatures lists the SIMD features ggml's CPU kernels were compiled with.
// They come from the C compiler flags of the build, not from the machine: a
// plain `go build` compiles ggml with none of them.
func CPUFeatures() []string {
	var out []string
	for _, f := range []struct {
		name string
		on   C.int
	}{
		{"sse3", C.ggml_cpu_has_sse3()},
		{"avx", C.ggml_cpu_has_avx()},
		{"avx2", C.ggml_cpu_has_avx2()},
		{"f16c", C.ggml_cpu_has_f16c()},
		{"fma", C.ggml_cpu_has_fma()},
		{"avx512", C.ggml_cpu_has_avx512()},
		{"neon", C.ggml_cpu_has_neon()},
	} {
		if f.on != 0 {
			out = append(out, f.name)
		}
	}
	return out
}

// SlowKernels reports whether ggml was built with only portable CPU kernels
// (on amd64: without AVX2), which run matmul tens of times slower.
func SlowKernels() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	return !strings.Contains(" "+strings.Join(CPUFeatures(), " ")+" ", " avx2 ")
}

// FastBuildHint says how to build ggml with fast kernels.
const FastBuildHint = `build with CGO_CFLAGS="-O3 -march=x86-64-v3" CGO_CXXFLAGS="-O3 -march=x86-64-v3" (as "make" does)`
