package luabind

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// Composite reductions and sorting (core/ops_stats.go, ops_sort.go):
// var, std, logsumexp, norm, prod, cumsum, sort, argsort, topk, gather.
// Without a dim, var, std, norm and prod reduce the whole tensor (shape
// [1]); indices come back 1-based.

// flatOr is x flattened with dim 0 when argument n is nil (the whole
// tensor), else x and the dim read at n.
func (env *Env) flatOr(L *lua.LState, fn string, x *core.Tensor, n int) (*core.Tensor, int, bool) {
	if L.Get(n) == lua.LNil {
		flat, err := env.Engine.Reshape(x, int(x.Numel()))
		raise(L, err)
		return flat, 0, true
	}
	return x, checkDim(L, fn, n), false
}

// varStd binds var/std(x [, dim [, unbiased [, keepdim]]]) with an options
// table {unbiased=, correction=, keepdim=} allowed in place of unbiased.
func (env *Env) varStd(name string, f func(*core.Engine, *core.Tensor, int, float64, bool) (*core.Tensor, error)) lua.LGFunction {
	return func(L *lua.LState) int {
		x, d, all := env.flatOr(L, name, checkTensor(L, name, 1), 2)
		correction, keepdim := 1.0, false
		if _, ok := L.Get(3).(*lua.LTable); ok {
			o := readOpts(L, name, 3)
			if !o.boolean("unbiased", true) {
				correction = 0
			}
			correction = o.number("correction", correction)
			keepdim = o.boolean("keepdim", false)
			o.done()
		} else {
			if L.Get(3) != lua.LNil && !L.ToBool(3) {
				correction = 0
			}
			keepdim = L.OptBool(4, false)
		}
		t, err := f(env.Engine, x, d, correction, keepdim && !all)
		return env.pushResult(L, t, err)
	}
}

// logsumexp(x, dim [, keepdim]).
func (env *Env) logsumexp(L *lua.LState) int {
	x := checkTensor(L, "logsumexp", 1)
	t, err := env.Engine.LogSumExp(x, checkDim(L, "logsumexp", 2), L.OptBool(3, false))
	return env.pushResult(L, t, err)
}

// norm(x [, p=2 [, dim [, keepdim]]]): p a number (math.huge for the
// largest absolute value) or "fro" (2).
func (env *Env) norm(L *lua.LState) int {
	x := checkTensor(L, "norm", 1)
	p := 2.0
	switch v := L.Get(2).(type) {
	case *lua.LNilType:
	case lua.LNumber:
		p = float64(v)
	case lua.LString:
		if v != "fro" {
			argError(L, "norm", "p must be a number or \"fro\", got \"%s\"", string(v))
		}
	default:
		argError(L, "norm", "p must be a number or \"fro\", got %s", luaTypeName(v))
	}
	x, d, all := env.flatOr(L, "norm", x, 3)
	t, err := env.Engine.Norm(x, p, d, L.OptBool(4, false) && !all)
	return env.pushResult(L, t, err)
}

// prod(x [, dim [, keepdim]]).
func (env *Env) prod(L *lua.LState) int {
	x, d, all := env.flatOr(L, "prod", checkTensor(L, "prod", 1), 2)
	t, err := env.Engine.Prod(x, d, L.OptBool(3, false) && !all)
	return env.pushResult(L, t, err)
}

// cumsum(x, dim).
func (env *Env) cumsum(L *lua.LState) int {
	x := checkTensor(L, "cumsum", 1)
	t, err := env.Engine.Cumsum(x, checkDim(L, "cumsum", 2))
	return env.pushResult(L, t, err)
}

// sort(x [, dim=-1 [, descending=false]]): values and 1-based indices.
func (env *Env) sortOp(L *lua.LState) int {
	x := checkTensor(L, "sort", 1)
	vals, idx, err := env.Engine.Sort(x, optDim(L, "sort", 2, -1), L.OptBool(3, false))
	raise(L, err)
	L.Push(env.push(L, vals))
	L.Push(env.push(L, plusOne(L, env.Engine, idx)))
	return 2
}

