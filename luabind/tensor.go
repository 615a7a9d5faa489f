package luabind

import (
	"maps"
	"weak"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The tensor library: its whole Lua surface in two sorted tables. Methods
// are called x:name(...) or tensor.name(x, ...); functions only
// tensor.name(...). Each entry is a named binding (tensor_ops.go,
// create.go, checkpoint.go) or a one-line adapter over a core op.

func (env *Env) tensorMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"abs":           env.unary("abs", (*core.Engine).Abs),
		"add":           env.arith(core.OpAdd),
		"add_":          env.inPlace("add_", env.arithValue(core.OpAdd)),
		"argmax":        env.argmax,
		"backward":      env.backward,
		"bmm":           env.binaryTensors("bmm", (*core.Engine).Bmm),
		"cat":           env.cat,
		"chunk":         env.chunk,
		"clamp":         env.clamp,
		"clone":         env.unary("clone", (*core.Engine).Clone),
		"contiguous":    env.unary("contiguous", (*core.Engine).Contiguous),
		"copy_":         env.inPlace("copy_", func(L *lua.LState, x *core.Tensor) *core.Tensor { return checkTensor(L, "copy_", 2) }),
		"detach":        tensorDetach,
		"device":        tensorDevice,
		"dim":           tensorDim,
		"div":           env.arith(core.OpDiv),
		"div_":          env.inPlace("div_", env.arithValue(core.OpDiv)),
		"dot":           env.binaryTensors("dot", (*core.Engine).Dot),
		"dropout":       env.dropout,
		"dtype":         tensorDtype,
		"exp":           env.unary("exp", (*core.Engine).Exp),
		"expand":        env.expand,
		"expm1":         env.unary("expm1", (*core.Engine).Expm1),
		"fill_":         env.inPlace("fill_", fillValue),
		"flatten":       env.flatten,
		"flip":          env.flip,
		"gelu":          env.gelu,
		"index_select":  env.indexSelect,
		"item":          tensorItem,
		"layer_norm":    env.layerNorm,
		"linear":        env.binaryTensors("linear", (*core.Engine).Linear),
		"log":           env.unary("log", (*core.Engine).Log),
		"log_softmax":   env.alongDim("log_softmax", (*core.Engine).LogSoftmax),
		"matmul":        env.binaryTensors("matmul", (*core.Engine).Matmul),
		"max":           env.extreme("max", (*core.Engine).Max, (*core.Engine).MaxDim),
		"mean":          env.reduction("mean", (*core.Engine).Mean, (*core.Engine).MeanDim),
		"min":           env.extreme("min", (*core.Engine).Min, (*core.Engine).MinDim),
		"mul":           env.arith(core.OpMul),
		"mul_":          env.inPlace("mul_", env.arithValue(core.OpMul)),
		"narrow":        env.narrow,
		"neg":           env.unary("neg", (*core.Engine).Neg),
		"numel":         tensorNumel,
		"outer":         env.binaryTensors("outer", (*core.Engine).Outer),
		"permute":       env.permute,
		"pow":           env.arith(core.OpPow),
		"relu":          env.unary("relu", (*core.Engine).Relu),
		"requires_grad": tensorRequiresGrad,
		"reshape":       env.reshape,
		"scope":         tensorScope,
		"select":        env.selectOp,
		"shape":         tensorShape,
		"sigmoid":       env.unary("sigmoid", (*core.Engine).Sigmoid),
		"silu":          env.unary("silu", (*core.Engine).Silu),
		"size":          tensorSize,
		"softmax":       env.alongDim("softmax", (*core.Engine).Softmax),
		"split":         env.split,
		"sqrt":          env.unary("sqrt", (*core.Engine).Sqrt),
		"squeeze":       env.squeeze,
		"sub":           env.arith(core.OpSub),
		"sub_":          env.inPlace("sub_", env.arithValue(core.OpSub)),
		"sum":           env.reduction("sum", (*core.Engine).Sum, (*core.Engine).SumDim),
		"t":             env.t,
		"tanh":          env.unary("tanh", (*core.Engine).Tanh),
		"tile":          env.tile,
		"totable":       tensorTotable,
		"transpose":     env.transpose,
		"unflatten":     env.unflatten,
		"unsqueeze":     env.unsqueeze,
		"view":          env.view,
		"zero_":         env.inPlace("zero_", zeroValue),
	}
}

// tensorFunctions are tensor.name(...) only: constructors and helpers.
func (env *Env) tensorFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"arange":      env.arange,
		"cat":         env.catList,
		"eye":         env.eye,
		"full":        env.full,
		"load":        env.load,
		"manual_seed": env.manualSeed,
		"ones":        env.filled("tensor.ones", func(*Env) float32 { return 1 }),
		"param":       env.param,
		"rand":        env.filled("tensor.rand", func(env *Env) float32 { return float32(env.Engine.Rand().Float64()) }),
		"randn":       env.filled("tensor.randn", func(env *Env) float32 { return float32(env.Engine.Rand().NormFloat64()) }),
		"save":        env.save,
		"stack":       env.stack,
		"zero_grad":   tensorZeroGrad,
		"zeros":       env.filled("tensor.zeros", func(*Env) float32 { return 0 }),
	}
}

// operators are the tensor metatable's: elementwise with broadcasting, a
// number on either side.
func (env *Env) operators() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"__add":      env.arith(core.OpAdd),
		"__div":      env.arith(core.OpDiv),
		"__index":    env.index,
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
// (a leaf that requires grad) always gets the same userdata, so that it can
// key tables (backward's result, optimizer state) and compare equal.
func (env *Env) push(L *lua.LState, t *core.Tensor) lua.LValue {
	param := t.IsLeaf() && t.RequiresGrad()
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
