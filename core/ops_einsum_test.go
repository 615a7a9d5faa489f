package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// einsumOps run the cases of torch_einsum.json (scripts/reference/einsum.py):
// values and gradients against torch 1.13's, and by Gradcheck.
var einsumOps = map[string]torchOp{
	"einsum": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var eq string
		c.arg(t, "eq", &eq)
		return e.Einsum(eq, in...)
	},
}

func TestEinsumMatchesTorch(t *testing.T) {
	runConvTorchFile(t, "testdata/torch_einsum.json", einsumOps, nil)
}

func TestEinsumRefusals(t *testing.T) {
	e := newEngine(t)
	a := host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	b := host(t, []int{3, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	for _, c := range []struct {
		eq   string
		ops  []*Tensor
		want string
	}{
		{"ij,jk->ik", []*Tensor{a}, "2 operands in the equation, 1 tensors given"},
		{"ijk->i", []*Tensor{a}, "operand 1 has 3 letters"},
		{"ij,ij->ij", []*Tensor{a, b}, "letter i is 2 in one operand and 3"},
		{"ii->i", []*Tensor{b}, "a diagonal"},
		{"...j->j", []*Tensor{a}, "\"...\" is not supported"},
		{"ij->k", []*Tensor{a}, "output letter k appears in no operand"},
		{"ij->ii", []*Tensor{a}, "appears twice"},
		{"i1->i", []*Tensor{a}, "not a letter"},
		{"ab,cd,ef->abcdef", []*Tensor{a, a, a}, "at most 4"},
	} {
		_, err := e.Einsum(c.eq, c.ops...)
		assert.ErrorContains(t, err, c.want, c.eq)
	}
}
