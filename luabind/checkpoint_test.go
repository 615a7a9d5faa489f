package luabind

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/fs/ggml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// fileState is a state that may read and write files, its stderr in errOut.
func fileState(t *testing.T) (*lua.LState, *bytes.Buffer) {
	t.Helper()
	e, err := core.NewEngine(core.EngineOptions{Threads: 1})
	require.NoError(t, err)
	L := lua.NewState()
	errOut := &bytes.Buffer{}
	Open(L, &Env{Engine: e, Threads: 1, Stdout: &bytes.Buffer{}, Stderr: errOut})
	L.SetGlobal("dir", lua.LString(t.TempDir()))
	t.Cleanup(func() {
		Detach(L)
		L.Close()
	})
	return L, errOut
}

// tensor.save/load on a .safetensors path: nesting and dtypes come back,
// the metadata is the second result, and a model's state_dict loads into a
// fresh model.
func TestSafetensorsFromLua(t *testing.T) {
	L, _ := fileState(t)
	require.NoError(t, L.DoString(`
		local p = dir .. "/m.safetensors"
		local net = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
		tensor.save(p, net:state_dict())
		local fresh = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
		fresh:load_state_dict(tensor.load(p))
		local x = tensor{{1, 2, 3}}
		assert(net(x):totable()[1][2] == fresh(x):totable()[1][2], "exact round trip")

		local q = dir .. "/nested.SafeTensors"
		tensor.save(q, {model = {layers = {[1] = {w = tensor({1.5, -2}, {dtype = "bf16"})}}}, h = tensor({0.5}, {dtype = "f16"}), ids = tensor({3, 2^31 - 1}, {dtype = "i32"})},
			{metadata = {note = "hi"}})
		local back, meta = tensor.load(q)
		assert(back.model.layers[1].w:dtype() == "bf16", "nested, number key, bf16")
		assert(back.model.layers[1].w:totable()[2] == -2)
		assert(back.h:dtype() == "f16" and back.h:item() == 0.5)
		assert(back.ids:dtype() == "i32" and back.ids:totable()[2] == 2^31 - 1, "i32 exactly")
		assert(meta.note == "hi" and meta.format == "pt", "metadata")
		local n = 0
		for k in pairs(meta) do n = n + 1 end
		assert(n == 2, "gglua's path keys stay out of the metadata")

		-- A file from an independent writer loads flat, as load_file gives it.
		local ref, refmeta = tensor.load("../core/testdata/safetensors_ref.safetensors")
		assert(ref["model.embed.weight"]:dtype() == "f32" and ref["model.layers.0.norm.weight"]:dtype() == "f16")
		assert(ref.position_ids:dtype() == "i32" and ref.position_ids:totable()[1][5] == 2^31 - 1, "I64 as exact i32")
		assert(ref.counts:totable()[3] == 16777217 and refmeta.format == "pt")
	`))
}

func TestSafetensorsErrorsFromLua(t *testing.T) {
	L, _ := fileState(t)
	for code, want := range map[string]string{
		`tensor.save(dir .. "/a.safetensors", {step = 3})`:                                          `["step"] is not a tensor`,
		`tensor.save(dir .. "/a.safetensors", {w = tensor{1}}, {metadata = {n = 1}})`:               "map strings to strings",
		`tensor.save(dir .. "/a.gguf", {w = tensor{1}}, {metadata = {n = "1"}})`:                    "for .safetensors files",
		`tensor.save(dir .. "/a.safetensors", {w = tensor{1}}, {meta = {}})`:                        "meta",
		`tensor.load("../core/testdata/safetensors_ref.json" .. "/missing.safetensors")`:            "tensor.load",
		`tensor.save(dir .. "/a.safetensors", {["a.b"] = tensor{1}, a = {b = tensor{2}}})`:          "both named",
		`tensor.load("../core/testdata/torch_math.json"); error("unreachable")`:                     "tensor.load",
		`local f = dir .. "/x.safetensors"; tensor.save(f, {w = tensor{1}}); tensor.load(f .. "x")`: "tensor.load",
	} {
		err := L.DoString(code)
		require.Error(t, err, code)
		assert.Contains(t, err.Error(), want, code)
	}
}

// Long saves and loads show progress on stderr once progressDelay has
// passed: a plain line a phase (stderr is no terminal here) and the time
// taken. Quick ones print nothing.
func TestCheckpointProgress(t *testing.T) {
	L, errOut := fileState(t)
	code := `
		local big = tensor.zeros(256, 1024)
		tensor.save(dir .. "/big.safetensors", {w = big})
		tensor.load(dir .. "/big.safetensors")
		tensor.save(dir .. "/big.gguf", {w = big})
		tensor.load(dir .. "/big.gguf")`
	require.NoError(t, L.DoString(code))
	assert.Empty(t, errOut.String(), "quicker than progressDelay: silent")

	old := progressDelay
	progressDelay = 0
	t.Cleanup(func() { progressDelay = old })
	require.NoError(t, L.DoString(code))
	out := errOut.String()
	dir := L.GetGlobal("dir").String()
	for _, want := range []string{
		"tensor.save " + filepath.Join(dir, "big.safetensors") + ": writing 100% (1.0 MB of 1.0 MB",
		"tensor.load " + filepath.Join(dir, "big.safetensors") + ": reading 100%",
		"tensor.save " + filepath.Join(dir, "big.gguf") + ": preparing 100%",
		"tensor.save " + filepath.Join(dir, "big.gguf") + ": writing 100%",
		"tensor.load " + filepath.Join(dir, "big.gguf") + ": reading 100%",
	} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 4, strings.Count(out, ": done in "), out)
	assert.NotContains(t, out, "\r", "plain lines off a terminal")
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.Equal(t, 1, strings.Count(line, "tensor."), "one report a line: %q", line)
	}
}

