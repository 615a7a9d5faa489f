package luabind

import (
	_ "embed"

	lua "github.com/yuin/gopher-lua"
)

//go:embed nn.lua
var nnSource string

// openNN loads the nn modules (written in Lua) into the global nn.
func openNN(L *lua.LState) {
	fn, err := L.Load(stringReader(nnSource), "nn.lua")
	if err != nil {
		panic("luabind: nn.lua does not compile: " + err.Error()) // a build defect, caught by every test
	}
	L.Push(fn)
	L.Call(0, 0)
}
