package runtime

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// gglua's pcall and xpcall.
//
// gopher-lua v1.1.2 (upstream issue #448) unwinds a caught error badly: a
// raised error closes the upvalues of every frame of the state, the frames
// below pcall included, so a closure in the caller stops sharing its local
// with the caller (`local n = 0; local function inc(f) pcall(f); n = n + 1
// end` counts once, then never again); under xpcall nothing is closed, and
// the unwound frames' upvalues stay open on registers that the next calls
// reuse.
//
// Here the callee runs on a Lua thread of its own (it shares the globals,
// as a coroutine does), so an error unwinds that thread only: the caller's
// registers and upvalues are never touched, and closures made by the
// unwound frames keep the values they had. A thread whose call returned
// normally is clean and is reused; one that failed is dropped.
//
// What the thread boundary would change is kept as before:
//   - results, error objects (any value), xpcall's handler (called where
//     the error was raised; an error in it is the result), the context
//     (cancellation stops the callee too);
//   - error positions: an error whose position gopher-lua takes from below
//     the callee (pcall(error, "m"), pcall(string.rep)) gets the caller's
//     line, as before, and a stack overflow is "<line>: stack overflow";
//   - debug.traceback inside the callee or an xpcall handler goes on with
//     the frames of the caller;
//   - coroutine.running, coroutine.status and coroutine.resume see the
//     thread that called pcall as the running one.
//
// And two limits, as Lua 5.1 has them: coroutine.yield inside pcall/xpcall
// is an error ("attempt to yield across a C-call boundary"; gopher-lua
// crashed there), and pcall/xpcall nest at most maxNestedCalls deep
// (LUAI_MAXCCALLS), each thread with the runtime's CallStackSize, so the
// call depth stays bounded.

// maxNestedCalls bounds how deep pcall/xpcall and coroutine resumes nest,
// together (Lua 5.1's LUAI_MAXCCALLS): each runs a Lua thread of up to
// CallStackSize frames on the Go stack of the one before, and 700 nested
// coroutines of 600 gsub callbacks each passed Go's 1 GB stack limit, a
// fatal error no recover catches.
const maxNestedCalls = 200

// cStackOverflow is Lua 5.1's refusal of a resume nested too deep.
var cStackOverflow = fmt.Sprintf("C stack overflow (more than %d nested coroutine resumes and pcalls)", maxNestedCalls)

// tooDeep reports whether another nested pcall or resume would pass
// maxNestedCalls.
func (pc *protectedCalls) tooDeep() bool { return len(pc.owner)+pc.resuming >= maxNestedCalls }

// freeThreads is how many clean threads are kept for reuse.
const freeThreads = 4

// rootSource names the Lua frame at the bottom of every call's thread: an
// error position that gopher-lua takes from below the callee lands on it.
const rootSource = "[pcall]"

// protectedCalls is the state behind one Lua state's pcall and xpcall.
type protectedCalls struct {
	owner map[*lua.LState]*lua.LState // each running call's thread -> the thread that called pcall
	free  []*lua.LState               // threads whose call returned normally
	root  *lua.LFunction              // (...)(): calls its argument, from a Lua frame
	// resuming is how many coroutine resumes are running, nested.
	resuming int
}