// On a terminal the line is redrawn in place, and an error ends it first.
func TestIOProgressOnATerminal(t *testing.T) {
	out := &bytes.Buffer{}
	p := &ioProgress{out: out, tty: true, what: "tensor.load x", start: time.Now().Add(-2 * time.Second), tenth: -1}
	p.update("reading", 5, 10)
	p.update("reading", 6, 10) // within 100 ms: not redrawn
	p.update("reading", 10, 10)
	p.finish(assert.AnError)
	assert.Equal(t, 2, strings.Count(out.String(), "\r\x1b[Ktensor.load x: reading"), out.String())
	assert.True(t, strings.HasSuffix(out.String(), "\r\x1b[Ktensor.load x: failed\n"), out.String())
}

// A GGUF checkpoint from tensor.save opens in ollama's GGUF reader
// (github.com/ollama/ollama/fs/ggml, pure Go, no ggml inside): the same
// dotted names, ggml's innermost-first shapes, dtypes and every value's bits.
func TestGGUFOpensInOllamasReader(t *testing.T) {
	L, _ := fileState(t)
	require.NoError(t, L.DoString(`
		tensor.save(dir .. "/n.gguf", {
			model = {layers = {[1] = {w = tensor{{1, -2.5, 0.1}, {3, 1e-30, -0}}}}, norm = {b = tensor({1.5, -2, 0.25}, {dtype = "f16"})}},
			head = tensor{{{{0.5, 1, 2}}}, {{{-1, -0.5, 1e20}}}},
		})`))
	f, err := os.Open(filepath.Join(L.GetGlobal("dir").String(), "n.gguf"))
	require.NoError(t, err)
	defer f.Close()
	g, err := ggml.Decode(f, -1)
	require.NoError(t, err)
	assert.Equal(t, "gglua", g.KV().String("general.architecture"))
	f32 := func(v ...float32) []uint32 {
		out := make([]uint32, len(v))
		for i, x := range v {
			out[i] = math.Float32bits(x)
		}
		return out
	}
	want := map[string]struct {
		kind  uint32 // ggml's type: 0 f32, 1 f16
		shape []uint64
		bits  []uint32 // f32 bits, or f16 bits worked out by hand
	}{
		"model.layers.1.w": {0, []uint64{3, 2}, f32(1, -2.5, 0.1, 3, 1e-30, float32(math.Copysign(0, -1)))},
		"model.norm.b":     {1, []uint64{3}, []uint32{0x3e00, 0xc000, 0x3400}},
		"head":             {0, []uint64{3, 1, 1, 2}, f32(0.5, 1, 2, -1, -0.5, 1e20)},
	}
	items := g.Tensors().Items()
	require.Len(t, items, len(want))
	for _, tt := range items {
		w, ok := want[tt.Name]
		require.True(t, ok, tt.Name)
		assert.Equal(t, w.kind, tt.Kind, tt.Name)
		assert.Equal(t, w.shape, tt.Shape, tt.Name)
		raw := make([]byte, tt.Size())
		_, err := f.ReadAt(raw, int64(g.Tensors().Offset+tt.Offset))
		require.NoError(t, err)
		var bits []uint32
		for i := 0; i < len(raw); {
			if tt.Kind == 1 {
				bits = append(bits, uint32(binary.LittleEndian.Uint16(raw[i:])))
				i += 2
			} else {
				bits = append(bits, binary.LittleEndian.Uint32(raw[i:]))
				i += 4
			}
		}
		assert.Equal(t, w.bits, bits, tt.Name)
	}
}

// data.csv of a long file shows progress as checkpoints do.
func TestCSVProgress(t *testing.T) {
	L, errOut := fileState(t)
	file := filepath.Join(L.GetGlobal("dir").String(), "big.csv")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("1,2.5,-3\n", 20000)), 0o644))
	L.SetGlobal("file", lua.LString(file))
	require.NoError(t, L.DoString(`assert(data.csv(file):size(1) == 20000)`))
	assert.Empty(t, errOut.String())

	old := progressDelay
	progressDelay = 0
	t.Cleanup(func() { progressDelay = old })
	require.NoError(t, L.DoString(`assert(data.csv(file):size(1) == 20000)`))
	out := errOut.String()
	assert.Contains(t, out, "data.csv "+file+": reading 100% (180.0 kB of 180.0 kB")
	lines := strings.Count(out, "data.csv "+file+": reading")
	assert.True(t, lines >= 10 && lines <= 12, "a line a tenth, not a line a read: %d", lines)
	assert.Contains(t, out, "data.csv "+file+": done in ")
}
