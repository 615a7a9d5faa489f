package tests

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var gglua string // the binary under test, built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gglua-cli")
	if err != nil {
		panic(err)
	}
	gglua = filepath.Join(dir, "gglua")
	build := exec.Command("go", "build", "-o", gglua, "../cmd/gglua")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building gglua: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runCLI runs gglua with args and returns stdout, stderr and the exit status.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(gglua, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), exitCode(t, err)
}

// exitCode is the exit status a finished command's error carries (0 for
// none); any other error fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func TestCLIFirstEndToEndPath(t *testing.T) {
	out, _, code := runCLI(t, "", "-e", `print(to_gpu(tensor{{1,2},{3,4}}, "persistent"):scope())`)
	assert.Equal(t, 0, code)
	assert.Equal(t, "persistent\n", out)
}

func TestCLIScriptGetsArgsAndErrorsGiveFileLine(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.lua")
	require.NoError(t, os.WriteFile(script, []byte("print(arg[0], arg[1], arg[2])\nlocal x = tensor{{1,2},{3}}\n"), 0o644))
	out, errOut, code := runCLI(t, "", script, "a", "b")
	assert.Equal(t, script+"\ta\tb\n", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, script+":2: tensor: ragged table")
	assert.Contains(t, errOut, "stack traceback")
}

func TestCLIMemLimitIsTheBudget(t *testing.T) {
	_, errOut, code := runCLI(t, "", "--mem-limit", "1MiB", "-e", "to_gpu(tensor.zeros(1024, 1024))")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "budget exceeded")
	out, _, code := runCLI(t, "", "--mem-limit", "2MiB", "-e", "print(residency.limit())")
	assert.Equal(t, 0, code)
	assert.Equal(t, "2097152\n", out)
	_, errOut, code = runCLI(t, "", "--mem-limit", "lots", "-e", "")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "bad size")
}

func TestCLIDevicesVersionAndPipedCode(t *testing.T) {
	out, _, code := runCLI(t, "", "devices")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "cpu")
	out, _, code = runCLI(t, "", "--version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "gglua ")
	out, _, code = runCLI(t, "print(tensor{1,2,3}:numel())\n")
	assert.Equal(t, 0, code)
	assert.Equal(t, "3\n", out)
	_, errOut, code := runCLI(t, "", "--device", "tpu", "-e", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `device "tpu" is not available`)
}

// TestCLIReportsSlowKernels: a build without SIMD flags says so on stderr,
// a fast one only with --verbose.
func TestCLIReportsSlowKernels(t *testing.T) {
	_, quiet, _ := runCLI(t, "", "-e", "")
	_, verbose, _ := runCLI(t, "", "--verbose", "-e", "")
	assert.Contains(t, verbose, "ggml CPU kernels compiled with:")
	if strings.Contains(verbose, "avx2") {
		assert.Empty(t, quiet)
	} else {
		assert.Contains(t, quiet, "slow portable kernels")
	}
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startScript starts gglua -e code with stdin held open (a pipe nobody
// writes) and waits until the script printed "ready", so that its Ctrl-C
// handler is in place. It returns the command, its stderr and a channel
// that receives its exit.
func startScript(t *testing.T, code string) (*exec.Cmd, *lockedBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(gglua, "-e", code)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { stdin.Close() })
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errOut := &lockedBuffer{}
	cmd.Stderr = errOut
	require.NoError(t, cmd.Start())
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line == "ready\n"
		io.Copy(io.Discard, stdout)
	}()
	exited := make(chan error, 1)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case ok := <-ready:
		require.True(t, ok, "the script did not print ready; stderr: %s", errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the script did not start; stderr: %s", errOut.String())
	}
	go func() { exited <- cmd.Wait() }()
	return cmd, errOut, exited
}

// waitExit waits up to d for the process to end and returns its exit code
// (-1 when a signal killed it).
func waitExit(t *testing.T, cmd *exec.Cmd, exited chan error, d time.Duration, errOut *lockedBuffer) int {
	t.Helper()
	select {
	case err := <-exited:
		return exitCode(t, err)
	case <-time.After(d):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("gglua still ran %v after Ctrl-C; stderr: %s", d, errOut.String())
		return 0
	}
}

// TestCLICtrlCStopsAScript: the first Ctrl-C cancels a running script (the
// Lua VM watches the context), which ends with an error, without the hint.
func TestCLICtrlCStopsAScript(t *testing.T) {
	cmd, errOut, exited := startScript(t, `print("ready") while true do end`)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	code := waitExit(t, cmd, exited, 20*time.Second, errOut)
	assert.Equal(t, 1, code, errOut.String())
	assert.Contains(t, errOut.String(), "context canceled")
	assert.NotContains(t, errOut.String(), "Ctrl-C again")
}

// TestCLISecondCtrlCEndsAStuckScript: a script blocked in Go code that does
// not watch the context (here a read from a pipe nobody writes) ignored every
// Ctrl-C: the handler cancelled the context and kept swallowing the signal.
// Now the command says, after a second, that a second Ctrl-C quits, and the
// second ends the process with status 130 (issue [11] #9). Under heavy load
// a signal can take long to act, so Ctrl-C is pressed again every few
// seconds until the process ends; it must end with 130.
func TestCLISecondCtrlCEndsAStuckScript(t *testing.T) {
	for attempt := 1; ; attempt++ {
		cmd, errOut, exited := startScript(t, `print("ready") io.read("*l") print("read returned")`)
		// "ready" comes just before the read: a Ctrl-C that lands between
		// the two is seen by the VM and ends the script at once (status 1),
		// which is right but not this test's case; so wait, and try again.
		time.Sleep(time.Duration(attempt) * 300 * time.Millisecond)
		deadline := time.After(60 * time.Second)
		for presses := 1; ; presses++ {
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
			select {
			case err := <-exited:
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "stderr: %s", errOut.String())
				if presses == 1 && attempt < 3 && strings.Contains(errOut.String(), "context canceled") {
					goto again // the Ctrl-C came before the read
				}
				assert.Equal(t, 130, ee.ExitCode(), errOut.String())
				assert.Contains(t, errOut.String(), "gglua: interrupted\n")
				assert.GreaterOrEqual(t, presses, 2, "one Ctrl-C cannot end a call that does not watch the context")
				if presses == 2 {
					assert.Contains(t, errOut.String(), "Ctrl-C again", "the hint came before the second Ctrl-C")
				}
				return
			case <-time.After(3 * time.Second):
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("gglua still ran a minute after the first Ctrl-C; stderr: %s", errOut.String())
			}
		}
	again:
	}
}
