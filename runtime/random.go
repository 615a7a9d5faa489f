package runtime

import (
	"math"
	"math/rand/v2"

	lua "github.com/yuin/gopher-lua"
)

// math.random and math.randomseed on a generator of the runtime's own.
//
// gopher-lua's draw from Go's global generator, whose Seed does nothing
// since Go 1.24, so math.randomseed(42) did not make a script reproducible,
// and runtimes shared one stream. Here each runtime has its own PCG
// generator, seeded with 0 until the script calls math.randomseed (Lua 5.1
// too starts every run from the same seed), so the same script with the
// same seeds draws the same numbers.
//
// As Lua 5.1: random() is uniform in [0, 1), random(m) an integer in
// [1, m], random(m, n) an integer in [m, n]; an empty interval is an error.
// Unlike Lua 5.1, which truncates, a bound that is not an integer (or is
// NaN or infinite) is an error too, as in Lua 5.3.

type luaRandom struct{ rng *rand.Rand }

func installRandom(L *lua.LState) {
	m, ok := L.GetGlobal("math").(*lua.LTable)
	if !ok {
		return
	}
	r := &luaRandom{}
	r.seed(0)
	m.RawSetString("random", L.NewFunction(r.random))
	m.RawSetString("randomseed", L.NewFunction(r.randomseed))
}

func (r *luaRandom) seed(s uint64) {
	r.rng = rand.New(rand.NewPCG(s, 0x9e3779b97f4a7c15))
}

// math.randomseed(x): x an integer (or any finite number: its bits seed).
func (r *luaRandom) randomseed(L *lua.LState) int {
	x := float64(L.CheckNumber(1))
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		L.ArgError(1, "seed must be a finite number, got "+lua.LNumber(x).String())
	case x == math.Trunc(x) && math.Abs(x) < 1<<63:
		r.seed(uint64(int64(x)))
	default:
		r.seed(math.Float64bits(x))
	}
	return 0
}

// math.random([m [, n]]).
func (r *luaRandom) random(L *lua.LState) int {
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r.rng.Float64()))
		return 1
	case 1:
		m := intArg(L, 1)
		if m < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(1 + r.rng.Int64N(m)))
		return 1
	case 2:
		lo, hi := intArg(L, 1), intArg(L, 2)
		if lo > hi {
			L.ArgError(2, "interval is empty")
		}
		// hi - lo + 1 fits in a uint64 for bounds within ±2^53.
		L.Push(lua.LNumber(lo + int64(r.rng.Uint64N(uint64(hi-lo)+1))))
		return 1
	}
	L.RaiseError("wrong number of arguments to 'random' (expected 0, 1 or 2, got %d)", L.GetTop())
	return 0
}

// intArg reads argument n as an integer bound: a number with an integer
// value within ±2^53 (the integers a Lua number holds exactly).
func intArg(L *lua.LState, n int) int64 {
	x := float64(L.CheckNumber(n))
	if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		L.ArgError(n, "number has no integer representation: "+lua.LNumber(x).String())
	}
	return int64(x)
}
