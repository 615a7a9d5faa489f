package luabind

import (
	"maps"
	"weak"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/ggmlcgo"
)

// The tensor library: its whole Lua surface in two sorted tables. Methods
// are called x:name(...) or tensor.name(x, ...); functions only
// tensor.name(...). Each entry is a named binding (tensor_ops.go,
// create.go, checkpoint.go) or a one-line adapter over a core op.

func (env *Env) tensorMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"abs":               env.unary("abs", (*core.Engine).Abs),
		"add":               env.arith(core.OpAdd),
		"add_":              env.inPlace("add_", env.arithValue(core.OpAdd)),
		"all":               env.reduction("all", (*core.Engine).All, (*core.Engine).AllDim),
		"any":               env.reduction("any", (*core.Engine).Any, (*core.Engine).AnyDim),
		"argmax":            env.argmax,
		"argsort":           env.argsort,
		"backward":          env.backward,
		"bernoulli":         env.bernoulli,
		"bfloat16":          env.toDtype("bfloat16", ggmlcgo.BF16, false),
		"bmm":               env.binaryTensors("bmm", (*core.Engine).Bmm),
		"cat":               env.cat,
		"ceil":              env.unary("ceil", (*core.Engine).Ceil),
		"chunk":             env.chunk,
		"clamp":             env.clamp,
		"clamp_":            env.inPlace("clamp_", env.clampValue),
		"clone":             env.unary("clone", (*core.Engine).Clone),
		"contiguous":        env.unary("contiguous", (*core.Engine).Contiguous),
		"copy_":             env.inPlace("copy_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return checkTensor(L, "copy_", 2) }),
		"cos":               env.unary("cos", (*core.Engine).Cos),
		"cumsum":            env.cumsum,
		"detach":            tensorDetach,
		"device":            tensorDevice,
		"dim":               tensorDim,
		"div":               env.arith(core.OpDiv),
		"div_":              env.inPlace("div_", env.arithValue(core.OpDiv)),
		"dot":               env.binaryTensors("dot", (*core.Engine).Dot),
		"dropout":           env.dropout,
		"dtype":             tensorDtype,
		"eq":                env.compare(core.OpEQ),
		"exp":               env.unary("exp", (*core.Engine).Exp),
		"expand":            env.expand,
		"expand_as":         env.expandAs,
		"erf":               env.unary("erf", (*core.Engine).Erf),
		"expm1":             env.unary("expm1", (*core.Engine).Expm1),
		"fill_":             env.inPlace("fill_", fillValue),
		"flatten":           env.flatten,
		"flip":              env.flip,
		"float":             env.toDtype("float", ggmlcgo.F32, false),
		"floor":             env.unary("floor", (*core.Engine).Floor),
		"gather":            env.gather,
		"ge":                env.compare(core.OpGE),
		"gelu":              env.gelu,
		"gt":                env.compare(core.OpGT),
		"half":              env.toDtype("half", ggmlcgo.F16, false),
		"int":               env.toDtype("int", ggmlcgo.I32, false),
		"index_add":         env.outOf("index_add", env.indexAddValue),
		"index_add_":        env.inPlace("index_add_", env.indexAddValue),
		"index_select":      env.indexSelect,
		"isfinite":          env.unary("isfinite", (*core.Engine).IsFinite),
		"isinf":             env.unary("isinf", (*core.Engine).IsInf),
		"isnan":             env.unary("isnan", (*core.Engine).IsNaN),
		"item":              tensorItem,
		"layer_norm":        env.layerNorm,
		"le":                env.compare(core.OpLE),
		"linear":            env.linear,
		"log":               env.unary("log", (*core.Engine).Log),
		"log1p":             env.unary("log1p", (*core.Engine).Log1p),
		"log_softmax":       env.alongDim("log_softmax", (*core.Engine).LogSoftmax),
		"logical_and":       env.logical(core.OpAnd),
		"logical_not":       env.unary("logical_not", (*core.Engine).LogicalNot),
		"logical_or":        env.logical(core.OpOr),
		"logical_xor":       env.logical(core.OpXor),
		"logsumexp":         env.logsumexp,
		"lt":                env.compare(core.OpLT),
		"masked_fill":       env.maskedFill,
		"masked_fill_":      env.inPlace("masked_fill_", env.maskedFillValue),
		"masked_scatter":    env.maskedScatter,
		"masked_select":     env.maskedSelect,
		"matmul":            env.binaryTensors("matmul", (*core.Engine).Matmul),
		"max":               env.extreme("max", (*core.Engine).Max, (*core.Engine).MaxDim),
		"maximum":           env.binaryTensors("maximum", (*core.Engine).Maximum),
		"mean":              env.reduction("mean", (*core.Engine).Mean, (*core.Engine).MeanDim),
		"min":               env.extreme("min", (*core.Engine).Min, (*core.Engine).MinDim),
		"minimum":           env.binaryTensors("minimum", (*core.Engine).Minimum),
		"mul":               env.arith(core.OpMul),
		"mul_":              env.inPlace("mul_", env.arithValue(core.OpMul)),
		"multinomial":       env.multinomial,
		"narrow":            env.narrow,
		"ne":                env.compare(core.OpNE),
		"neg":               env.unary("neg", (*core.Engine).Neg),
		"new_full":          env.newFilled("new_full", 0, true),
		"new_ones":          env.newFilled("new_ones", 1, false),
		"new_zeros":         env.newFilled("new_zeros", 0, false),
		"norm":              env.norm,
		"normal_":           env.inPlace("normal_", env.normalValues),
		"numel":             tensorNumel,
		"outer":             env.binaryTensors("outer", (*core.Engine).Outer),
		"permute":           env.permute,
		"pow":               env.arith(core.OpPow),
		"prod":              env.prod,
		"reciprocal":        env.unary("reciprocal", (*core.Engine).Reciprocal),
		"relu":              env.unary("relu", (*core.Engine).Relu),
		"repeat_interleave": env.repeatInterleave,
		"requires_grad":     tensorRequiresGrad,
		"reshape":           env.reshape,
		"roll":              env.roll,
		"round":             env.unary("round", (*core.Engine).Round),
		"rsqrt":             env.unary("rsqrt", (*core.Engine).Rsqrt),
		"scatter_add":       env.outOf("scatter_add", env.scatterAddValue),
		"scatter_add_":      env.inPlace("scatter_add_", env.scatterAddValue),
		"scope":             tensorScope,
		"select":            env.selectOp,
		"shape":             tensorShape,
		"sigmoid":           env.unary("sigmoid", (*core.Engine).Sigmoid),
		"sign":              env.unary("sign", (*core.Engine).Sign),
		"silu":              env.unary("silu", (*core.Engine).Silu),
		"sin":               env.unary("sin", (*core.Engine).Sin),
		"size":              tensorSize,
		"softmax":           env.alongDim("softmax", (*core.Engine).Softmax),
		"sort":              env.sortOp,
		"split":             env.split,
		"sqrt":              env.unary("sqrt", (*core.Engine).Sqrt),
		"square":            env.unary("square", (*core.Engine).Square),
		"squeeze":           env.squeeze,
		"std":               env.varStd("std", (*core.Engine).Std),
		"sub":               env.arith(core.OpSub),
		"sub_":              env.inPlace("sub_", env.arithValue(core.OpSub)),
		"sum":               env.reduction("sum", (*core.Engine).Sum, (*core.Engine).SumDim),
		"t":                 env.t,
		"tan":               env.unary("tan", (*core.Engine).Tan),
		"tanh":              env.unary("tanh", (*core.Engine).Tanh),
		"tile":              env.tile,
		"to":                env.toDtype("to", ggmlcgo.F32, true),
		"topk":              env.topk,
		"totable":           tensorTotable,
		"transpose":         env.transpose,
		"tril":              env.triangle("tril", (*core.Engine).Tril),
		"triu":              env.triangle("triu", (*core.Engine).Triu),
		"trunc":             env.unary("trunc", (*core.Engine).Trunc),
		"unflatten":         env.unflatten,
		"uniform_":          env.inPlace("uniform_", env.uniformValues),
		"unsqueeze":         env.unsqueeze,
		"var":               env.varStd("var", (*core.Engine).Var),
		"view":              env.view,
		"view_as":           env.viewAs,
		"zero_":             env.inPlace("zero_", zeroValue),
	}
}