// installProtectedCalls replaces pcall and xpcall of L's base library, and
// the coroutine and debug functions that see the thread a call runs on.
func installProtectedCalls(L *lua.LState) {
	root, err := L.Load(strings.NewReader("(...)()"), rootSource)
	if err != nil {
		panic(err) // a constant chunk
	}
	pc := &protectedCalls{owner: map[*lua.LState]*lua.LState{}, root: root}
	L.SetGlobal("pcall", L.NewFunction(pc.pcall))
	L.SetGlobal("xpcall", L.NewFunction(pc.xpcall))
	if co, ok := L.GetGlobal("coroutine").(*lua.LTable); ok {
		co.RawSetString("running", L.NewFunction(pc.running))
		co.RawSetString("status", L.NewFunction(pc.status))
		co.RawSetString("yield", L.NewFunction(pc.yield))
		if resume, ok := co.RawGetString("resume").(*lua.LFunction); ok && resume.IsG {
			settle := pc.settling(resume.GFunction)
			co.RawSetString("resume", L.NewFunction(func(L *lua.LState) int {
				if t, ok := L.Get(1).(*lua.LState); ok && pc.active(L, t) {
					L.Push(lua.LFalse)
					L.Push(lua.LString("cannot resume non-suspended coroutine"))
					return 2
				}
				if pc.tooDeep() {
					L.Push(lua.LFalse)
					L.Push(lua.LString(cStackOverflow))
					return 2
				}
				pc.resuming++
				defer func() { pc.resuming-- }()
				return settle(L)
			}))
		}
		if wrap, ok := co.RawGetString("wrap").(*lua.LFunction); ok && wrap.IsG {
			co.RawSetString("wrap", L.NewFunction(func(L *lua.LState) int {
				n := wrap.GFunction(L)
				// gopher-lua's wrap returns a Go closure over the coroutine.
				if w, ok := L.Get(-1).(*lua.LFunction); ok && n == 1 && w.IsG && len(w.Upvalues) == 1 {
					L.Pop(1)
					settle, t := pc.settling(w.GFunction), w.Upvalues[0].Value()
					L.Push(L.NewClosure(func(L *lua.LState) int {
						if t, ok := t.(*lua.LState); ok && pc.active(L, t) {
							L.RaiseError("cannot resume non-suspended coroutine")
						}
						if pc.tooDeep() {
							L.RaiseError("%s", cStackOverflow)
						}
						pc.resuming++
						defer func() { pc.resuming-- }()
						return settle(L)
					}, t))
				}
				return n
			}))
		}
	}
	if dbg, ok := L.GetGlobal("debug").(*lua.LTable); ok {
		if tb, ok := dbg.RawGetString("traceback").(*lua.LFunction); ok && tb.IsG {
			dbg.RawSetString("traceback", L.NewFunction(pc.traceback(tb.GFunction)))
		}
	}
}

// pcall(f, ...) as Lua 5.1's.
func (pc *protectedCalls) pcall(L *lua.LState) int {
	L.CheckAny(1)
	fn := L.Get(1)
	if fn.Type() != lua.LTFunction && L.GetMetaField(fn, "__call").Type() != lua.LTFunction {
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + fn.Type().String() + " value"))
		return 2
	}
	args := make([]lua.LValue, 0, L.GetTop()-1)
	for i := 2; i <= L.GetTop(); i++ {
		args = append(args, L.Get(i))
	}
	return pc.call(L, fn, args, nil)
}

// xpcall(f, handler) as gopher-lua's (Lua 5.1's: f gets no arguments).
func (pc *protectedCalls) xpcall(L *lua.LState) int {
	fn := L.CheckFunction(1)
	handler := L.CheckFunction(2)
	return pc.call(L, fn, nil, handler)
}

// call runs fn(args...) on a thread of its own and pushes true and its
// results, or false and the error object (the handler's result, if any).
func (pc *protectedCalls) call(L *lua.LState, fn lua.LValue, args []lua.LValue, handler *lua.LFunction) int {
	if pc.tooDeep() {
		L.Push(lua.LFalse)
		L.Push(lua.LString(fmt.Sprintf("stack overflow (more than %d nested pcall/xpcall)", maxNestedCalls)))
		return 2
	}
	th := pc.thread(L)
	current := L.G.CurrentThread
	pc.owner[th] = L
	results, errObj, failed := pc.protect(L, th, fn, args, handler)
	delete(pc.owner, th)
	// A coroutine that yields back to th leaves gopher-lua counting th as
	// the running thread.
	L.G.CurrentThread = current
	if failed {
		// th is dropped: its frames were not unwound, so closures made
		// before the error keep reading the values of their locals.
		L.Push(lua.LFalse)
		L.Push(errObj)
		return 2
	}
	L.Push(lua.LTrue)
	for _, r := range results {
		L.Push(r)
	}
	th.SetTop(0)
	if len(pc.free) < freeThreads {
		pc.free = append(pc.free, th)
	}
	return len(results) + 1
}

