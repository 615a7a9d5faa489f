package luabind

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// helpState is a state whose Stdout is out.
func helpState(t *testing.T) (*lua.LState, *bytes.Buffer) {
	t.Helper()
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	L := lua.NewState()
	out := &bytes.Buffer{}
	Open(L, &Env{Engine: e, Threads: 1, Stdout: out})
	t.Cleanup(func() {
		Detach(L)
		L.Close()
	})
	return L, out
}

// helpOutput runs code (which calls help) and returns what it printed.
func helpOutput(t *testing.T, L *lua.LState, out *bytes.Buffer, code string) string {
	t.Helper()
	out.Reset()
	require.NoError(t, L.DoString(code), code)
	return out.String()
}

func TestHelpPrints(t *testing.T) {
	L, out := helpState(t)
	require.NoError(t, L.DoString(`
		x = tensor.zeros(2, 3)
		MLP = nn.Module:extend("MLP")
		function MLP:init() self.fc = nn.Linear(2, 1) end
		function MLP:forward(x) return self.fc(x) end
	`))
	for _, c := range []struct {
		code       string
		want, not_ []string
	}{
		{`help("matmul")`, []string{"x:matmul(other)\n  Matrix product", "Also tensor.matmul(x, ...)"}, nil},
		{`help("tensor.matmul")`, []string{"x:matmul(other)"}, nil},
		{`help(tensor.matmul)`, []string{"x:matmul(other)"}, nil},
		{`help(x.matmul)`, []string{"x:matmul(other)"}, nil},
		{`help("tensor.zeros")`, []string{"tensor.zeros(size..., {dtype=, requires_grad=})\n  A tensor filled with 0"}, []string{"Also"}},
		{`help(tensor.zeros)`, []string{"tensor.zeros(size..., {dtype=, requires_grad=})\n"}, nil},
		{`help("cat")`, []string{"tensor.cat(tensors [, dim=1])", "x:cat(other [, dim=1])"}, nil},
		{`help("step")`, []string{"optimizer:step()", "scheduler:step()", "optim.lr_scheduler.step(optimizer"}, nil},
		{`help(x)`, []string{"a tensor of shape [2, 3], dtype f32, on host\n", `help("tensor")`}, []string{"parameter"}},
		{`help(tensor.param(tensor.ones(2)))`, []string{"a tensor of shape [2]", "a parameter"}, nil},
		{`help(nn.Linear)`, []string{"nn.Linear(in_features, out_features [, bias=true | {bias=}])", `help("nn.Module")`}, nil},
		{`help(nn.Linear(2, 3))`, []string{"a module: Linear(2 -> 3)\n", "nn.Linear(in_features"}, nil},
		{`help(MLP())`, []string{"a module: MLP", "module class MLP (made with nn.Module:extend)"}, nil},
		{`help(nn.Module)`, []string{"nn.Module\n", "Methods:\n", "nn.Module:parameters", "nn.Module:state_dict"}, nil},
		{`help("nn")`, []string{"nn: Neural networks", "  nn.Linear ", "  nn.conv2d ", "Libraries:\n  nn.init "}, []string{"nn.Module:parameters", "nn.init.zeros_"}},
		{`help(nn.init)`, []string{"nn.init: ", "nn.init.xavier_uniform_"}, nil},
		{`help("tensor")`, []string{"tensor: The tensor library", "tensor.zeros", "Methods (x:name(...)", "  x:matmul "}, nil},
		{`help(optim.adam({tensor.param(tensor.ones(1))}))`, []string{"optimizer objects: ", "optimizer:step"}, nil},
		{`help(data.loader(tensor.ones(4, 1), nil, {batch = 2}))`, []string{"data.loader(4 rows, batch 2, 2 batches per epoch)", "loader:reset"}, nil},
		{`help(x:shape())`, []string{"a shape: [2, 3]"}, nil},
		{`help()`, []string{"Libraries:\n", "  tensor ", "  nn.init ", "Global functions:\n", "with_grad_tape(fn)", "help([name_or_value])"}, nil},
		{`help("no_such_name")`, []string{`no help for "no_such_name"`}, nil},
		{`help("zero")`, []string{`no help for "zero". Close: `, "x:zero_", "tensor.zeros"}, nil},
		{`help(print)`, []string{"a function gglua does not document"}, nil},
		{`help(3)`, []string{"help: a number"}, nil},
		// A long string answers at once, and is not echoed back.
		{`help(("x"):rep(1e7))`, []string{"no help for a string of 10000000 bytes"}, []string{"xxxxxxxxxx"}},
	} {
		got := helpOutput(t, L, out, c.code)
		for _, w := range c.want {
			assert.Contains(t, got, w, c.code)
		}
		for _, n := range c.not_ {
			assert.NotContains(t, got, n, c.code)
		}
	}
	// A function value and its name give the same text.
	assert.Equal(t, helpOutput(t, L, out, `help("optim.adamw")`), helpOutput(t, L, out, `help(optim.adamw)`))
	assert.Equal(t, helpOutput(t, L, out, `help("nn")`), helpOutput(t, L, out, `help(nn)`))
}

// help finds every documented name, and by value every function the
// globals reach.
func TestHelpKnowsEveryDocumentedName(t *testing.T) {
	L, out := helpState(t)
	d, err := loadDocs()
	require.NoError(t, err)
	for _, s := range d.sections {
		got := helpOutput(t, L, out, `help("`+s.Key+`")`)
		assert.Contains(t, got, s.Key+": ", s.Key)
		for _, e := range s.Entries {
			got := helpOutput(t, L, out, `help("`+e.Name+`")`)
			assert.Contains(t, got, e.Signature+"\n  "+e.Summary+"\n", e.Name)
		}
	}
	env := envOf(L)
	for _, it := range env.surface(L, d.roots()) {
		if it.library {
			continue
		}
		L.SetGlobal("v", it.value)
		e := d.byName[it.name]
		require.NotNil(t, e, it.name)
		assert.Contains(t, helpOutput(t, L, out, `help(v)`), e.Signature+"\n", it.name)
	}
}

// x:shape() prints as a shape and is still a plain list of sizes.
func TestShapePrints(t *testing.T) {
	L, out := helpState(t)
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		out.WriteString(L.ToStringMeta(L.Get(1)).String() + "\n")
		return 0
	}))
	for _, c := range []struct{ code, want string }{
		{`print(tensor.zeros(2, 3):shape())`, "[2, 3]\n"},
		{`print(tensor.ones(4):shape())`, "[4]\n"},
		{`print(tensor.zeros(2, 1, 5):shape())`, "[2, 1, 5]\n"},
		{`print(tostring(tensor.zeros(2, 3):shape()) == "[2, 3]")`, "true\n"},
		{`local s = tensor.zeros(2, 3):shape(); print(#s .. " " .. s[1] .. " " .. s[2] .. " " .. table.concat(s, "x"))`, "2 2 3 2x3\n"},
		{`local a, b = unpack(tensor.zeros(4, 5):shape()); print(a + b)`, "9\n"},
		{`local s = tensor.zeros(2, 3):shape(); s[3] = 7; print(s)`, "[2, 3, 7]\n"},
	} {
		out.Reset()
		require.NoError(t, L.DoString(c.code), c.code)
		assert.Equal(t, c.want, out.String(), c.code)
	}
}
