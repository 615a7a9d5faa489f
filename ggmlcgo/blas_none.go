//go:build !openblas

package ggmlcgo

import "errors"

// BLASAvailable reports whether Gemm runs: not in this build (build with
// -tags openblas and Debian's libopenblas-dev; the Makefile does when it
// finds OpenBLAS).
func BLASAvailable() bool { return false }

// Gemm needs the openblas build; see BLASAvailable.
func (c *Context) Gemm(a, b Tensor, ta, tb bool, out [MaxDims]int64) (Tensor, error) {
	return Tensor{}, errors.New("gemm: this build has no BLAS (build with -tags openblas)")
}

// ConvCPU needs the openblas build; see BLASAvailable.
func (c *Context) ConvCPU(mode ConvMode, a, b, scratch, bias Tensor, out [MaxDims]int64, w Window) (Tensor, error) {
	return Tensor{}, errors.New("conv: this build has no BLAS (build with -tags openblas)")
}
