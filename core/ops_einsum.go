package core

import (
	"slices"
	"strings"
)

// Einsum is PyTorch's einsum over letters: "ij,jk->ik", "bhqd,bhkd->bhqk",
// "i,j->ij", "ij->ji", "ij,ij->" (a sum: shape [1], as gglua's full
// reductions), and without "->" the letters seen once, in alphabetical
// order. The operands are contracted left to right: letters nothing later
// reads are summed out first, then each pair is one batched matrix product
// (letters in both that are still needed are its batch, the others its
// inner dim), so the gradients are those of sum, permute, reshape and
// matmul. A dim of size 1 broadcasts against its letter's size elsewhere.
// Not supported, and refused: "..." and a letter repeated within
// one operand (a diagonal, "ii->i"); an intermediate of more than 4 dims.
func (e *Engine) Einsum(eq string, ops ...*Tensor) (*Tensor, error) {
	ins, out, err := parseEinsum(eq, ops)
	if err != nil {
		return nil, err
	}
	size := map[rune]int{} // a letter's size: a dim of 1 broadcasts, as torch's
	for k, spec := range ins {
		for i, l := range spec {
			if s, ok := size[l]; ok && s != ops[k].shape[i] && s != 1 && ops[k].shape[i] != 1 {
				return nil, shapeErrorf("einsum %q: letter %c is %d in one operand and %d in operand %d (shape %s)", eq, l, s, ops[k].shape[i], k+1, ShapeString(ops[k].shape))
			}
			size[l] = max(size[l], ops[k].shape[i])
		}
	}
	ops = slices.Clone(ops)
	for k, spec := range ins {
		want := make([]int, len(ops[k].shape))
		for i, l := range []rune(spec) {
			want[i] = size[l]
		}
		if !slices.Equal(want, ops[k].shape) {
			x, err := e.Expand(ops[k], want)
			if err != nil {
				return nil, err
			}
			ops[k] = x
		}
	}
	// needed(k) is what operands after k and the output read.
	needed := func(k int) string { return out + strings.Join(ins[k+1:], "") }
	cur, curIdx, err := e.sumLetters(ops[0], ins[0], needed(0))
	for k := 1; k < len(ops) && err == nil; k++ {
		var next *Tensor
		var nextIdx string
		next, nextIdx, err = e.sumLetters(ops[k], ins[k], curIdx+needed(k))
		if err == nil {
			cur, curIdx, err = e.contract(eq, cur, curIdx, next, nextIdx, needed(k), size)
		}
	}
	if err == nil {
		cur, curIdx, err = e.sumLetters(cur, curIdx, out)
	}
	if err != nil {
		return nil, err
	}
	if out == "" {
		return e.Reshape(cur, 1)
	}
	perm := make([]int, len(out))
	for i, l := range out {
		perm[i] = strings.IndexRune(curIdx, l)
	}
	return e.Permute(cur, perm...)
}

// parseEinsum splits eq into each operand's letters and the output's.
func parseEinsum(eq string, ops []*Tensor) ([]string, string, error) {
	spec := strings.ReplaceAll(eq, " ", "")
	if strings.Contains(spec, ".") {
		return nil, "", argErrorf("einsum %q: \"...\" is not supported; name every dim with a letter", eq)
	}
	lhs, out, explicit := strings.Cut(spec, "->")
	ins := strings.Split(lhs, ",")
	if len(ins) != len(ops) {
		return nil, "", argErrorf("einsum %q: %d operands in the equation, %d tensors given", eq, len(ins), len(ops))
	}
	count := map[rune]int{}
	for k, in := range ins {
		if len([]rune(in)) != ops[k].Dim() {
			return nil, "", shapeErrorf("einsum %q: operand %d has %d letters (%q) for a %d-d tensor of shape %s", eq, k+1, len([]rune(in)), in, ops[k].Dim(), ShapeString(ops[k].shape))
		}
		for _, l := range in {
			if !(l >= 'a' && l <= 'z' || l >= 'A' && l <= 'Z') {
				return nil, "", argErrorf("einsum %q: %q is not a letter", eq, l)
			}
			if strings.Count(in, string(l)) > 1 {
				return nil, "", argErrorf("einsum %q: letter %c twice in operand %d (a diagonal) is not supported", eq, l, k+1)
			}
			count[l]++
		}
	}
	if !explicit {
		var once []rune
		for l, n := range count {
			if n == 1 {
				once = append(once, l)
			}
		}
		slices.Sort(once) // torch's implicit output: alphabetical, upper case first
		out = string(once)
	}
	for _, l := range out {
		if count[l] == 0 {
			return nil, "", argErrorf("einsum %q: output letter %c appears in no operand", eq, l)
		}
		if strings.Count(out, string(l)) > 1 {
			return nil, "", argErrorf("einsum %q: output letter %c appears twice", eq, l)
		}
	}
	return ins, out, nil
}

