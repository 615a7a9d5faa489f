package runtime_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

func newRuntime(t *testing.T, sandbox bool) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: sandbox, Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	return rt
}

// TestPcallKeepsCallersUpvalues: gopher-lua v1.1.2 (issue #448) closes the
// caller's upvalues when pcall catches an error, or (xpcall) leaves the
// unwound frames' upvalues open on registers the next call reuses. Each
// case returns what Lua 5.1 gives.
func TestPcallKeepsCallersUpvalues(t *testing.T) {
	for _, c := range []struct {
		name string
		code string
		want []any
	}{
		{"issue repro", `
			local n = 0
			local function inc(f) pcall(f); n = n + 1 end
			inc(function() end) inc(function() error("x") end) inc(function() end)
			return n`, []any{3.0}},
		{"a second closure sees the same local", `
			local n = 0
			local function inc(f) pcall(f); n = n + 1 end
			local function get() return n end
			inc(function() error("x") end)
			return n, get()`, []any{1.0, 1.0}},
		{"error object is a table", `
			local n = 0
			local function inc(f) local ok, e = pcall(f); n = n + 1; return e end
			local e = inc(function() error({code = 7}) end)
			inc(function() error(setmetatable({}, {__tostring = function() return "obj" end})) end)
			return n, e.code`, []any{2.0, 7.0}},
		{"xpcall", `
			local n = 0
			local function inc() n = n + 1 end
			local ok, e = xpcall(function() inc() error({code = 7}) end, function(e) return e end)
			inc()
			return n, ok, e.code`, []any{2.0, false, 7.0}},
		{"xpcall: a closure made before the error keeps its value", `
			local get
			xpcall(function() local x = "kept"; get = function() return x end; error("e") end, function(m) return m end)
			local function clobber() local a, b, c, d = 1, 2, 3, 4 return a + b + c + d end
			clobber()
			return get()`, []any{"kept"}},
		{"pcall: a closure made before the error keeps its value", `
			local get, set
			pcall(function() local x = 1; get = function() return x end; set = function(v) x = v end; error("e") end)
			local function clobber() local a, b, c, d = 1, 2, 3, 4 return a + b + c + d end
			clobber()
			set(5)
			clobber()
			return get()`, []any{5.0}},
		{"nested pcall", `
			local n = 0
			local function inc(f) pcall(f); n = n + 1 end
			inc(function() inc(function() error("inner") end) error("outer") end)
			inc(function() end)
			return n`, []any{3.0}},
		{"inside a coroutine", `
			local n = 0
			local co = coroutine.wrap(function()
				local function inc(f) pcall(f); n = n + 1 end
				inc(function() error("x") end)
				coroutine.yield(n)
				inc(function() error("y") end)
				inc(function() end)
				return n
			end)
			return co(), co()`, []any{1.0, 3.0}},
		{"a coroutine's locals shared with closures", `
			local co = coroutine.wrap(function()
				local m = 0
				local function bump(f) pcall(f); m = m + 1 end
				bump(function() error("x") end)
				coroutine.yield(m)
				bump(function() error("x") end)
				return m
			end)
			return co(), co()`, []any{1.0, 2.0}},
		{"an error in a resumed coroutine inside pcall", `
			local n = 0
			local function inc(f) pcall(f); n = n + 1 end
			inc(function() local co = coroutine.create(function() error("in co") end); coroutine.resume(co); error("after") end)
			inc(function() end)
			return n`, []any{2.0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := newRuntime(t, true)
			got, err := rt.DoString(context.Background(), c.code)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// TestPcallSemantics: return values, error objects and messages as Lua 5.1
// (and gopher-lua before) give them.
func TestPcallSemantics(t *testing.T) {
	for _, c := range []struct {
		name string
		code string
		want []any
	}{
		{"results", `return pcall(function(a, b) return a + b, nil, "s" end, 1, 2)`, []any{true, 3.0, nil, "s"}},
		{"result count with nils", `return select("#", pcall(function() return nil, nil end))`, []any{3.0}},
		{"no results", `return select("#", pcall(function() end))`, []any{1.0}},
		{"error message with position", `return pcall(function() error("boom") end)`, []any{false, "<string>:1: boom"}},
		{"error level 0", `return pcall(function() error("boom", 0) end)`, []any{false, "boom"}},
		{"error object", `local ok, e = pcall(error, {code = 1}) return ok, e.code`, []any{false, 1.0}},
		{"error nil", `return select("#", pcall(error)), (pcall(error))`, []any{2.0, false}},
		{"runtime error", `return pcall(function() local t = nil; return t.x end)`, []any{false, "<string>:1: attempt to index a non-table object(nil) with key 'x'"}},
		{"not a function", `return pcall(nil)`, []any{false, "attempt to call a nil value"}},
		{"a number", `return pcall(42)`, []any{false, "attempt to call a number value"}},
		{"__call", `return pcall(setmetatable({}, {__call = function(self, a) return a * 2 end}), 21)`, []any{true, 42.0}},
		{"a Go function", `return pcall(string.rep, "ab", 2)`, []any{true, "abab"}},
		{"a Go function's error", `local ok, e = pcall(string.rep) return ok, e:find("bad argument") ~= nil`, []any{false, true}},
		{"nested", `return pcall(pcall, error, "e")`, []any{true, false, "<string>:1: e"}},
		{"error position of a Go function", `return pcall(error, "m")`, []any{false, "<string>:1: m"}},
		{"argument error of a Go function", `return pcall(string.rep)`, []any{false, "<string>:1: bad argument #1 to (anonymous) (string expected, got nil)"}},
		{"xpcall results", `return xpcall(function() return 1, 2 end, print)`, []any{true, 1.0, 2.0}},
		{"xpcall handler result", `return xpcall(function() error({1}) end, function(e) return "handled " .. #e end)`, []any{false, "handled 1"}},
		{"xpcall handler gets the message", `return xpcall(function() error("m") end, function(e) return "h: " .. e end)`, []any{false, "h: <string>:1: m"}},
		{"error in the handler", `local ok, e = xpcall(function() error("first") end, function(e) error("second", 0) end) return ok, e`, []any{false, "second"}},
		{"a gglua error", `local ok, e = pcall(tensor.zeros, -1) return ok, type(e)`, []any{false, "string"}},
		{"stack overflow is caught", `local function f(n) return f(n + 1) + 1 end local ok, e = pcall(f, 1) return ok, e:find("stack overflow") ~= nil`, []any{false, true}},
		{"pcall recursion ends", `local function f() return pcall(f) end local r = {f()} return r[#r]:find("stack overflow") ~= nil, #r`, []any{true, 202.0}},
		{"the state is fine after", `pcall(error, "x") local t = {} for i = 1, 10 do t[i] = i end return #t`, []any{10.0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := newRuntime(t, true)
			got, err := rt.DoString(context.Background(), c.code)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	rt := newRuntime(t, true)
	_, err := rt.DoString(context.Background(), `pcall()`)
	require.ErrorContains(t, err, "bad argument #1")
	_, err = rt.DoString(context.Background(), `xpcall(function() end)`)
	require.ErrorContains(t, err, "bad argument #2")
}

// TestPcallAndCoroutines: pcall inside coroutines, the running thread as a
// script sees it, and coroutine.yield inside pcall (an error, as Lua 5.1's
// "attempt to yield across a C-call boundary", not a crash).
func TestPcallAndCoroutines(t *testing.T) {
	for _, c := range []struct {
		name string
		code string
		want []any
	}{
		{"running in the main thread", `return coroutine.running() == nil, select(2, pcall(coroutine.running)) == nil`, []any{true, true}},
		{"running in a coroutine", `
			local co
			co = coroutine.create(function()
				local _, r = pcall(coroutine.running)
				local _, s = pcall(coroutine.status, co)
				return r == co, s
			end)
			return select(2, coroutine.resume(co))`, []any{true, "running"}},
		{"status normal", `
			local outer
			outer = coroutine.create(function()
				local inner = coroutine.create(function()
					return select(2, pcall(coroutine.status, outer))
				end)
				return select(2, coroutine.resume(inner))
			end)
			return select(2, coroutine.resume(outer)), coroutine.status(outer)`, []any{"normal", "dead"}},
		{"resume inside pcall", `
			local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
			local ok, x = pcall(function() return co(1) end)
			local ok2, y = pcall(co, 10)
			return ok, x, ok2, y, coroutine.running() == nil`, []any{true, 2.0, true, 20.0, true}},
		{"resuming the running coroutine inside pcall", `
			local co
			co = coroutine.create(function()
				local c2 = coroutine.wrap(function() coroutine.yield() end)
				return pcall(function() c2() return coroutine.resume(co) end)
			end)
			return coroutine.resume(co)`, []any{true, true, false, "cannot resume non-suspended coroutine"}},
		// Lua refuses to resume a normal coroutine (one that resumed the
		// running one); gopher-lua went on until Go's stack overflowed and
		// killed the host ([19] item 1).
		{"resuming a normal coroutine", `
			local a, b
			a = coroutine.create(function() return coroutine.resume(b) end)
			b = coroutine.create(function() return coroutine.resume(a) end)
			return coroutine.resume(a)`, []any{true, true, false, "cannot resume non-suspended coroutine"}},
		{"wrapped coroutines resuming each other", `
			local a, b
			a = coroutine.wrap(function() return b() end)
			b = coroutine.wrap(function() return a() end)
			local ok, err = pcall(a)
			return ok, (err:gsub("^.-: ", ""))`, []any{false, "cannot resume non-suspended coroutine"}},
		// Coroutines nested past Lua 5.1's LUAI_MAXCCALLS, each deep in Go
		// callbacks, passed Go's stack limit and killed the host ([19]
		// item 1): the resume past the bound is refused, as Lua's "C
		// stack overflow", and so is a wrapped one; what ran below is
		// unwound normally.
		{"coroutines nested past the bound", `
			local deepest = 0
			local function nest(k)
				deepest = math.max(deepest, k)
				local function cb(n)
					if n == 0 then
						local ok, v = coroutine.resume(coroutine.create(function() return nest(k + 1) end))
						if not ok then error(v, 0) end
						return v
					end
					local r
					string.gsub("x", "x", function() r = cb(n - 1) end)
					return r
				end
				return cb(600)
			end
			local ok, err = pcall(nest, 1)
			return ok, err, deepest`, []any{false, "C stack overflow (more than 200 nested coroutine resumes and pcalls)", 200.0}},
		{"wrapped coroutines nested past the bound", `
			local function nest(k) return coroutine.wrap(function() return nest(k + 1) end)() end
			local ok, err = pcall(nest, 1)
			return ok, (err:gsub("^.-: ", ""))`, []any{false, "C stack overflow (more than 200 nested coroutine resumes and pcalls)"}},
		{"yield around pcall", `
			local co = coroutine.wrap(function()
				local ok, e = pcall(error, "x")
				local v = coroutine.yield(e)
				return v, (pcall(error, "y"))
			end)
			return co(), co("back")`, []any{"<string>:3: x", "back", false}},
		{"yield inside pcall", `
			local co = coroutine.create(function()
				local ok, e = pcall(function() coroutine.yield(1) end)
				return ok, e
			end)
			local ok, a, b = coroutine.resume(co)
			return ok, a, b, coroutine.status(co)`,
			[]any{true, false, "<string>:3: attempt to yield across a C-call boundary (coroutine.yield inside pcall, xpcall, with_grad_tape, no_grad or autocast)", "dead"}},
		{"yield inside pcall in the main thread", `return pcall(coroutine.yield, 1)`, []any{false, "<string>:1: can not yield from outside of a coroutine"}},
		{"yield outside a coroutine", `return pcall(function() coroutine.yield() end)`, []any{false, "<string>:1: can not yield from outside of a coroutine"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := newRuntime(t, true)
			got, err := rt.DoString(context.Background(), c.code)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// TestPcallTraceback: debug.traceback in an xpcall handler reaches the
// frames below pcall.
func TestPcallTraceback(t *testing.T) {
	rt := newRuntime(t, false)
	got, err := rt.DoString(context.Background(), `
		local function deepest() error("boom") end
		local function outer()
			local ok, tb = xpcall(deepest, debug.traceback)
			return ok, tb
		end
		local ok, tb = outer()
		return ok, tb`)
	require.NoError(t, err)
	require.Len(t, got, 2)
	tb := got[1].(string)
	assert.Contains(t, tb, "<string>:2: boom\nstack traceback:")
	assert.Contains(t, tb, "<string>:2: in function")
	assert.Contains(t, tb, "function 'xpcall'")
	assert.Contains(t, tb, "<string>:4: in function 'outer'")
	assert.Contains(t, tb, "<string>:7: in main chunk")
}

// TestPcallUnderCancellation: a cancelled context stops a script that
// catches every error.
func TestPcallUnderCancellation(t *testing.T) {
	rt := newRuntime(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := rt.DoString(ctx, `while true do pcall(function() while true do end end) end`)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 3*time.Second)
	got, err := rt.DoString(context.Background(), `return pcall(function() return 1 end)`)
	require.NoError(t, err)
	assert.Equal(t, []any{true, 1.0}, got)
}