// tensorFunctions are tensor.name(...) only: constructors and helpers.
func (env *Env) tensorFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"arange":        env.arange,
		"cat":           env.catList,
		"einsum":        env.einsum,
		"eye":           env.eye,
		"full":          env.full,
		"full_like":     env.like("full_like", fullLike),
		"load":          env.load,
		"manual_seed":   env.manualSeed,
		"ones":          env.filled("tensor.ones", func(*Env) float32 { return 1 }),
		"ones_like":     env.like("ones_like", constant(1)),
		"param":         env.param,
		"rand":          env.filled("tensor.rand", func(env *Env) float32 { return float32(env.Engine.Rand().Float64()) }),
		"rand_like":     env.like("rand_like", randLike),
		"randint":       env.randint,
		"randn":         env.filled("tensor.randn", func(env *Env) float32 { return float32(env.Engine.Rand().NormFloat64()) }),
		"randn_like":    env.like("randn_like", randnLike),
		"randperm":      env.randperm,
		"save":          env.save,
		"scalar_tensor": env.scalarTensor,
		"stack":         env.stack,
		"where":         env.where,
		"zero_grad":     tensorZeroGrad,
		"zeros":         env.filled("tensor.zeros", func(*Env) float32 { return 0 }),
		"zeros_like":    env.like("zeros_like", constant(0)),
	}
}