// sumLetters sums x (whose dims are idx's letters) over the letters keep
// does not hold, and returns the rest's letters.
func (e *Engine) sumLetters(x *Tensor, idx, keep string) (*Tensor, string, error) {
	rs := []rune(idx)
	var err error
	for i := len(rs) - 1; i >= 0 && err == nil; i-- {
		if !strings.ContainsRune(keep, rs[i]) {
			if len(rs) == 1 {
				x, err = e.Sum(x) // shape [1], kept as a dim of no letter below
			} else {
				x, err = e.SumDim(x, i, false)
			}
			rs = slices.Delete(rs, i, i+1)
		}
	}
	return x, string(rs), err
}

// contract multiplies a and b (dims lettered ai and bi) over the letters
// they share: those keep holds stay (a batch), the others are summed by
// the product. The result's letters are the batch, a's own, b's own.
func (e *Engine) contract(eq string, a *Tensor, ai string, b *Tensor, bi string, keep string, size map[rune]int) (*Tensor, string, error) {
	var batch, inner, aOwn, bOwn []rune
	for _, l := range ai {
		switch {
		case !strings.ContainsRune(bi, l):
			aOwn = append(aOwn, l)
		case strings.ContainsRune(keep, l):
			batch = append(batch, l)
		default:
			inner = append(inner, l)
		}
	}
	for _, l := range bi {
		if !strings.ContainsRune(ai, l) {
			bOwn = append(bOwn, l)
		}
	}
	outIdx := string(slices.Concat(batch, aOwn, bOwn))
	if len(outIdx) > 4 {
		return nil, "", shapeErrorf("einsum %q: a product of %q and %q has %d dims (%q); gglua's tensors have at most 4", eq, ai, bi, len(outIdx), outIdx)
	}
	prod := func(ls []rune) int {
		p := 1
		for _, l := range ls {
			p *= size[l]
		}
		return p
	}
	arrange := func(x *Tensor, idx string, order []rune, rows, cols int) (*Tensor, error) {
		if idx == "" { // a sum down to shape [1]
			return e.Reshape(x, 1, rows, cols)
		}
		perm := make([]int, len(order))
		for i, l := range order {
			perm[i] = strings.IndexRune(idx, l)
		}
		p, err := e.Permute(x, perm...)
		if err != nil {
			return nil, err
		}
		return e.Reshape(p, prod(batch), rows, cols)
	}
	var c chain
	am := c.do(func() (*Tensor, error) {
		return arrange(a, ai, slices.Concat(batch, aOwn, inner), prod(aOwn), prod(inner))
	})
	bm := c.do(func() (*Tensor, error) {
		return arrange(b, bi, slices.Concat(batch, inner, bOwn), prod(inner), prod(bOwn))
	})
	y := c.do(func() (*Tensor, error) { return e.Matmul(am, bm) })
	shape := []int{1}
	if outIdx != "" {
		shape = shape[:0]
		for _, l := range outIdx {
			shape = append(shape, size[l])
		}
	}
	y = c.do(func() (*Tensor, error) { return e.Reshape(y, shape...) })
	return y, outIdx, c.err
}
