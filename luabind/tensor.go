package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

const tensorTypeName = "gglua.tensor"

// Push is push for the embedding API.
func (env *Env) Push(L *lua.LState, t *core.Tensor) lua.LValue { return env.push(L, t) }

// push wraps t as a Lua userdata with the tensor metatable. A parameter
// (a leaf that requires grad) always gets the same userdata, so that it can
// key tables (backward's result, optimizer state) and compare equal.
func (env *Env) push(L *lua.LState, t *core.Tensor) lua.LValue {
	param := t.IsLeaf() && t.RequiresGrad()
	if ud, ok := env.params[t]; ok && param {
		return ud
	}
	t.Keep()
	env.chargeHost(L, t)
	ud := L.NewUserData()
	ud.Value = t
	L.SetMetatable(ud, L.GetTypeMetatable(tensorTypeName))
	if param {
		if env.params == nil {
			env.params = map[*core.Tensor]*lua.LUserData{}
		}
		env.params[t] = ud
	}
	return ud
}

// checkTensor returns argument n as a tensor or raises an error naming fn.
func checkTensor(L *lua.LState, fn string, n int) *core.Tensor {
	v := L.Get(n)
	if ud, ok := v.(*lua.LUserData); ok {
		if t, ok := ud.Value.(*core.Tensor); ok {
			return t
		}
	}
	argError(L, fn, "argument %d: expected a tensor, got %s", n, luaTypeName(v))
	return nil
}

func tensorMethods(env *Env) map[string]lua.LGFunction {
	m := map[string]lua.LGFunction{
		"shape": func(L *lua.LState) int {
			L.Push(intList(L, checkTensor(L, "shape", 1).Shape()))
			return 1
		},
		"size": func(L *lua.LState) int {
			t := checkTensor(L, "size", 1)
			if L.GetTop() < 2 {
				L.Push(intList(L, t.Shape()))
				return 1
			}
			d := L.CheckInt(2)
			if d < 1 || d > t.Dim() {
				argError(L, "size", "dim %d out of range for a %d-d tensor of shape %s (dims are 1-based)", d, t.Dim(), core.ShapeString(t.Shape()))
			}
			L.Push(lua.LNumber(t.Shape()[d-1]))
			return 1
		},
		"dim":    func(L *lua.LState) int { L.Push(lua.LNumber(checkTensor(L, "dim", 1).Dim())); return 1 },
		"numel":  func(L *lua.LState) int { L.Push(lua.LNumber(checkTensor(L, "numel", 1).Numel())); return 1 },
		"dtype":  func(L *lua.LState) int { L.Push(lua.LString(checkTensor(L, "dtype", 1).Dtype().String())); return 1 },
		"device": func(L *lua.LState) int { L.Push(lua.LString(checkTensor(L, "device", 1).Device())); return 1 },
		"scope":  func(L *lua.LState) int { L.Push(lua.LString(checkTensor(L, "scope", 1).Scope())); return 1 },
		"item": func(L *lua.LState) int {
			v, err := checkTensor(L, "item", 1).Item()
			if err != nil {
				L.RaiseError("%s", err.Error())
			}
			L.Push(lua.LNumber(v))
			return 1
		},
		"totable": func(L *lua.LState) int {
			t := checkTensor(L, "totable", 1)
			v, err := t.Float32s()
			if err != nil {
				L.RaiseError("totable: %s", err.Error())
			}
			L.Push(nestedTable(L, v, t.Shape()))
			return 1
		},
	}
	for k, f := range opsMethods(env) {
		m[k] = f
	}
	return m
}

func openTensor(L *lua.LState, env *Env) {
	mt := L.NewTypeMetatable(tensorTypeName)
	methods := L.SetFuncs(L.NewTable(), tensorMethods(env))
	L.SetField(mt, "__index", L.NewFunction(func(L *lua.LState) int {
		t := checkTensor(L, "index", 1)
		switch key := L.Get(2); key.String() {
		case "grad":
			if g := t.Grad(); g != nil {
				L.Push(env.push(L, g))
			} else {
				L.Push(lua.LNil)
			}
		default:
			L.Push(methods.RawGet(key))
		}
		return 1
	}))
	for meta, op := range map[string]string{"__add": "add", "__sub": "sub", "__mul": "mul", "__div": "div", "__pow": "pow"} {
		op := op
		L.SetField(mt, meta, L.NewFunction(func(L *lua.LState) int { L.Push(env.push(L, binary(L, env, op))); return 1 }))
	}
	L.SetField(mt, "__unm", L.NewFunction(func(L *lua.LState) int {
		t, err := env.Engine.Neg(checkTensor(L, "neg", 1))
		return env.pushResult(L, t, err)
	}))
	L.SetField(mt, "__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(formatTensor(checkTensor(L, "tostring", 1))))
		return 1
	}))

	lib := L.SetFuncs(L.NewTable(), tensorMethods(env)) // tensor.fn(x, ...) as well as x:fn(...)
	openCreate(L, env, lib)
	call := L.NewTable()
	L.SetField(call, "__call", L.NewFunction(func(L *lua.LState) int {
		// tensor{...}: argument 1 is the tensor library itself.
		o, _ := trailingOpts(L, "tensor")
		t := tensorFromLua(L, "tensor", L.Get(2))
		return env.finish(L, "tensor", t, o)
	}))
	L.SetMetatable(lib, call)
	L.SetGlobal("tensor", lib)
}

