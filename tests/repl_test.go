package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// terminal drives gglua through a real pseudo-terminal and reads what it
// shows, escape codes removed.
type terminal struct {
	t    *testing.T
	f    *os.File
	cmd  *exec.Cmd
	mu   sync.Mutex
	buf  bytes.Buffer
	seen int // expect looks past this offset
	done chan struct{}
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\r`)

func startTerminal(t *testing.T, env ...string) *terminal {
	t.Helper()
	if testing.Short() {
		t.Skip("-short skips the REPL's pseudo-terminal tests (make test runs them)")
	}
	cmd := exec.Command(gglua, "--threads", "1")
	cmd.Env = append(os.Environ(), env...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	require.NoError(t, err)
	term := &terminal{t: t, f: f, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			term.mu.Lock()
			term.buf.Write(b[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		f.Close()
	})
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return ansi.ReplaceAllString(term.buf.String(), "")
}

// expect waits until want appears after what earlier expects consumed.
func (term *terminal) expect(want string) {
	term.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s := term.screen()
		if i := strings.Index(s[min(term.seen, len(s)):], want); i >= 0 {
			term.seen += i + len(want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	term.t.Fatalf("%q never appeared; the screen shows:\n%s", want, term.screen()[min(term.seen, len(term.screen())):])
}

func (term *terminal) send(keys string) {
	_, err := term.f.Write([]byte(keys))
	require.NoError(term.t, err)
	time.Sleep(30 * time.Millisecond)
}

func TestREPLThroughAPseudoTerminal(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "history")
	term := startTerminal(t, "GGLUA_HISTORY="+hist)
	term.expect("gglua> ")

	// Auto-print of expressions; ';' keeps quiet.
	term.send("x = tensor{1, 2, 3}\r")
	term.expect("gglua> ")
	term.send("x:sum()\r")
	term.expect("[6]")
	term.expect("[tensor f32 1 cpu pass]")
	term.send("=x:numel() * 2\r")
	term.expect("6")
	term.send("y = 7;\r")
	term.expect("gglua> ")

	// A multi-line function: a continued chunk gets the other prompt.
	term.send("function f(a)\r")
	term.expect("...> ")
	term.send("return a * 2\r")
	term.expect("...> ")
	term.send("end\r")
	term.expect("gglua> ")
	term.send("f(21)\r")
	term.expect("42")

	// An error prints and the session goes on.
	term.send("error('boom')\r")
	term.expect("boom")
	term.send("1 + 1\r")
	term.expect("2")

	// Completion of globals, fields after '.', methods after ':'.
	term.send("resid\t")
	term.expect("residency")
	term.send(".st\t")
	term.expect("stats")
	term.send("().pass_gen\r")
	term.expect("0")
	term.send("x:num\t")
	term.expect("numel")
	term.send("()\r")
	term.expect("3")

	// Ctrl-C drops the pending chunk.
	term.send("function g(\r")
	term.expect("...> ")
	term.send("\x03")
	term.expect("gglua> ")
	term.send("40 + 2\r")
	term.expect("42")

	// Ctrl-D exits, cleanly.
	term.send("\x04")
	select {
	case <-term.done:
	case <-time.After(10 * time.Second):
		t.Fatal("gglua did not exit on Ctrl-D")
	}
	require.NoError(t, term.cmd.Wait())

	// One history entry per complete chunk.
	data, err := os.ReadFile(hist)
	require.NoError(t, err)
	h := string(data)
	assert.Contains(t, h, "x:sum()\n")
	assert.Contains(t, h, "function f(a) return a * 2 end\n")
	assert.NotContains(t, h, "function g(")
}

// GGLUA_HISTORY naming a FIFO: the REPL says it keeps no history and
// prompts (opening the FIFO blocked it before its first prompt).
func TestREPLHistoryFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "history")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	term := startTerminal(t, "GGLUA_HISTORY="+fifo)
	term.expect("no history kept")
	term.expect("gglua> ")
	term.send("1 + 1\r")
	term.expect("2")
}

func TestREPLTiming(t *testing.T) {
	term := startTerminal(t, "GGLUA_HISTORY="+filepath.Join(t.TempDir(), "h"))
	term.expect("gglua> ")
	term.send(":time\r")
	term.expect("timing on")
	term.send("1\r")
	term.expect(" ms)")
}

func TestREPLPipedInput(t *testing.T) {
	out, errOut, code := runCLI(t, "x = 20\nfunction f(a)\n  return a + 1\nend\n=f(x)\nerror('late')\n1 + \n 2\n")
	assert.Equal(t, 1, code, "a chunk failed")
	assert.Equal(t, "21\n3\n", out)
	assert.Contains(t, errOut, "stdin:1: late")
	assert.NotContains(t, out, "gglua>", "no prompts when piped")
	out, _, code = runCLI(t, "print('fine')\n")
	assert.Equal(t, 0, code)
	assert.Equal(t, "fine\n", out)
}

// A result whose __tostring raises is an error the REPL prints, and the
// session goes on (it was a Go panic that ended gglua).
func TestREPLResultWhoseTostringRaises(t *testing.T) {
	out, errOut, code := runCLI(t, "x = setmetatable({}, {__tostring = function() error('boom') end})\nx\n{x}\nprint('after')\n")
	assert.Equal(t, 1, code, "the failed lines count as failures")
	assert.Contains(t, errOut, "boom")
	assert.NotContains(t, errOut, "panic")
	assert.NotContains(t, errOut, "goroutine")
	assert.Equal(t, "after\n", out)
}

func TestInteractiveAfterScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.lua")
	require.NoError(t, os.WriteFile(script, []byte("answer = 41\n"), 0o644))
	out, _, code := runCLI(t, "answer + 1\n", "-i", script)
	assert.Equal(t, 0, code)
	assert.Equal(t, "42\n", out)
}

func TestREPLCtrlCStopsARunningChunk(t *testing.T) {
	term := startTerminal(t, "GGLUA_HISTORY="+filepath.Join(t.TempDir(), "h"))
	term.expect("gglua> ")
	term.send("while true do end\r")
	time.Sleep(200 * time.Millisecond)
	term.send("\x03")
	term.expect("gglua> ")
	term.send("6 * 7\r")
	term.expect("42")
}

// TestREPLControlCharacters: no key ends or wedges a session. A NUL byte
// (Ctrl-Space, Ctrl-@) used to read as the end of input: the REPL left its
// loop and then hung closing the terminal.
func TestREPLControlCharacters(t *testing.T) {
	term := startTerminal(t, "GGLUA_HISTORY="+filepath.Join(t.TempDir(), "h"))
	term.expect("gglua> ")

	// NUL alone, then a line.
	term.send("\x00")
	term.send("1 + 1\r")
	term.expect("2")
	term.expect("gglua> ")
	// NUL inside a line is dropped.
	term.send("10 +\x00 5\r")
	term.expect("15")
	term.expect("gglua> ")

	// Ctrl-A on an empty line, a lone Escape, an unknown escape sequence.
	term.send("\x01")
	term.send("2 + 2\r")
	term.expect("4")
	term.send("\x1b")
	time.Sleep(100 * time.Millisecond)
	term.send("3 + 3\r")
	term.expect("6")
	term.send("\x1b[99~\x1bOZ")
	term.send("4 + 4\r")
	term.expect("8")

	// Every other control key (not Tab, Enter, Ctrl-C, Ctrl-D, Ctrl-R,
	// Ctrl-S, Ctrl-Z) in one burst, with NULs between; Ctrl-C then drops
	// whatever the editing keys left on the line.
	var burst strings.Builder
	for c := byte(0); c < 0x20; c++ {
		switch c {
		case '\t', '\n', '\r', 0x03, 0x04, 0x12, 0x13, 0x1a:
			continue
		}
		burst.WriteByte(c)
		burst.WriteByte(0)
	}
	burst.WriteByte(0x7f)
	term.send(burst.String())
	term.send("\x03")
	term.expect("gglua> ")
	term.send("6 * 7\r")
	term.expect("42")

	// Ctrl-D still exits, cleanly.
	term.send("\x04")
	select {
	case <-term.done:
	case <-time.After(10 * time.Second):
		t.Fatal("gglua did not exit on Ctrl-D")
	}
	require.NoError(t, term.cmd.Wait())
}
