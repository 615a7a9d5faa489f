package luabind

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
)

// A Go panic escaping a binding becomes a Lua error naming the function and
// the script line, without Go's runtime text; the panic stays on the cause.
func TestGuardTurnsPanicsIntoLuaErrors(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	env := &Env{}
	env.Attach(L)
	defer Detach(L)
	var nilMap map[string]int
	L.SetGlobal("broken", newFunction(L, "tensor.broken", func(L *lua.LState) int {
		nilMap["x"] = 1 // assignment to a nil map: a Go panic
		return 0
	}))
	L.SetGlobal("fails", newFunction(L, "tensor.fails", func(L *lua.LState) int {
		argError(L, "tensor.fails", "a plain Lua error")
		return 0
	}))
	err := L.DoString("local ok, e = pcall(broken)\nassert(not ok)\nmsg = e\nbroken()")
	require.Error(t, err)
	msg := L.GetGlobal("msg").String()
	assert.Contains(t, msg, "tensor.broken: internal error in gglua")
	assert.Contains(t, msg, "<string>:1:", "the script line")
	assert.NotContains(t, msg, "runtime error")
	assert.NotContains(t, err.Error(), "assignment to entry in nil map")
	var ie *InternalError
	require.True(t, errors.As(env.Cause(err.Error()), &ie))
	assert.Equal(t, "tensor.broken", ie.Function)

	err = L.DoString("fails()")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tensor.fails: a plain Lua error", "Lua errors pass through untouched")
}
