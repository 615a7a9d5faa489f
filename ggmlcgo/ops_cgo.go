package ggmlcgo

// #include "gglua_ggml.h"
//
// // One entry point for every elementwise unary op, numbered in the order
// // of GGLUA_UNARY_OPS, and their names in that order.
// #define GGLUA_UNARY_NAME(name) #name,
// static const char * gglua_unary_names[] = { GGLUA_UNARY_OPS(GGLUA_UNARY_NAME) };
// static int gglua_n_unary(void) { return sizeof(gglua_unary_names) / sizeof(gglua_unary_names[0]); }
// static const char * gglua_unary_name(int i) { return gglua_unary_names[i]; }
// #define GGLUA_UNARY_CALL(name) if (i == k++) return ggml_##name(ctx, a);
// static struct ggml_tensor * gglua_unary(struct ggml_context * ctx, int i, struct ggml_tensor * a) {
//     int k = 0;
//     GGLUA_UNARY_OPS(GGLUA_UNARY_CALL)
//     return NULL;
// }
import "C"

import "fmt"

// unaryOps numbers the names in GGLUA_UNARY_OPS for gglua_unary.
var unaryOps = func() map[string]int {
	m := map[string]int{}
	for i := 0; i < int(C.gglua_n_unary()); i++ {
		m[C.GoString(C.gglua_unary_name(C.int(i)))] = i
	}
	return m
}()

// Unary is the elementwise op named op (a ggml function listed in
// GGLUA_UNARY_OPS of gglua_ggml.h: "exp", "log", "relu", ...).
func (c *Context) Unary(op string, a Tensor) (Tensor, error) {
	i, ok := unaryOps[op]
	if !ok {
		return Tensor{}, fmt.Errorf("unary: %q is not one of ggml's unary ops declared in gglua_ggml.h", op)
	}
	if err := c.checkF32(op, a); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_unary(c.p, C.int(i), a.p))
}

// Go names for the ggml builders that ops.go passes around (cgo functions
// cannot be used as values).

type cctx = *C.struct_ggml_context
type ctensor = *C.struct_ggml_tensor

func cSum(c cctx, a ctensor) ctensor     { return C.ggml_sum(c, a) }
func cSumRows(c cctx, a ctensor) ctensor { return C.ggml_sum_rows(c, a) }
func cSoftMax(c cctx, a ctensor) ctensor { return C.ggml_soft_max(c, a) }
func cArgmax(c cctx, a ctensor) ctensor  { return C.ggml_argmax(c, a) }

func cAdd(c cctx, a, b ctensor) ctensor        { return C.ggml_add(c, a, b) }
func cSub(c cctx, a, b ctensor) ctensor        { return C.ggml_sub(c, a, b) }
func cMul(c cctx, a, b ctensor) ctensor        { return C.ggml_mul(c, a, b) }
func cMulInplace(c cctx, a, b ctensor) ctensor { return C.ggml_mul_inplace(c, a, b) }
func cDiv(c cctx, a, b ctensor) ctensor        { return C.ggml_div(c, a, b) }
