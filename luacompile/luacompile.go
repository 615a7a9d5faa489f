// Package luacompile compiles Lua source for gopher-lua around two of its
// compiler's bugs, each of which gives a wrong answer with no error:
//
//   - A multiple assignment writes each value into its target before it
//     has read the ones after it: after "a, b = a + 1, a" b held the new
//     a (gopher-lua issue #440). Lua evaluates every expression, left and
//     right, before it assigns anything.
//   - A loop whose body begins with a jump ("break", "if false then ...")
//     jumped elsewhere: the compiler's jump-to-jump pass reads a jump it
//     has already rewritten as if it were not, and the loop's back edge
//     went to the wrong place (the chunk's start, typically: the script
//     ran again, forever; issue #540).
//
// Load parses a chunk, rewrites those statements into forms the compiler
// gets right, and compiles it: a multiple assignment becomes locals that
// hold every value first, then one assignment per target; every loop body
// starts with a local that holds false, so that no back edge lands on a
// jump. Everything else is compiled as gopher-lua compiles it, unless
// Options ask for more: a sandbox has every ".." call a function that
// bounds the string it makes (Options.Concat).
package luacompile

import (
	"fmt"
	"io"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Options are rewrites a caller asks for beyond the compiler's fixes.
type Options struct {
	// Concat, when set, names a global function that every ".." calls in
	// place of the VM's concatenation, with a chain's operands in order
	// ("a .. b .. c" is Concat(a, b, c)): a sandbox's, which refuses a
	// string past its bound before making it.
	Concat string
	// MaxConstants, when set, refuses a function with more distinct
	// constants (numbers, strings, global and field names) before it is
	// compiled: gopher-lua's compiler finds each constant by a linear
	// search, so a table of 50,000 numbers took 5.4 s to compile, all of
	// it before a call's deadline applies.
	MaxConstants int
}

// Load compiles the chunk read from r, named name (as in error messages),
// into a function of L whose environment is L's globals, as L.Load does.
func Load(L *lua.LState, r io.Reader, name string) (*lua.LFunction, error) {
	return LoadWith(L, r, name, Options{})
}

// LoadWith is Load with the rewrites o asks for.
func LoadWith(L *lua.LState, r io.Reader, name string, o Options) (*lua.LFunction, error) {
	proto, err := CompileWith(r, name, o)
	if err != nil {
		return nil, err
	}
	return L.NewFunctionFromProto(proto), nil
}

// Compile parses and compiles a chunk, with the rewrites above.
func Compile(r io.Reader, name string) (*lua.FunctionProto, error) {
	return CompileWith(r, name, Options{})
}

// CompileWith is Compile with the rewrites o asks for.
func CompileWith(r io.Reader, name string, o Options) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(r, name)
	if err != nil {
		return nil, &lua.ApiError{Type: lua.ApiErrorSyntax, Object: lua.LString(err.Error()), Cause: err}
	}
	w := &rewriter{concat: o.Concat, maxConsts: o.MaxConstants}
	w.function(func() { w.block(chunk) }, 1)
	if w.err != nil {
		return nil, &lua.ApiError{Type: lua.ApiErrorSyntax, Object: lua.LString(fmt.Sprintf("%s:%v", name, w.err)), Cause: w.err}
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, &lua.ApiError{Type: lua.ApiErrorSyntax, Object: lua.LString(err.Error()), Cause: err}
	}
	return proto, nil
}

// rewriter walks a chunk, rewriting its statements in place.
type rewriter struct {
	temps  int
	concat string // Options.Concat
	// maxConsts is Options.MaxConstants; consts the distinct constants of
	// the function being walked, err the first function past the bound.
	maxConsts int
	consts    map[any]bool
	err       error
}

