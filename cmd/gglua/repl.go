package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/chzyer/readline"
	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/runtime"
)

const (
	prompt     = "gglua> "
	contPrompt = "...> "
)

// repl evaluates chunks typed (or piped) one line at a time. A line that
// leaves the chunk incomplete (a syntax error at EOF) continues it; an
// expression prints its values; a trailing ';' keeps it quiet.
type repl struct {
	rt      *runtime.Runtime
	out     io.Writer
	errOut  io.Writer // where errors go: the terminal, or stderr when piped
	pending []string
	timing  bool
	failed  bool
}

// result of feeding one line.
type fed int

const (
	needMore fed = iota // the chunk is incomplete
	ran                 // a chunk ran (or failed)
	empty               // nothing to do
)

// feed takes one line; when it completes a chunk the chunk runs, and feed
// returns ran with the chunk's text (for the history).
func (r *repl) feed(ctx context.Context, line string) (fed, string) {
	if len(r.pending) == 0 {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			return empty, ""
		case trimmed == ":time":
			r.timing = !r.timing
			fmt.Fprintf(r.out, "timing %s\n", map[bool]string{true: "on", false: "off"}[r.timing])
			return ran, trimmed
		case strings.HasPrefix(trimmed, "="):
			line = "return " + trimmed[1:]
		}
	}
	chunk := strings.Join(append(r.pending, line), "\n")
	quiet := strings.HasSuffix(strings.TrimSpace(chunk), ";")
	var fn *lua.LFunction
	var exprErr, err error
	if !quiet {
		fn, exprErr = r.rt.Load(strings.NewReader("return "+chunk), "stdin")
	}
	if fn == nil {
		fn, err = r.rt.Load(strings.NewReader(chunk), "stdin")
	}
	if err != nil {
		// Incomplete as an expression or as a statement: keep reading.
		if strings.Contains(err.Error(), "at EOF") || exprErr != nil && strings.Contains(exprErr.Error(), "at EOF") {
			r.pending = append(r.pending, line)
			return needMore, ""
		}
		r.pending = nil
		r.fail(err)
		return ran, chunk
	}
	r.pending = nil
	r.run(ctx, fn, quiet)
	return ran, chunk
}

func (r *repl) fail(err error) {
	r.failed = true
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) {
		fmt.Fprintln(r.errOut, apiErr.Object.String())
		return
	}
	fmt.Fprintln(r.errOut, err.Error())
}

// run calls fn, printing its results unless quiet. Ctrl-C cancels it.
func (r *repl) run(ctx context.Context, fn *lua.LFunction, quiet bool) {
	ctx, stop := interruptContext(ctx, r.errOut) // a second Ctrl-C quits a stuck line
	defer stop()
	L := r.rt.L
	L.SetContext(ctx)
	defer L.RemoveContext()
	start := time.Now()
	base := L.GetTop()
	L.Push(fn)
	err := L.PCall(0, lua.MultRet, nil)
	if err == nil {
		// As a runtime call ends (runtime's call): the sums a backward left
		// for the next compute run now, as the other processes' will.
		err = r.rt.Engine().FinishCollectives()
	}
	if err != nil {
		L.SetTop(base)
		r.fail(err)
	} else {
		if !quiet {
			var parts []string
			var showErr error
			for i := base + 1; i <= L.GetTop() && showErr == nil; i++ {
				var s string
				s, showErr = showProtected(L, L.Get(i))
				parts = append(parts, s)
			}
			if showErr != nil {
				r.fail(fmt.Errorf("printing the result: %w", showErr))
			} else if len(parts) > 0 {
				fmt.Fprintln(r.out, strings.Join(parts, "\t"))
			}
		}
		L.SetTop(base)
	}
	if r.timing {
		fmt.Fprintf(r.out, "(%.3f ms)\n", float64(time.Since(start).Microseconds())/1000)
	}
}

// showProtected is show run as a protected call: a __tostring that raises
// (or is cancelled with the line) is an error the REPL prints, not a Go
// panic that ends it.
func showProtected(L *lua.LState, v lua.LValue) (string, error) {
	var out string
	err := L.CallByParam(lua.P{Fn: L.NewFunction(func(L *lua.LState) int {
		out = show(L, v)
		return 0
	}), NRet: 0, Protect: true})
	return out, err
}