func intList(L *lua.LState, v []int) *lua.LTable {
	t := L.CreateTable(len(v), 0)
	for _, x := range v {
		t.Append(lua.LNumber(x))
	}
	return t
}

// tensorFromLua builds a host tensor from a number or a (nested) table of
// numbers. Ragged nesting and non-numbers are errors.
func tensorFromLua(L *lua.LState, fn string, v lua.LValue) *core.Tensor {
	if n, ok := v.(lua.LNumber); ok {
		t, _ := core.FromFloat32([]float32{float32(n)}, 1)
		return t
	}
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(L, fn, "expected a number or a nested table of numbers, got %s", luaTypeName(v))
	}
	var shape []int
	for cur := lua.LValue(tbl); ; {
		ct, ok := cur.(*lua.LTable)
		if !ok {
			break
		}
		if ct.Len() == 0 {
			argError(L, fn, "empty table at depth %d: every dimension needs at least one element", len(shape)+1)
		}
		shape = append(shape, ct.Len())
		if len(shape) > 4 {
			argError(L, fn, "more than 4 levels of nesting; tensors have at most 4 dims")
		}
		cur = ct.RawGetInt(1)
	}
	var data []float32
	var walk func(t *lua.LTable, depth int, path string)
	walk = func(t *lua.LTable, depth int, path string) {
		if t.Len() != shape[depth] {
			argError(L, fn, "ragged table: %s has %d elements, expected %d", path, t.Len(), shape[depth])
		}
		for i := 1; i <= t.Len(); i++ {
			el := t.RawGetInt(i)
			where := fmt.Sprintf("%s[%d]", path, i)
			if depth == len(shape)-1 {
				n, ok := el.(lua.LNumber)
				if !ok {
					argError(L, fn, "%s is a %s, expected a number", where, luaTypeName(el))
				}
				data = append(data, float32(n))
				continue
			}
			sub, ok := el.(*lua.LTable)
			if !ok {
				argError(L, fn, "ragged table: %s is a %s, expected a table", where, luaTypeName(el))
			}
			walk(sub, depth+1, where)
		}
	}
	walk(tbl, 0, "t")
	t, err := core.FromFloat32(data, shape...)
	if err != nil {
		L.RaiseError("%s: %s", fn, err.Error())
	}
	return t
}

// nestedTable turns flat values of shape into nested Lua tables.
func nestedTable(L *lua.LState, v []float32, shape []int) *lua.LTable {
	tbl := L.CreateTable(shape[0], 0)
	if len(shape) == 1 {
		for _, x := range v {
			tbl.Append(lua.LNumber(x))
		}
		return tbl
	}
	step := len(v) / shape[0]
	for i := 0; i < shape[0]; i++ {
		tbl.Append(nestedTable(L, v[i*step:(i+1)*step], shape[1:]))
	}
	return tbl
}

// formatTensor prints values like PyTorch (summarised above 1000 elements)
// followed by a footer such as [tensor f32 2x3 cpu pass].
func formatTensor(t *core.Tensor) string {
	footer := fmt.Sprintf("[tensor %s %s %s %s]", t.Dtype(), core.ShapeString(t.Shape()), t.Device(), t.Scope())
	v, err := t.Float32s()
	if err != nil {
		return fmt.Sprintf("<%s>\n%s", err.Error(), footer)
	}
	var b strings.Builder
	shape := t.Shape()
	summarise := len(v) > 1000
	var rec func(v []float32, shape []int, indent int)
	rec = func(v []float32, shape []int, indent int) {
		b.WriteString("[")
		n := shape[0]
		step := len(v) / n
		for i := 0; i < n; i++ {
			if summarise && n > 6 && i == 3 {
				b.WriteString("...")
				i = n - 3
				if len(shape) > 1 {
					b.WriteString(",\n" + strings.Repeat(" ", indent+1))
				} else {
					b.WriteString(", ")
				}
			}
			if len(shape) == 1 {
				fmt.Fprintf(&b, "%.4g", v[i])
			} else {
				rec(v[i*step:(i+1)*step], shape[1:], indent+1)
			}
			if i < n-1 {
				if len(shape) > 1 {
					b.WriteString(",\n" + strings.Repeat(" ", indent+1))
				} else {
					b.WriteString(", ")
				}
			}
		}
		b.WriteString("]")
	}
	rec(v, shape, 0)
	return b.String() + "\n" + footer
}