// function walks one function's body (walk) with a count of its own
// constants, line its first line.
func (w *rewriter) function(walk func(), line int) {
	outer := w.consts
	w.consts = map[any]bool{}
	walk()
	if w.maxConsts > 0 && len(w.consts) > w.maxConsts && w.err == nil {
		w.err = fmt.Errorf("%d: a function with %d distinct constants, more than the %d a sandbox compiles (gopher-lua's compiler takes quadratic time in them): split it, or read the data from a file", line, len(w.consts), w.maxConsts)
	}
	w.consts = outer
}

// constant counts a constant of the function being walked.
func (w *rewriter) constant(v any) {
	if w.maxConsts > 0 {
		w.consts[v] = true
	}
}

// block rewrites a list of statements in place.
func (w *rewriter) block(stmts []ast.Stmt) {
	for i, s := range stmts {
		stmts[i] = w.stmt(s)
	}
}

// loopBody rewrites a loop's body and puts a local holding false first
// (LOADBOOL, which the compiler never merges with what precedes it).
func (w *rewriter) loopBody(stmts []ast.Stmt, line int) []ast.Stmt {
	w.block(stmts)
	first := &ast.LocalAssignStmt{Names: []string{"(loop)"}, Exprs: []ast.Expr{at(&ast.FalseExpr{}, line)}}
	first.SetLine(line)
	first.SetLastLine(line)
	return append([]ast.Stmt{first}, stmts...)
}

