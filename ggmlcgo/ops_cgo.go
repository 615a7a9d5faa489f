package ggmlcgo

// #include "gglua_ggml.h"
import "C"

// Go names for the ggml builders the op table in ops.go passes around (cgo
// functions cannot be used as values).

type cctx = *C.struct_ggml_context
type ctensor = *C.struct_ggml_tensor

func cNeg(c cctx, a ctensor) ctensor     { return C.ggml_neg(c, a) }
func cExp(c cctx, a ctensor) ctensor     { return C.ggml_exp(c, a) }
func cLog(c cctx, a ctensor) ctensor     { return C.ggml_log(c, a) }
func cSqrt(c cctx, a ctensor) ctensor    { return C.ggml_sqrt(c, a) }
func cSqr(c cctx, a ctensor) ctensor     { return C.ggml_sqr(c, a) }
func cAbs(c cctx, a ctensor) ctensor     { return C.ggml_abs(c, a) }
func cSgn(c cctx, a ctensor) ctensor     { return C.ggml_sgn(c, a) }
func cStep(c cctx, a ctensor) ctensor    { return C.ggml_step(c, a) }
func cRelu(c cctx, a ctensor) ctensor    { return C.ggml_relu(c, a) }
func cSigmoid(c cctx, a ctensor) ctensor { return C.ggml_sigmoid(c, a) }
func cTanh(c cctx, a ctensor) ctensor    { return C.ggml_tanh(c, a) }
func cGelu(c cctx, a ctensor) ctensor    { return C.ggml_gelu(c, a) }
func cSilu(c cctx, a ctensor) ctensor    { return C.ggml_silu(c, a) }
func cSum(c cctx, a ctensor) ctensor     { return C.ggml_sum(c, a) }
func cSumRows(c cctx, a ctensor) ctensor { return C.ggml_sum_rows(c, a) }
func cSoftMax(c cctx, a ctensor) ctensor { return C.ggml_soft_max(c, a) }
func cArgmax(c cctx, a ctensor) ctensor  { return C.ggml_argmax(c, a) }

func cAdd(c cctx, a, b ctensor) ctensor { return C.ggml_add(c, a, b) }
func cSub(c cctx, a, b ctensor) ctensor { return C.ggml_sub(c, a, b) }
func cMul(c cctx, a, b ctensor) ctensor { return C.ggml_mul(c, a, b) }
func cDiv(c cctx, a, b ctensor) ctensor { return C.ggml_div(c, a, b) }
