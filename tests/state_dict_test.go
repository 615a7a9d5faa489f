package tests

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// A state_dict crosses between PyTorch and gglua as it is: PyTorch's
// (core/testdata/torch_state_dict.safetensors, with BatchNorm's int64
// scalar num_batches_tracked) loads strictly into the same model written
// in gglua, which then computes PyTorch's outputs and statistics; and the
// state_dict gglua saves is the file PyTorch loaded strictly
// (core/testdata/gglua_state_dict.json: what it computed from it).
// scripts/reference/state_dict.py writes and reads them (torch 1.13);
// GGLUA_WRITE_TESTDATA=1 rewrites gglua's file (then run its read by hand).

type torchReadBack struct {
	EvalOutput        []float64 `json:"eval_output"`
	NumBatchesTracked int       `json:"num_batches_tracked"`
	Keys              []string  `json:"keys"`
}

// luaClose is close(got, want, what): a tensor's values within 1e-5 of
// PyTorch's (as a format string: its % doubled).
const luaClose = `local function close(got, want, what)
  local g = got:reshape(got:numel()):totable()
  assert(#g == #want, what .. ": " .. #g .. " values, want " .. #want)
  for i = 1, #want do
    assert(math.abs(g[i] - want[i]) <= 1e-5 * (1 + math.abs(want[i])), string.format("%%s[%%d]: %%.7g, PyTorch %%.7g", what, i, g[i], want[i]))
  end
end`

// runSaving runs code, which saves a state_dict to saved, and returns the
// data of that file and of the committed one PyTorch read (testdata name;
// GGLUA_WRITE_TESTDATA=1 rewrites it), once their headers (names, dtypes,
// shapes) are found equal.
func runSaving(t *testing.T, code, saved, name string) (got, want []byte) {
	t.Helper()
	rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoString(context.Background(), code)
	require.NoError(t, err)
	file, err := os.ReadFile(saved)
	require.NoError(t, err)
	committed := filepath.Join("..", "core", "testdata", name)
	if os.Getenv("GGLUA_WRITE_TESTDATA") == "1" {
		require.NoError(t, os.WriteFile(committed, file, 0o644))
	}
	ref, err := os.ReadFile(committed)
	require.NoError(t, err)
	wantHeader, wantData := splitSafetensors(t, ref)
	gotHeader, gotData := splitSafetensors(t, file)
	require.Equal(t, wantHeader, gotHeader, "gglua no longer writes the header PyTorch loaded")
	return gotData, wantData
}

func luaList(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.9g", x)
	}
	return "{" + strings.Join(s, ", ") + "}"
}