// argsort(x [, dim=-1 [, descending=false]]): the 1-based indices.
func (env *Env) argsort(L *lua.LState) int {
	x := checkTensor(L, "argsort", 1)
	_, idx, err := env.Engine.Sort(x.Detach(), optDim(L, "argsort", 2, -1), L.OptBool(3, false))
	raise(L, err)
	return env.pushResult(L, plusOne(L, env.Engine, idx), nil)
}

// topk(x, k [, dim=-1 [, largest=true]]): values and 1-based indices,
// sorted.
func (env *Env) topk(L *lua.LState) int {
	x := checkTensor(L, "topk", 1)
	k := checkInteger(L, "topk", 2)
	largest := true
	if L.Get(4) != lua.LNil {
		largest = L.ToBool(4)
	}
	vals, idx, err := env.Engine.TopK(x, k, optDim(L, "topk", 3, -1), largest)
	raise(L, err)
	L.Push(env.push(L, vals))
	L.Push(env.push(L, plusOne(L, env.Engine, idx)))
	return 2
}

// indexArg reads argument n, 1-based indices as a tensor or a nested
// table, as 0-based ints and their shape.
func indexArg(L *lua.LState, fn string, n int) ([]int, []int) {
	if tbl, ok := L.Get(n).(*lua.LTable); ok {
		vals, shape := valuesFromLua(L, fn, tbl)
		return zeroBased(L, fn, vals), shape
	}
	it := checkTensor(L, fn, n)
	vals, err := it.Float64s()
	raise(L, err)
	return zeroBased(L, fn, vals), it.Shape()
}

// gather(x, dim, index): index a tensor (or nested table) of 1-based
// indices of x's rank.
func (env *Env) gather(L *lua.LState) int {
	x := checkTensor(L, "gather", 1)
	d := checkDim(L, "gather", 2)
	idx, shape := indexArg(L, "gather", 3)
	t, err := env.Engine.Gather(x, d, idx, shape)
	return env.pushResult(L, t, err)
}

// indexAddValue is index_add(x, dim, index, source [, {alpha=1}]) (and
// index_add_'s value): source times alpha added, as PyTorch's.
func (env *Env) indexAddValue(L *lua.LState, x *core.Tensor) *core.Tensor {
	d := checkDim(L, "index_add", 2)
	idx, _ := indexArg(L, "index_add", 3)
	source := checkTensor(L, "index_add", 4)
	o := readOpts(L, "index_add", 5)
	if alpha := o.number("alpha", 1); alpha != 1 {
		scaled, err := env.Engine.Arith(core.OpMul, core.Operand{T: source}, core.Operand{N: alpha})
		raise(L, err)
		source = scaled
	}
	o.done()
	t, err := env.Engine.IndexAdd(x, d, idx, source)
	raise(L, err)
	return t
}

// scatterAddValue is scatter_add(x, dim, index, src) (and scatter_add_'s):
// index may be smaller than src, whose elements outside index's shape are
// not used, as in PyTorch.
func (env *Env) scatterAddValue(L *lua.LState, x *core.Tensor) *core.Tensor {
	d := checkDim(L, "scatter_add", 2)
	idx, shape := indexArg(L, "scatter_add", 3)
	src := checkTensor(L, "scatter_add", 4)
	t, err := env.Engine.ScatterAddIndex(x, d, idx, shape, src)
	raise(L, err)
	return t
}

// outOf binds a value function of a method as the method itself.
func (env *Env) outOf(name string, f func(L *lua.LState, x *core.Tensor) *core.Tensor) lua.LGFunction {
	return func(L *lua.LState) int { return env.pushResult(L, f(L, checkTensor(L, name, 1)), nil) }
}

// masked_select(x, mask): the selected elements, 1-d.
func (env *Env) maskedScatter(L *lua.LState) int {
	const fn = "masked_scatter"
	t, err := env.Engine.MaskedScatter(checkTensor(L, fn, 1), checkTensor(L, fn, 2), checkTensor(L, fn, 3))
	return env.pushResult(L, t, err)
}

func (env *Env) maskedSelect(L *lua.LState) int {
	t, err := env.Engine.MaskedSelect(checkTensor(L, "masked_select", 1), checkTensor(L, "masked_select", 2))
	return env.pushResult(L, t, err)
}
