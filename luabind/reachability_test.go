package luabind

import (
	goruntime "runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

func openState(t *testing.T) (*lua.LState, *Env) {
	t.Helper()
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	L := lua.NewState()
	env := &Env{Engine: e, Threads: 1}
	Open(L, env)
	t.Cleanup(func() {
		Detach(L)
		L.Close()
	})
	return L, env
}

// What the bindings remember about Lua objects (a parameter's userdata, the
// optimizer behind a table) keeps neither alive: optimizers and modules made
// again and again give their memory back (issue [11] #12).
func TestDroppedOptimizersAndParametersAreCollected(t *testing.T) {
	L, env := openState(t)
	require.NoError(t, L.DoString(`
		p = tensor.param(tensor.ones(4, 4))
		opt = optim.adam({p})
		same = opt:parameters()[1] == p
		t2 = tensor.param(tensor.ones(2))
		tmp = {t2}
	`))
	assert.Equal(t, lua.LTrue, L.GetGlobal("same"), "a parameter keeps its userdata")
	opt := env.checkOptimizer(L, "test", pushed(L, L.GetGlobal("opt")))
	adam := weak.Make(opt.o.(*core.Adam))
	param := weak.Make(toTensor(L.GetGlobal("t2")))
	opt = optimizer{}
	require.NotNil(t, adam.Value())
	require.NotNil(t, param.Value())

	// Still referenced from Lua: nothing goes, and identity holds.
	collectGarbage()
	require.NoError(t, L.DoString(`assert(opt:parameters()[1] == p, "identity after a collection")`))
	require.NotNil(t, adam.Value())

	require.NoError(t, L.DoString(`opt = nil; t2 = nil; tmp = nil`))
	L.SetTop(0)
	collectGarbage()
	assert.Nil(t, adam.Value(), "the optimizer went with its table")
	assert.Nil(t, param.Value(), "the parameter went with its userdata")
	require.NoError(t, L.DoString(`
		local o = optim.sgd({p}, {lr = 0.1})
		assert(o:parameters()[1] == p)
		local s = optim.lr_scheduler.step(o, {step_size = 1})
	`))
}

// The parameter table does not grow with parameters long gone.
func TestTheParameterTableIsSwept(t *testing.T) {
	L, env := openState(t)
	for i := 0; i < 20; i++ {
		require.NoError(t, L.DoString(`for i = 1, 100 do local p = tensor.param(tensor.ones(2)) end`))
		L.SetTop(0)
		collectGarbage()
	}
	assert.Less(t, len(env.params), 300, "2000 parameters made and dropped")
}

func collectGarbage() {
	for i := 0; i < 2; i++ {
		goruntime.GC()
	}
}

// pushed pushes v and returns its stack index.
func pushed(L *lua.LState, v lua.LValue) int {
	L.Push(v)
	return L.GetTop()
}
