package luabind

import (
	_ "embed"
	"strings"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/luacompile"
	lua "github.com/yuin/gopher-lua"
)

var (
	//go:embed nn.lua
	nnSource string
	//go:embed nn_init.lua
	nnInitSource string
	//go:embed nn_rnn.lua
	nnRNNSource string
	//go:embed nn_attention.lua
	nnAttentionSource string
	//go:embed nn_activations.lua
	nnActivationsSource string
	//go:embed nn_losses.lua
	nnLossesSource string
	//go:embed nn_functional.lua
	nnFunctionalSource string
)

// nnSources are the files of nn, in the order they load: the module
// system and the basic modules, then nn.init, then the recurrent layers
// (which initialise through nn.init), then attention, then the
// activations beyond ReLU, GELU and SiLU, then the loss modules, then pad
// and dropout2d.
var nnSources = []struct{ name, source string }{
	{"nn.lua", nnSource},
	{"nn_init.lua", nnInitSource},
	{"nn_rnn.lua", nnRNNSource},
	{"nn_attention.lua", nnAttentionSource},
	{"nn_activations.lua", nnActivationsSource},
	{"nn_losses.lua", nnLossesSource},
	{"nn_functional.lua", nnFunctionalSource},
}

// openNN makes the global nn: the functional forms (losses.go,
// nn_conv.go, nn_attention.go), then the modules, written in Lua
// (nnSources).
func openNN(L *lua.LState, env *Env) {
	nn := L.NewTable()
	for _, fns := range []map[string]lua.LGFunction{env.lossFunctions(), env.convFunctions(), env.attentionFunctions()} {
		L.SetFuncs(nn, functions("nn.", fns))
	}
	L.SetGlobal("nn", nn)
	// private: what the modules call that scripts do not see (each file
	// gets it as its chunk's argument).
	private := L.NewTable()
	L.SetField(private, "is_param", L.NewFunction(func(L *lua.LState) int {
		x := toTensor(L.Get(1))
		L.Push(lua.LBool(x != nil && x.IsParam()))
		return 1
	}))
	L.SetField(private, "linear_bias", L.NewFunction(env.linearWith((*core.Engine).LinearBias)))
	L.SetField(private, "linear_bias_relu", L.NewFunction(env.linearThen((*core.Engine).BiasRelu)))
	L.SetField(private, "linear_bias_relu_for_product", L.NewFunction(env.linearThen((*core.Engine).BiasReluForProduct)))
	L.SetField(private, "mlp", L.NewFunction(func(L *lua.LState) int {
		ts := make([]*core.Tensor, 5)
		for i := range ts {
			ts[i] = checkTensor(L, "linear", i+1)
		}
		t, err := env.Engine.MLP(ts[0], ts[1], ts[2], ts[3], ts[4])
		return env.pushResult(L, t, err)
	}))
	for _, f := range nnSources {
		fn, err := luacompile.Load(L, strings.NewReader(f.source), f.name)
		if err != nil {
			panic("luabind: " + f.name + " does not compile: " + err.Error()) // a build defect, caught by every test
		}
		L.Push(fn)
		L.Push(private)
		L.Call(1, 0)
	}
}