func TestStateDictCrossesWithPyTorch(t *testing.T) {
	var ref struct {
		Input             []float64 `json:"input"`
		EvalOutput        []float64 `json:"eval_output"`
		TrainOutput       []float64 `json:"train_output"`
		RunningMean       []float64 `json:"running_mean"`
		RunningVar        []float64 `json:"running_var"`
		NumBatchesTracked int       `json:"num_batches_tracked"`
	}
	b, err := os.ReadFile(filepath.Join("..", "core", "testdata", "torch_state_dict.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	var back torchReadBack
	b, err = os.ReadFile(filepath.Join("..", "core", "testdata", "gglua_state_dict.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))

	saved := filepath.Join(t.TempDir(), "gglua.safetensors")
	code := fmt.Sprintf(luaClose+`
local m = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)}
m:load_state_dict(tensor.load(%q)) -- strict
local x = tensor(%s):reshape(5, 3)
m:eval()
close(m(x), %s, "eval output")
m:train()
close(m(x), %s, "train output")
close(m[2].running_mean, %s, "running_mean")
close(m[2].running_var, %s, "running_var")
assert(m[2].num_batches_tracked:item() == %d, "num_batches_tracked " .. m[2].num_batches_tracked:item())
tensor.save(%q, m:state_dict())
m:eval()
close(m(x), %s, "PyTorch's output from gglua's file")
assert(m[2].num_batches_tracked:item() == %d)
local keys = {}
for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
table.sort(keys)
assert(table.concat(keys, " ") == %q, "keys " .. table.concat(keys, " "))
`, filepath.Join("..", "core", "testdata", "torch_state_dict.safetensors"), luaList(ref.Input), luaList(ref.EvalOutput),
		luaList(ref.TrainOutput), luaList(ref.RunningMean), luaList(ref.RunningVar), ref.NumBatchesTracked, saved,
		luaList(back.EvalOutput), back.NumBatchesTracked, strings.Join(back.Keys, " "))
	// Values within f32 rounding of the file PyTorch loaded (BLAS builds
	// sum the batch statistics in another order).
	gotData, wantData := runSaving(t, code, saved, "gglua_state_dict.safetensors")
	require.Len(t, gotData, len(wantData))
	for i := 0; i+4 <= len(wantData); i += 4 {
		w := math.Float32frombits(binary.LittleEndian.Uint32(wantData[i:]))
		g := math.Float32frombits(binary.LittleEndian.Uint32(gotData[i:]))
		require.InDelta(t, w, g, 1e-5*(1+math.Abs(float64(w))), "float %d of the data", i/4)
	}
}

// splitSafetensors is a safetensors file's header (parsed) and data.
func splitSafetensors(t *testing.T, b []byte) (map[string]any, []byte) {
	require.GreaterOrEqual(t, len(b), 8)
	n := binary.LittleEndian.Uint64(b)
	require.LessOrEqual(t, n, uint64(len(b)-8))
	var h map[string]any
	require.NoError(t, json.Unmarshal(b[8:8+n], &h))
	return h, b[8+n:]
}

// A language model's state_dict crosses too: an Embedding, a ModuleList
// and a head tied to the embedding (core/testdata/torch_lm_state_dict.*,
// scripts/reference/state_dict.py write-lm). PyTorch lists the tied weight
// under both names; gglua loads it strictly, stays tied and computes
// PyTorch's logits, and writes both names back, which PyTorch loaded
// strictly (core/testdata/gglua_lm_state_dict.json, read-lm).
func TestTiedStateDictCrossesWithPyTorch(t *testing.T) {
	var ref struct {
		Tokens [][]int   `json:"tokens"`
		Output []float64 `json:"output"`
		Keys   []string  `json:"keys"`
	}
	b, err := os.ReadFile(filepath.Join("..", "core", "testdata", "torch_lm_state_dict.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	var back struct {
		Output []float64 `json:"output"`
		Keys   []string  `json:"keys"`
		Tied   bool      `json:"tied"`
	}
	b, err = os.ReadFile(filepath.Join("..", "core", "testdata", "gglua_lm_state_dict.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, back.Tied, "PyTorch loaded gglua's file with the weights tied")
	require.Equal(t, ref.Keys, back.Keys, "gglua's file has PyTorch's names")

	rows := make([]string, len(ref.Tokens))
	for i, r := range ref.Tokens {
		ids := make([]float64, len(r))
		for j, v := range r {
			ids[j] = float64(v + 1) // gglua's ids are 1-based
		}
		rows[i] = luaList(ids)
	}
	saved := filepath.Join(t.TempDir(), "lm.safetensors")
	code := fmt.Sprintf(luaClose+`
local LM = nn.Module:extend("LM")
function LM:init()
  self.emb = nn.Embedding(10, 4)
  self.blocks = nn.ModuleList(nn.Linear(4, 4), nn.Linear(4, 4))
  self.head = nn.Linear(4, 10, false)
  self.head.weight = self.emb.weight
end
function LM:forward(idx)
  local x = self.emb(idx)
  for _, b in ipairs(self.blocks) do x = b(x):tanh() end
  return self.head(x)
end
local m = LM()
m:load_state_dict(tensor.load(%q)) -- strict
assert(rawequal(m.head.weight, m.emb.weight), "still tied")
local idx = tensor({%s}):int()
close(m(idx), %s, "logits")
local keys = {}
for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
table.sort(keys)
assert(table.concat(keys, " ") == %q, "keys " .. table.concat(keys, " "))
tensor.save(%q, m:state_dict())
close(m(idx), %s, "PyTorch's logits from gglua's file")
`, filepath.Join("..", "core", "testdata", "torch_lm_state_dict.safetensors"), strings.Join(rows, ", "), luaList(ref.Output),
		strings.Join(ref.Keys, " "), saved, luaList(back.Output))
	gotData, wantData := runSaving(t, code, saved, "gglua_lm_state_dict.safetensors")
	require.Equal(t, wantData, gotData, "the weights PyTorch loaded, as loaded from its file")
}