// protect calls fn(args...) on th, from th's root frame, and catches what
// it raises.
func (pc *protectedCalls) protect(L, th *lua.LState, fn lua.LValue, args []lua.LValue, handler *lua.LFunction) (results []lua.LValue, errObj lua.LValue, failed bool) {
	// Every error raised on th comes here, where it was raised: its
	// position is mended and the handler called, then it unwinds.
	th.Panic = func(from *lua.LState) {
		obj := pc.mendPosition(L, from.Get(-1))
		if handler != nil {
			th.Panic = rawPanic // an error in the handler is the result
			obj = callHandler(th, handler, obj)
		}
		panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: obj})
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		failed = true
		if apiErr, ok := r.(*lua.ApiError); ok {
			errObj = apiErr.Object
			return
		}
		// A Go panic: the call stack's own overflow, or a bug below.
		errObj = lua.LString(fmt.Sprint(r))
		if r == "lua callstack overflow" {
			errObj = lua.LString(strings.TrimPrefix(pc.where(th, 0)+" stack overflow", " "))
		}
		if handler != nil {
			th.Panic = rawPanic
			errObj = protectedHandler(th, handler, errObj)
		}
	}()
	var out []lua.LValue
	call := th.NewFunction(func(th *lua.LState) int {
		base := th.GetTop()
		th.Push(fn)
		for _, a := range args {
			th.Push(a)
		}
		th.Call(len(args), lua.MultRet)
		for i := base + 1; i <= th.GetTop(); i++ {
			out = append(out, th.Get(i))
		}
		return 0
	})
	th.Push(pc.root)
	th.Push(call)
	th.Call(1, 0)
	// gopher-lua leaves a returned frame in th's call stack as it was, so
	// the frame of call, and through it this closure, stays reachable
	// while th waits in the free list: the closure lets go of the
	// arguments and results, or a tensor passed through pcall (every
	// nn module's forward) would outlive the script's last use of it.
	results = out
	fn, args, out = nil, nil, nil
	return results, nil, false
}

func rawPanic(L *lua.LState) {
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: L.Get(-1)})
}

func callHandler(th *lua.LState, handler *lua.LFunction, obj lua.LValue) lua.LValue {
	th.Push(handler)
	th.Push(obj)
	th.Call(1, 1)
	return th.Get(-1)
}

// protectedHandler calls the handler after a Go panic, catching its errors.
func protectedHandler(th *lua.LState, handler *lua.LFunction, obj lua.LValue) (out lua.LValue) {
	defer func() {
		if r := recover(); r != nil {
			if apiErr, ok := r.(*lua.ApiError); ok {
				out = apiErr.Object
			} else {
				out = lua.LString(fmt.Sprint(r))
			}
		}
	}()
	return callHandler(th, handler, obj)
}

// mendPosition gives an error message whose position landed on a call's
// root frame the position gopher-lua gave before: the first Lua frame below
// pcall.
func (pc *protectedCalls) mendPosition(L *lua.LState, obj lua.LValue) lua.LValue {
	s, ok := obj.(lua.LString)
	prefix := rootSource + ":1:"
	if !ok || !strings.HasPrefix(string(s), prefix) {
		return obj
	}
	return lua.LString(pc.where(L, 1) + string(s)[len(prefix):])
}

// where is the position ("chunk:line:") of the first Lua frame of L from
// level on, going on below pcall into the threads that called it; "" if
// there is none.
func (pc *protectedCalls) where(L *lua.LState, level int) string {
	for {
		dbg, ok := L.GetStack(level)
		if !ok {
			return ""
		}
		if _, err := L.GetInfo("S", dbg, lua.LNil); err == nil && dbg.Source != "" {
			if dbg.Source != rootSource {
				return L.Where(level)
			}
			caller, ok := pc.owner[L]
			if !ok {
				return ""
			}
			L, level = caller, 1 // level 0 is pcall's own frame
			continue
		}
		level++
	}
}

// thread returns an idle thread sharing L's globals, running under L's
// context, with a call stack that starts small and is bounded as L's is.
func (pc *protectedCalls) thread(L *lua.LState) *lua.LState {
	var th *lua.LState
	if n := len(pc.free); n > 0 {
		th, pc.free = pc.free[n-1], pc.free[:n-1]
	} else {
		saved := L.Options
		L.Options.MinimizeStackMemory = true
		if L.Options.RegistryMaxSize > 128 && L.Options.RegistrySize > 128 {
			L.Options.RegistrySize = 128 // it grows up to RegistryMaxSize
		}
		var cancel func()
		th, cancel = L.NewThread()
		L.Options, th.Options = saved, saved // coroutines made inside get L's
		if cancel != nil {
			cancel() // the thread runs under L's context, set below
		}
	}
	if ctx := L.Context(); ctx != nil {
		th.SetContext(ctx)
	} else {
		th.RemoveContext()
	}
	return th
}

