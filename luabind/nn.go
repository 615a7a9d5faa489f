package luabind

import (
	_ "embed"
	"strings"

	"github.com/gglua/gglua/luacompile"
	lua "github.com/yuin/gopher-lua"
)

//go:embed nn.lua
var nnSource string

// openNN makes the global nn: the losses (losses.go), then the modules,
// written in Lua (nn.lua).
func openNN(L *lua.LState, env *Env) {
	L.SetGlobal("nn", L.SetFuncs(L.NewTable(), functions("nn.", env.lossFunctions())))
	fn, err := luacompile.Load(L, strings.NewReader(nnSource), "nn.lua")
	if err != nil {
		panic("luabind: nn.lua does not compile: " + err.Error()) // a build defect, caught by every test
	}
	L.Push(fn)
	L.Call(0, 0)
}
