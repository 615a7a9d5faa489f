package luabind

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/dist"
)

// agreeAcross is what one all_reduce(MAX) of the ranks' headers gives
// rank me: the spread agree reads.
func agreeAcross(headers []header, me int) *spread {
	maxed := headers[0].encode()
	for _, h := range headers[1:] {
		for i, v := range h.encode() {
			maxed[i] = max(maxed[i], v)
		}
	}
	return decodeSpread(headers[me], maxed, len(headers))
}

func tensorCall(call int, shape []int, set map[int]uint64) header {
	t, err := core.Zeros(shape...)
	if err != nil {
		panic(err)
	}
	h := tensorHeader(call, t)
	for f, v := range set {
		h[f] = v
	}
	return h
}

// Every field survives the float32 chunks exactly (a whole uint64: the
// shape hash), and alike headers raise nothing.
func TestHeaderChunksAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		var h header
		for f := range h {
			h[f] = rng.Uint64() >> rng.IntN(64)
		}
		h[fRefused], h[fShapes] = 0, math.MaxUint64
		s := agreeAcross([]header{h, h, h}, 1)
		for f := range h {
			require.False(t, s.differs(f), "field %d", f)
			var v uint64
			for k := range chunks {
				v = v<<chunkBits | s.hi[f][k]
			}
			require.Equal(t, h[f], v, "field %d", f)
		}
		require.Empty(t, s.problem(1, "x", "y"))
	}
}

// What each rank is told when the ranks' calls differ: its own call, and
// what another rank holds where that is known exactly.
func TestAgreeMessages(t *testing.T) {
	ar := func(shape []int, op dist.Op) header {
		return tensorCall(callAllReduce, shape, map[int]uint64{fOp: uint64(op) + 1})
	}
	bc := func(shape []int, src uint64) header {
		return tensorCall(callBroadcast, shape, map[int]uint64{fSrc: src})
	}
	dp := func(params, others, averaged uint64, shapes ...[]int) header {
		h := header{fCall: callDataParallel, fParams: params, fOthers: others, fAveraged: averaged}
		h.setShapes(shapes...)
		return h
	}
	big := 1<<23 + 1 // differs from 1<<22 in two chunks
	for _, c := range []struct {
		name    string
		headers []header
		me      int
		want    []string // "" : no problem
	}{
		{"alike", []header{ar([]int{3}, dist.Sum), ar([]int{3}, dist.Sum)}, 0, nil},
		{"sizes", []header{bc([]int{3}, 0), bc([]int{5}, 0)}, 1,
			[]string{"this rank (1 of 2) passed a tensor of shape 5 with src 0, and the other rank has shape 3", "the same src"}},
		{"same count, other shape", []header{ar([]int{4, 1}, dist.Sum), ar([]int{2, 2}, dist.Sum)}, 0,
			[]string{"the other rank has shape 2x2"}},
		{"three ranks: the element count", []header{ar([]int{3}, dist.Sum), ar([]int{4}, dist.Sum), ar([]int{5}, dist.Sum)}, 0,
			[]string{"another rank has 5 elements"}},
		{"three ranks, this one between", []header{ar([]int{3}, dist.Sum), ar([]int{4}, dist.Sum), ar([]int{5}, dist.Sum)}, 1,
			[]string{"another rank has 5 elements"}},
		{"three ranks, same count", []header{ar([]int{2, 2}, dist.Sum), ar([]int{4, 1}, dist.Sum), ar([]int{4, 1}, dist.Sum)}, 0,
			[]string{"another rank has a different shape of as many elements"}},
		{"a count in several chunks is not guessed", []header{ar([]int{1 << 22}, dist.Sum), ar([]int{big}, dist.Sum), ar([]int{1 << 22}, dist.Sum)}, 0,
			[]string{"another rank has a different shape ("}},
		{"op", []header{ar([]int{3}, dist.Sum), ar([]int{3}, dist.Max)}, 0,
			[]string{`passed a tensor of shape 3 with op "sum", and another rank passed op "max"`}},
		{"src", []header{bc([]int{3}, 0), bc([]int{3}, 1)}, 1, []string{"with src 1, and another rank passed src 0"}},
		{"call", []header{ar([]int{3}, dist.Sum), bc([]int{3}, 0)}, 0,
			[]string{"another rank called dist.broadcast where this rank (0 of 2) called dist.all_reduce with a tensor of shape 3 with op \"sum\""}},
		{"barrier", []header{{fCall: callBarrier}, ar([]int{1}, dist.Sum)}, 0,
			[]string{"another rank called dist.all_reduce where this rank (0 of 2) called dist.barrier; every rank"}},
		{"refused", []header{ar([]int{3}, dist.Sum), tensorCall(callAllReduce, []int{3}, map[int]uint64{fRefused: 1})}, 0,
			[]string{"another rank refused its call (its own error says why), so no rank sent anything"}},
		{"parameter count", []header{dp(2, 0, 0, []int{2, 3}, []int{2}), dp(4, 0, 0, []int{2, 3}, []int{2}, []int{2, 2}, []int{2})}, 0,
			[]string{"another rank has 4 parameters to average"}},
		{"parameter shapes", []header{dp(2, 0, 0, []int{4, 3}, []int{4}), dp(2, 0, 0, []int{6, 3}, []int{6})}, 0,
			[]string{"another rank's tensors have other shapes, 24 elements in all"}},
		{"parameter shapes, as many elements", []header{dp(2, 0, 0, []int{4, 3}, []int{4}), dp(2, 0, 0, []int{3, 4}, []int{4})}, 0,
			[]string{"another rank's tensors have other shapes (every"}},
		{"buffers", []header{dp(2, 2, 0, []int{4, 3}, []int{4}, []int{4}, []int{4}), dp(2, 0, 0, []int{4, 3}, []int{4})}, 0,
			[]string{"another rank has 0 other tensors (buffers)"}},
		{"earlier models", []header{dp(2, 0, 3, []int{4, 3}, []int{4}), dp(2, 0, 0, []int{4, 3}, []int{4})}, 0,
			[]string{"another rank already averages 0 parameters from earlier dist.data_parallel calls"}},
	} {
		got := agreeAcross(c.headers, c.me).problem(c.me, describe(c.headers[c.me]), "the same src")
		if c.want == nil {
			assert.Empty(t, got, c.name)
			continue
		}
		for _, w := range c.want {
			assert.Contains(t, got, w, c.name)
		}
	}
}