// logical is the thread a script would see as running t: the thread that
// called pcall, for one of pcall's threads.
func (pc *protectedCalls) logical(t *lua.LState) *lua.LState {
	for {
		o, ok := pc.owner[t]
		if !ok {
			return t
		}
		t = o
	}
}

// active reports whether coroutine co is running or normal (it resumed
// the running one, directly or through others): Lua refuses to resume it,
// and gopher-lua went on resuming until Go's stack overflowed.
func (pc *protectedCalls) active(L *lua.LState, co *lua.LState) bool {
	co = pc.logical(co)
	for t := pc.logical(L); t != nil; t = t.Parent {
		if pc.logical(t) == co {
			return true
		}
	}
	return false
}

// coroutine.running(): the running coroutine, nil in the main thread.
func (pc *protectedCalls) running(L *lua.LState) int {
	t := pc.logical(L.G.CurrentThread)
	if t == nil || t == L.G.MainThread {
		L.Push(lua.LNil)
	} else {
		L.Push(t)
	}
	return 1
}

// coroutine.status(co), as gopher-lua's, for the threads a script sees.
func (pc *protectedCalls) status(L *lua.LState) int {
	co := L.CheckThread(1)
	status := "suspended"
	switch me := pc.logical(L); {
	case co.Dead:
		status = "dead"
	case co == pc.logical(L.G.CurrentThread):
		status = "running"
	case me.Parent != nil && pc.logical(me.Parent) == co:
		status = "normal"
	}
	L.Push(lua.LString(status))
	return 1
}

// settling wraps fn (coroutine.resume, or what coroutine.wrap made): when
// the coroutine yields back, gopher-lua counts the resuming thread as the
// running one; inside pcall that is pcall's own thread, and the running
// thread a script sees (and coroutine.resume checks) is the one that called
// pcall.
func (pc *protectedCalls) settling(fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if _, ok := pc.owner[L]; ok {
			defer func() { L.G.CurrentThread = pc.logical(L) }()
		}
		return fn(L) // in this frame: its arguments, upvalues and name
	}
}

// coroutine.yield(...): inside pcall/xpcall it is an error, as in Lua 5.1
// (gopher-lua cannot suspend a Go function such as pcall).
func (pc *protectedCalls) yield(L *lua.LState) int {
	if _, ok := pc.owner[L]; ok {
		if pc.logical(L) == L.G.MainThread {
			L.RaiseError("can not yield from outside of a coroutine")
		}
		L.RaiseError("attempt to yield across a C-call boundary (coroutine.yield inside pcall, xpcall, with_grad_tape, no_grad or autocast)")
	}
	return -1 // gopher-lua's coroutine.yield: the VM switches to the resumer
}

// traceback wraps debug.traceback: inside a protected call it goes on with
// the frames of the threads that called pcall.
func (pc *protectedCalls) traceback(orig lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if orig(L) != 1 { // in this frame, so that levels count as before
			return 0
		}
		s, ok := L.Get(-1).(lua.LString)
		_, isThread := L.Get(1).(*lua.LState)
		caller, inCall := pc.owner[L]
		if !ok || isThread || !inCall {
			return 1
		}
		L.Pop(1)
		text := cutRoot(string(s))
		for inCall {
			L.Push(L.NewFunction(orig))
			L.Push(caller)
			L.Push(lua.LNumber(0)) // from pcall's own frame
			L.Call(2, 1)
			more := strings.TrimPrefix(L.Get(-1).String(), "stack traceback:\n")
			L.Pop(1)
			next, nested := pc.owner[caller]
			if nested {
				more = cutRoot(more)
			}
			text += "\n" + more
			caller, inCall = next, nested
		}
		L.Push(lua.LString(text))
		return 1
	}
}

// cutRoot drops the frames a protected call's thread starts with (its
// root, the Go function that calls the callee, and the end marker) from a
// traceback.
func cutRoot(tb string) string {
	lines := strings.Split(tb, "\n")
	for i := len(lines) - 1; i > 0; i-- {
		if strings.HasPrefix(lines[i], "\t"+rootSource+":") {
			return strings.Join(lines[:i-1], "\n")
		}
	}
	return tb
}