// operators are the tensor metatable's: elementwise with broadcasting, a
// number on either side.
func (env *Env) operators() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"__add":      env.arith(core.OpAdd),
		"__div":      env.arith(core.OpDiv),
		"__index":    env.index,
		"__len":      length,
		"__mul":      env.arith(core.OpMul),
		"__newindex": env.setIndexed,
		"__pow":      env.arith(core.OpPow),
		"__sub":      env.arith(core.OpSub),
		"__tostring": tensorToString,
		"__unm":      env.unary("neg", (*core.Engine).Neg),
	}
}

const tensorTypeName = "gglua.tensor"

func openTensor(L *lua.LState, env *Env) {
	env.methods = L.SetFuncs(L.NewTable(), functions("", env.tensorMethods()))
	L.SetFuncs(L.NewTypeMetatable(tensorTypeName), functions("", env.operators()))

	lib := L.SetFuncs(L.NewTable(), functions("tensor.", env.tensorMethods()))
	L.SetFuncs(lib, functions("tensor.", env.tensorFunctions()))
	// tensor{...} builds a tensor from nested tables.
	L.SetMetatable(lib, L.SetFuncs(L.NewTable(), map[string]lua.LGFunction{"__call": guard("tensor", env.fromTable)}))
	L.SetGlobal("tensor", lib)
}

// index is x.name (the field grad, else a method; an unknown name is an
// error naming it), x[i] or x[{...}] (tensor_shape.go).
func (env *Env) index(L *lua.LState) int {
	t := checkTensor(L, "index", 1)
	switch key := L.Get(2).(type) {
	case lua.LNumber, *lua.LTable:
		L.Push(env.push(L, env.indexed(L, t, key)))
	case lua.LString:
		if key == "grad" {
			if g := t.Grad(); g != nil {
				L.Push(env.push(L, g))
			} else {
				L.Push(lua.LNil)
			}
			return 1
		}
		m := env.methods.RawGet(key)
		if m == lua.LNil {
			argError(L, "tensor", "no method or field named '%s'", string(key))
		}
		L.Push(m)
	default:
		argError(L, "index", "a tensor is indexed by a number, a range table or a method name, not a %s", luaTypeName(key))
	}
	return 1
}

// Push is push for the embedding API.
func (env *Env) Push(L *lua.LState, t *core.Tensor) lua.LValue { return env.push(L, t) }

// push wraps t as a Lua userdata with the tensor metatable. A parameter
// (IsParam) always gets the same userdata, so that it can
// key tables (backward's result, optimizer state) and compare equal.
func (env *Env) push(L *lua.LState, t *core.Tensor) lua.LValue {
	param := t.IsParam() // frozen ones too
	if param {
		if ud := env.params[weak.Make(t)].Value(); ud != nil {
			return ud
		}
	}
	t.Hold()
	env.chargeHost(L, t)
	ud := L.NewUserData()
	ud.Value = t
	L.SetMetatable(ud, L.GetTypeMetatable(tensorTypeName))
	if param {
		env.adopt(ud)
	}
	return ud
}

// adopt makes ud the userdata that push returns for its tensor from now on
// (a tensor that just became a parameter keeps the identity the script has).
// The entry holds neither: once the script no longer reaches ud, no one can
// tell it from a new one, and the tensor may go when nothing else holds it.
func (env *Env) adopt(ud *lua.LUserData) *lua.LUserData {
	t, ok := ud.Value.(*core.Tensor)
	if !ok {
		return ud
	}
	key := weak.Make(t)
	if prev := env.params[key].Value(); prev != nil {
		return prev
	}
	if len(env.params) >= env.paramsSweep { // dead entries go, in amortized O(1)
		maps.DeleteFunc(env.params, func(_ weak.Pointer[core.Tensor], v weak.Pointer[lua.LUserData]) bool { return v.Value() == nil })
		env.paramsSweep = 2*len(env.params) + 64
	}
	if env.params == nil {
		env.params = map[weak.Pointer[core.Tensor]]weak.Pointer[lua.LUserData]{}
	}
	env.params[key] = weak.Make(ud)
	return ud
}

// pushResult raises err or pushes t.
func (env *Env) pushResult(L *lua.LState, t *core.Tensor, err error) int {
	raise(L, err)
	L.Push(env.push(L, t))
	return 1
}