// show formats a value: tensors as tostring does, tables of tensors as a
// summary of their entries, everything else as Lua's tostring.
func show(L *lua.LState, v lua.LValue) string {
	tbl, ok := v.(*lua.LTable)
	if !ok || L.GetMetaField(tbl, "__tostring") != lua.LNil {
		return L.ToStringMeta(v).String()
	}
	var entries []string
	hasTensor := false
	tbl.ForEach(func(k, val lua.LValue) {
		s := L.ToStringMeta(val).String()
		if ud, ok := val.(*lua.LUserData); ok && ud.Value != nil {
			if i := strings.LastIndex(s, "\n"); i >= 0 {
				s = s[i+1:] // the footer: [tensor f32 2x3 cpu pass]
			}
			hasTensor = true
		}
		entries = append(entries, fmt.Sprintf("%s = %s", k.String(), s))
	})
	if !hasTensor {
		return L.ToStringMeta(v).String()
	}
	sort.Strings(entries)
	if len(entries) > 20 {
		entries = append(entries[:20], fmt.Sprintf("... (%d more)", len(entries)-20))
	}
	return "{\n  " + strings.Join(entries, ",\n  ") + "\n}"
}

// historyPath is GGLUA_HISTORY or ~/.gglua_history; "" (no history) when
// that names something other than a regular file: opening a FIFO would
// block the REPL before its first prompt.
func historyPath() string {
	p := os.Getenv("GGLUA_HISTORY")
	if p == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		p = filepath.Join(home, ".gglua_history")
	}
	if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
		fmt.Fprintf(os.Stderr, "gglua: %s is not a regular file: no history kept\n", p)
		return ""
	}
	return p
}

// interactive runs the REPL on a terminal with line editing, history and
// completion. Ctrl-C drops the pending chunk; Ctrl-D exits.
func (r *repl) interactive(ctx context.Context, stdin io.ReadCloser, stdout io.Writer) error {
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 prompt,
		HistoryFile:            historyPath(),
		DisableAutoSaveHistory: true,
		AutoComplete:           completer{L: r.rt.L},
		InterruptPrompt:        "^C",
		EOFPrompt:              "",
		Stdin:                  dropNUL{stdin},
		Stdout:                 stdout,
	})
	if err != nil {
		return err
	}
	defer rl.Close()
	r.out, r.errOut = rl.Stdout(), rl.Stdout()
	fmt.Fprintf(r.out, "gglua %s on %s. Expressions print; ';' keeps quiet; :time toggles timing; Ctrl-D exits.\n", Version, r.rt.Engine().DeviceName())
	for {
		line, err := rl.Readline()
		if errors.Is(err, readline.ErrInterrupt) {
			r.pending = nil
			rl.SetPrompt(prompt)
			continue
		}
		if errors.Is(err, io.EOF) { // Ctrl-D on an empty line, or the terminal closed
			return nil
		}
		if err != nil {
			return err
		}
		status, chunk := r.feed(ctx, line)
		if status == ran && chunk != "" {
			rl.SaveHistory(strings.ReplaceAll(chunk, "\n", " "))
		}
		if status == needMore {
			rl.SetPrompt(contPrompt)
		} else {
			rl.SetPrompt(prompt)
		}
	}
}

// dropNUL reads the terminal without its NUL bytes. readline takes a NUL
// rune (Ctrl-Space, Ctrl-@) for the end of its input and stops reading for
// good: Readline then returns io.EOF and Close waits forever for a reader
// blocked on the terminal. No UTF-8 text holds a zero byte, so nothing
// typed is lost.
type dropNUL struct{ r io.ReadCloser }

func (d dropNUL) Read(p []byte) (int, error) {
	for {
		n, err := d.r.Read(p)
		k := 0
		for _, b := range p[:n] {
			if b != 0 {
				p[k] = b
				k++
			}
		}
		if k > 0 || n == 0 || err != nil {
			return k, err
		}
		// Only NULs: read on rather than return 0 bytes and no error.
	}
}

func (d dropNUL) Close() error { return d.r.Close() }

// piped evaluates chunks from a non-terminal input: no prompts, no escape
// codes. It reports whether any chunk failed.
func (r *repl) piped(ctx context.Context, in io.Reader) bool {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		r.feed(ctx, sc.Text())
	}
	if len(r.pending) > 0 { // input ended inside a chunk: run it for its error
		chunk := strings.Join(r.pending, "\n")
		r.pending = nil
		if _, err := r.rt.Load(strings.NewReader(chunk), "stdin"); err != nil {
			r.fail(err)
		}
	}
	return r.failed
}
