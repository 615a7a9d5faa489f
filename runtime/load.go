package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/luacompile"
)

// Every chunk a runtime runs is compiled by luacompile, which rewrites the
// statements gopher-lua's compiler gets wrong (multiple assignment, loops
// whose body begins with a jump): DoString, DoFile and the REPL (Load),
// and, outside a sandbox, loadstring, load, loadfile, dofile and require,
// which are replaced here.

// Load compiles a chunk named name (as error messages show it) for this
// runtime, without running it.
func (rt *Runtime) Load(r io.Reader, name string) (*lua.LFunction, error) {
	return luacompile.LoadWith(rt.L, r, name, rt.compile)
}

// compileOptions are a runtime's rewrites: in a sandbox, every ".." calls
// sandboxConcat (stdlib.go), which bounds the string it makes, and a
// function of more than maxConstants distinct constants is refused before
// the compiler's quadratic search for them (which no deadline stops).
func compileOptions(sandbox bool) luacompile.Options {
	if sandbox {
		return luacompile.Options{Concat: sandboxConcat, MaxConstants: maxConstants}
	}
	return luacompile.Options{}
}

// maxConstants bounds a sandboxed function's distinct constants: 16,384
// compile in about 0.6 s (50,000 took 5.4 s).
const maxConstants = 1 << 14

// loadFile compiles the script at path (fileSource).
func loadFile(L *lua.LState, path string, o luacompile.Options) (*lua.LFunction, error) {
	src, err := fileSource(path)
	if err != nil {
		return nil, err
	}
	return luacompile.LoadWith(L, bytes.NewReader(src), path, o)
}

// fileSource is the script at path; a first line starting with '#' (a
// Unix "#!" line) is skipped, its line kept so that lines count right.
func fileSource(path string) ([]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, &lua.ApiError{Type: lua.ApiErrorFile, Object: lua.LString(err.Error()), Cause: err}
	}
	if len(src) > 0 && src[0] == '#' {
		if nl := bytes.IndexByte(src, '\n'); nl >= 0 {
			src = src[nl:]
		} else {
			src = nil
		}
	}
	return src, nil
}

// compileIn compiles src for rt on a goroutine of its own and waits for it
// or for ctx: gopher-lua's compiler looks at no context (and takes time
// quadratic in a function's constants), so a call's deadline would only
// start once it is done. A compile abandoned at the deadline finishes in
// the background, and its result is dropped.
func (rt *Runtime) compileIn(ctx context.Context, src []byte, name string) (*lua.LFunction, error) {
	type compiled struct {
		proto *lua.FunctionProto
		err   error
	}
	done := make(chan compiled, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- compiled{err: fmt.Errorf("compiling %s: %v", name, r)}
			}
		}()
		p, err := luacompile.CompileWith(bytes.NewReader(src), name, rt.compile)
		done <- compiled{p, err}
	}()
	select {
	case c := <-done:
		if c.err != nil {
			return nil, c.err
		}
		return rt.L.NewFunctionFromProto(c.proto), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("compiling %s: %w", name, context.Cause(ctx))
	}
}

// installLoaders replaces the base library's functions that compile code,
// and require's loader of Lua files, with ones that compile as Load does.
func installLoaders(L *lua.LState) {
	// pushLoaded pushes what a load function returns: the function, or nil
	// and the message.
	pushLoaded := func(L *lua.LState, fn *lua.LFunction, err error) int {
		if err != nil {
			L.Push(lua.LNil)
			L.Push(lua.LString(err.Error()))
			return 2
		}
		L.Push(fn)
		return 1
	}
	L.SetGlobal("loadstring", L.NewFunction(func(L *lua.LState) int {
		src := L.CheckString(1)
		fn, err := luacompile.Load(L, strings.NewReader(src), L.OptString(2, src))
		return pushLoaded(L, fn, err)
	}))
	L.SetGlobal("load", L.NewFunction(func(L *lua.LState) int {
		reader := L.CheckFunction(1)
		name := L.OptString(2, "=(load)")
		var src strings.Builder
		for {
			L.Push(reader)
			L.Call(0, 1)
			piece := L.Get(-1)
			L.Pop(1)
			if piece == lua.LNil {
				break
			}
			s, ok := piece.(lua.LString)
			if !ok {
				if n, isNum := piece.(lua.LNumber); isNum {
					s = lua.LString(n.String())
				} else {
					L.Push(lua.LNil)
					L.Push(lua.LString("reader function must return a string"))
					return 2
				}
			}
			if s == "" {
				break
			}
			src.WriteString(string(s))
		}
		fn, err := luacompile.Load(L, strings.NewReader(src.String()), name)
		return pushLoaded(L, fn, err)
	}))
	L.SetGlobal("loadfile", L.NewFunction(func(L *lua.LState) int {
		fn, err := loadFile(L, L.CheckString(1), luacompile.Options{})
		return pushLoaded(L, fn, err)
	}))
	L.SetGlobal("dofile", L.NewFunction(func(L *lua.LState) int {
		fn, err := loadFile(L, L.CheckString(1), luacompile.Options{})
		if err != nil {
			L.RaiseError("%s", err.Error())
		}
		top := L.GetTop()
		L.Push(fn)
		L.Call(0, lua.MultRet)
		return L.GetTop() - top
	}))
	pkg, ok := L.GetGlobal("package").(*lua.LTable)
	if !ok {
		return
	}
	if loaders, ok := pkg.RawGetString("loaders").(*lua.LTable); ok && loaders.Len() >= 2 {
		loaders.RawSetInt(2, L.NewFunction(func(L *lua.LState) int {
			name := L.CheckString(1)
			path, tried := findModule(L, pkg, name)
			if path == "" {
				L.Push(lua.LString(tried))
				return 1
			}
			fn, err := loadFile(L, path, luacompile.Options{})
			if err != nil {
				L.RaiseError("%s", err.Error())
			}
			L.Push(fn)
			return 1
		}))
	}
}

// findModule is the first readable file that package.path gives for the
// module name ('.' becomes '/'), or "" and the list of files tried, in
// require's words.
func findModule(L *lua.LState, pkg *lua.LTable, name string) (string, string) {
	templates, ok := pkg.RawGetString("path").(lua.LString)
	if !ok {
		L.RaiseError("package.path must be a string")
	}
	var tried strings.Builder
	for _, t := range strings.Split(string(templates), ";") {
		path := strings.ReplaceAll(t, "?", strings.ReplaceAll(name, ".", "/"))
		if f, err := os.Open(path); err == nil {
			f.Close()
			return path, ""
		}
		tried.WriteString("\n\tno file '" + path + "'")
	}
	return "", tried.String()
}
