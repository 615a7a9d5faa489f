package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gglua/gglua/dist"
)

// gglua --nproc N [flags] script.lua [args...] starts N copies of gglua
// on this host, one per GPU, with torchrun's variables set for each (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT): the
// processes meet through dist.init(). Each output line is prefixed with
// "[rank] ". When one process fails the launcher stops the others and
// exits with the failed one's status: a job never waits on a dead rank.

// valueFlags are gglua's flags that take the next argument as their value
// (unless written -flag=value).
var valueFlags = map[string]bool{"e": true, "device": true, "threads": true, "mem-limit": true, "nproc": true}

// splitNproc finds --nproc among the flags before the script and returns
// its value and the arguments without it; found is false when it is not
// there (a plain run).
func splitNproc(args []string) (n int, rest []string, found bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break // the script and its arguments
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "nproc" {
			if valueFlags[name] && !hasValue {
				i++
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return 0, nil, true, fmt.Errorf("--nproc needs a number of processes")
			}
			value = args[i+1]
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return 0, nil, true, fmt.Errorf("--nproc %q: expected a number of processes >= 1", value)
		}
		rest = append(rest, args[:i]...)
		if hasValue {
			rest = append(rest, args[i+1:]...)
		} else {
			rest = append(rest, args[i+2:]...)
		}
		return n, rest, true, nil
	}
	return 0, args, false, nil
}

// childDevice is the --device a child gets: "cuda" (or "gpu") becomes
// CUDA<local rank>, the local rank-th device CUDA_VISIBLE_DEVICES leaves
// visible (unset: all); any other value is kept.
func childDevices(args []string, rank int) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && valueFlags[name] && i+1 < len(out) {
			i++
			value = out[i]
		}
		if name == "device" && (strings.EqualFold(value, "cuda") || strings.EqualFold(value, "gpu")) {
			if hasValue {
				out[i] = "--device=CUDA" + strconv.Itoa(rank)
			} else {
				out[i] = "CUDA" + strconv.Itoa(rank)
			}
		}
	}
	return out
}

// freePort is a TCP port nothing listens on now (the kernel's choice).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// launch runs n children of this executable with args and returns the
// exit status of the job.
func launch(n int, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "gglua --nproc: %v\n", err)
		return 1
	}
	port, err := freePort()
	if err != nil {
		fmt.Fprintf(stderr, "gglua --nproc: no free port for the rendezvous: %v\n", err)
		return 1
	}
	// The job's secret, which the children prove to one another at the
	// rendezvous (dist/rendezvous.go); one the user set is inherited.
	secret := os.Getenv("GGLUA_DIST_SECRET")
	if strings.TrimSpace(secret) == "" && os.Getenv("GGLUA_DIST_SECRET_FILE") == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			fmt.Fprintf(stderr, "gglua --nproc: no secret for the rendezvous: %v\n", err)
			return 1
		}
		secret = hex.EncodeToString(b)
	}
	var outMu sync.Mutex // one line at a time, whole
	children := make([]*exec.Cmd, n)
	// Each child's output is read to its end before its Wait, which closes
	// the pipes: waiting first could lose its last lines (its error).
	copiers := make([]sync.WaitGroup, n)
	for r := range n {
		cmd := exec.Command(exe, childDevices(args, r)...)
		// Its own process group: a terminal's Ctrl-C reaches the launcher
		// alone, which passes it on once.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "GGLUA_DIST_SECRET="+secret)
		for _, p := range []struct {
			w      io.Writer
			stream func() (io.ReadCloser, error)
		}{{stdout, cmd.StdoutPipe}, {stderr, cmd.StderrPipe}} {
			pipe, err := p.stream()
			if err != nil {
				fmt.Fprintf(stderr, "gglua --nproc: %v\n", err)
				return 1
			}
			copiers[r].Add(1)
			go prefixLines(pipe, p.w, fmt.Sprintf("[%d] ", r), &outMu, &copiers[r])
		}
		if err := cmd.Start(); err != nil {
			stopAll(children)
			fmt.Fprintf(stderr, "gglua --nproc: starting rank %d: %v\n", r, err)
			return 1
		}
		children[r] = cmd
	}
	// A Ctrl-C or a TERM to the launcher is passed on to every child.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			for _, c := range children {
				c.Process.Signal(s)
			}
		}
	}()

	type exit struct{ rank, code int }
	exits := make(chan exit, n)
	for r, c := range children {
		go func() {
			copiers[r].Wait()
			c.Wait()
			exits <- exit{r, c.ProcessState.ExitCode()}
		}()
	}
	status := 0
	for range n {
		e := <-exits
		if e.code != 0 && status == 0 {
			status = e.code
			if status < 0 { // killed by a signal
				status = 1
			}
			outMu.Lock()
			fmt.Fprintf(stderr, "gglua --nproc: rank %d exited with status %d; stopping the other processes\n", e.rank, e.code)
			outMu.Unlock()
			stopAll(children)
		}
	}
	return status
}

// stopAll ends the children still running: TERM, then KILL after a grace
// period (a rank blocked in a collective may not see the TERM promptly).
func stopAll(children []*exec.Cmd) {
	for _, c := range children {
		if c != nil && c.Process != nil {
			c.Process.Signal(syscall.SIGTERM) // os.ErrProcessDone once it has exited: fine
		}
	}
	go func() {
		time.Sleep(5 * time.Second)
		for _, c := range children {
			if c != nil && c.Process != nil {
				c.Process.Kill()
			}
		}
	}()
}

// prefixLines copies r to w line by line, each prefixed.
func prefixLines(r io.Reader, w io.Writer, prefix string, mu *sync.Mutex, wg *sync.WaitGroup) {
	defer wg.Done()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			mu.Lock()
			io.WriteString(w, prefix+line)
			mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// finishDist ends this process's part of a distributed job (dist.init) as
// the script ended: normally after a success, by aborting after a failure
// so that the other processes stop instead of waiting for this one.
func finishDist(code int) int {
	if err := dist.Shutdown(code == 0); err != nil {
		fmt.Fprintf(os.Stderr, "gglua: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