func (w *rewriter) stmt(s ast.Stmt) ast.Stmt {
	switch s := s.(type) {
	case *ast.AssignStmt:
		w.exprs(s.Lhs)
		w.exprs(s.Rhs)
		if len(s.Lhs) > 1 {
			return w.multipleAssign(s)
		}
	case *ast.LocalAssignStmt:
		w.exprs(s.Exprs)
	case *ast.FuncCallStmt:
		s.Expr = w.expr(s.Expr)
	case *ast.DoBlockStmt:
		w.block(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = w.expr(s.Condition)
		s.Stmts = w.loopBody(s.Stmts, s.Line())
	case *ast.RepeatStmt:
		s.Condition = w.expr(s.Condition)
		s.Stmts = w.loopBody(s.Stmts, s.Line())
	case *ast.IfStmt:
		s.Condition = w.expr(s.Condition)
		w.block(s.Then)
		w.block(s.Else)
	case *ast.NumberForStmt:
		s.Init, s.Limit, s.Step = w.expr(s.Init), w.expr(s.Limit), w.expr(s.Step)
		w.block(s.Stmts)
	case *ast.GenericForStmt:
		w.exprs(s.Exprs)
		s.Stmts = w.loopBody(s.Stmts, s.Line())
	case *ast.FuncDefStmt:
		s.Name.Func, s.Name.Receiver = w.expr(s.Name.Func), w.expr(s.Name.Receiver)
		w.expr(s.Func) // a FunctionExpr: rewritten in place
	case *ast.ReturnStmt:
		w.exprs(s.Exprs)
	}
	return s
}

func (w *rewriter) exprs(es []ast.Expr) {
	for i, e := range es {
		es[i] = w.expr(e)
	}
}

// expr rewrites e's parts (the functions defined inside it; with concat,
// its concatenations) and returns it, or what replaces it.
func (w *rewriter) expr(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.FunctionExpr:
		w.function(func() { w.block(e.Stmts) }, e.Line())
	case *ast.NumberExpr:
		w.constant(e.Value) // its source text: 1 and 1.0 count twice (over, not under)
	case *ast.StringExpr:
		w.constant("s" + e.Value)
	case *ast.IdentExpr:
		w.constant("s" + e.Value) // a global's name (a local's too: few)
	case *ast.AttrGetExpr:
		e.Object, e.Key = w.expr(e.Object), w.expr(e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			f.Key, f.Value = w.expr(f.Key), w.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		e.Func, e.Receiver = w.expr(e.Func), w.expr(e.Receiver)
		w.exprs(e.Args)
		if e.Method != "" {
			w.constant("s" + e.Method)
		}
	case *ast.LogicalOpExpr:
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.StringConcatOpExpr:
		if w.concat != "" {
			return w.concatCall(e)
		}
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		e.Expr = w.expr(e.Expr)
	}
	return e
}

// concatCall is a chain a .. b .. c (right-nested in the tree) as the
// call concat(a, b, c), its operands rewritten in turn, one result
// (AdjustRet: as the VM's concatenation, never a tail call).
func (w *rewriter) concatCall(e *ast.StringConcatOpExpr) ast.Expr {
	var args []ast.Expr
	var x ast.Expr = e
	for {
		c, ok := x.(*ast.StringConcatOpExpr)
		if !ok {
			break
		}
		args = append(args, w.expr(c.Lhs))
		x = c.Rhs
	}
	args = append(args, w.expr(x))
	call := &ast.FuncCallExpr{Func: at(&ast.IdentExpr{Value: w.concat}, e.Line()), Args: args, AdjustRet: true}
	call.SetLine(e.Line())
	call.SetLastLine(e.LastLine())
	return call
}

// multipleAssign rewrites "t1, t2, ... = e1, e2, ..." as
//
//	do
//	  local o, k = obj, key         -- the targets' tables and keys
//	  local v1, v2, ... = e1, e2, ...
//	  tn = vn ... t1 = v1           -- right to left, as Lua 5.1 assigns
//	end
//
// A target's table or key is held first only when it is more than a
// constant or a name this statement does not assign (a name keeps its
// value until the assignments, and error messages keep its name).
func (w *rewriter) multipleAssign(s *ast.AssignStmt) ast.Stmt {
	line := s.Line()
	assigned := map[string]bool{}
	for _, t := range s.Lhs {
		if id, ok := t.(*ast.IdentExpr); ok {
			assigned[id.Value] = true
		}
	}
	steady := func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.IdentExpr:
			return !assigned[e.Value]
		case *ast.StringExpr, *ast.NumberExpr, *ast.TrueExpr, *ast.FalseExpr:
			return true
		}
		return false
	}
	hold := &ast.LocalAssignStmt{}
	held := func(e ast.Expr) ast.Expr {
		if steady(e) {
			return e
		}
		name := w.temp()
		hold.Names = append(hold.Names, name)
		hold.Exprs = append(hold.Exprs, e)
		return at(&ast.IdentExpr{Value: name}, line)
	}
	targets := make([]ast.Expr, len(s.Lhs))
	for i, t := range s.Lhs {
		targets[i] = t
		if get, ok := t.(*ast.AttrGetExpr); ok {
			targets[i] = at(&ast.AttrGetExpr{Object: held(get.Object), Key: held(get.Key)}, line)
		}
	}
	values := &ast.LocalAssignStmt{Exprs: s.Rhs}
	for range max(len(s.Lhs), len(s.Rhs)) {
		values.Names = append(values.Names, w.temp())
	}
	var body []ast.Stmt
	if len(hold.Names) > 0 {
		body = append(body, stmtAt(hold, line))
	}
	body = append(body, stmtAt(values, line))
	for i := len(targets) - 1; i >= 0; i-- {
		value := at(&ast.IdentExpr{Value: values.Names[i]}, line)
		body = append(body, stmtAt(&ast.AssignStmt{Lhs: []ast.Expr{targets[i]}, Rhs: []ast.Expr{value}}, line))
	}
	return stmtAt(&ast.DoBlockStmt{Stmts: body}, line)
}

// temp is a new local's name, one no Lua source can spell.
func (w *rewriter) temp() string {
	w.temps++
	return fmt.Sprintf("(assign %d)", w.temps)
}

func at[E ast.Expr](e E, line int) E {
	e.SetLine(line)
	e.SetLastLine(line)
	return e
}

func stmtAt[S ast.Stmt](s S, line int) S {
	s.SetLine(line)
	s.SetLastLine(line)
	return s
}