// describe stands in for the callers' descriptions of their calls.
func describe(h header) string {
	switch h[fCall] {
	case callBarrier:
		return ""
	case callAllReduce:
		return "a tensor of shape " + shapeOf(h) + ` with op "` + dist.Op(h[fOp]-1).String() + `"`
	case callBroadcast:
		return "a tensor of shape " + shapeOf(h) + " with src " + string(rune('0'+h[fSrc]))
	}
	return "a model"
}

func shapeOf(h header) string {
	shape := make([]int, h[fNdim])
	for i := range shape {
		shape[i] = int(h[fDim1+i])
	}
	return shapeText(shape)
}

// Alone, dist refuses what it refuses with several processes, with the
// same message (a script must not fail only at scale): a parameter list
// holding a tensor that is no parameter, a view among a module's buffers;
// and all_gather's tensors are ones a collective takes, even from a tensor
// the tape recorded.
func TestDistAloneRefusesAsAtScale(t *testing.T) {
	L, _ := logTestState(t, false)
	for _, c := range []struct{ code, want string }{
		{`dist.data_parallel({tensor{1, 2}})`, "dist.data_parallel: argument 1: parameter 1 (shape 2) is not a leaf that requires grad (tensor.param makes one)"},
		{`dist.data_parallel({tensor.param(tensor{1}), 3})`, "dist.data_parallel: argument 1: parameter 2 is a number, expected a tensor"},
		{`dist.data_parallel({})`, "dist.data_parallel: argument 1: no parameters that require grad"},
		{`dist.data_parallel({parameters = function() return {tensor{1}} end})`, "dist.data_parallel: argument 1: no parameters that require grad"},
		{`local m = nn.BatchNorm1d(2); m:register_buffer("running_mean", tensor{1, 2, 3}:narrow(1, 1, 2)); dist.data_parallel(m)`,
			"dist.data_parallel: argument 1: state_dict()'s running_mean (shape 2): a view of shape 2 has no memory of its own"},
		{`dist.broadcast(tensor{1}, 1)`, "dist.broadcast: argument 2: src 1 is not a rank (ranks count from 0 to 0)"},
		{`dist.all_reduce(tensor{1}, "prod")`, `dist.all_reduce: argument 2: unknown reduction "prod"`},
		{`dist.all_reduce(3)`, "dist.all_reduce: argument 1: expected a tensor, got number"},
	} {
		err := L.DoString(c.code)
		if assert.Error(t, err, c.code) {
			assert.Contains(t, err.Error(), c.want, c.code)
		}
	}
	require.NoError(t, L.DoString(`
local x = tensor.param(tensor{1, 2})
local g
with_grad_tape(function() local y = x * 2; g = dist.all_gather(y); return y:sum() end)
assert(#g == 1)
dist.all_reduce(g[1])
assert(g[1]:totable()[2] == 4)
local m = nn.Sequential{nn.Linear(2, 2), nn.BatchNorm1d(2)}
assert(dist.data_parallel(m) == m)
-- a module's frozen parameter is broadcast, not refused (a list's is)
local frozen = {parameters = function() return {tensor.param(tensor{1}), tensor{2}} end}
assert(dist.data_parallel(frozen) == frozen)`))
}
