// Command gglua runs Lua scripts of tensor programs on ggml.
//
//	gglua [flags] [script.lua [args...]]
//	gglua -e 'print(to_gpu(tensor{{1,2},{3,4}}, "persistent"):scope())'
//	gglua devices
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/ggmlcgo"
	"github.com/gglua/gglua/runtime"
)

// Version is the gglua release.
const Version = "0.1.0-dev"

func main() {
	if n, rest, ok, err := splitNproc(os.Args[1:]); ok { // launch.go
		if err != nil {
			fmt.Fprintf(os.Stderr, "gglua: %v\n", err)
			os.Exit(2)
		}
		os.Exit(launch(n, rest, os.Stdout, os.Stderr))
	}
	stop := startProfiles(os.Stderr) // profile.go
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(finishDist(code))
}

type cliFlags struct {
	exec     string
	device   string
	threads  int
	memLimit string
	verbose  bool
	version  bool
	inter    bool
}

func parseFlags(args []string, stderr io.Writer) (*cliFlags, []string, error) {
	f := &cliFlags{}
	fs := flag.NewFlagSet("gglua", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.exec, "e", "", "run the Lua `code` (before the script, if one is given)")
	fs.StringVar(&f.device, "device", "cpu", "compute device: cpu, cuda, auto or a ggml device name")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (default: one per core)")
	fs.StringVar(&f.memLimit, "mem-limit", "", "residency budget, e.g. 2GiB or 512MB (default: none)")
	fs.BoolVar(&f.verbose, "verbose", false, "report the CPU features ggml was compiled with")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.BoolVar(&f.inter, "i", false, "enter the REPL after running the script")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: gglua [flags] [script.lua [args...]]\n       gglua devices\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	return f, fs.Args(), nil
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, rest, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.version {
		fmt.Fprintf(stdout, "gglua %s (ggml from github.com/ollama/ollama v0.24.0, %s, cpu features: %s)\n",
			Version, goruntime.Version(), cpuFeatures())
		return 0
	}
	if wantsPlot(rest) {
		return plotMain(rest[1:], stdout, stderr) // gglua plot RUN (plot.go)
	}
	reportKernels(f.verbose, stderr)
	if len(rest) > 0 && rest[0] == "devices" {
		if _, err := os.Stat("devices"); err != nil { // a script named "devices" still runs
			return listDevices(f, stdout, stderr)
		}
	}
	limit, err := parseBytes(f.memLimit)
	if err != nil {
		fmt.Fprintf(stderr, "gglua: --mem-limit: %v\n", err)
		return 2
	}
	rt, err := runtime.New(runtime.Options{Device: f.device, Threads: f.threads, MemLimit: limit, Stdout: stdout, Stderr: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "gglua: %v\n", err)
		return 1
	}
	defer rt.Close()

	ctx := context.Background()
	if f.exec != "" {
		if _, err := runInterruptible(ctx, stderr, func(ctx context.Context) ([]any, error) { return rt.DoString(ctx, f.exec) }); err != nil {
			return reportError(stderr, err)
		}
	}
	if len(rest) > 0 {
		if _, err := runInterruptible(ctx, stderr, func(ctx context.Context) ([]any, error) { return rt.DoFile(ctx, rest[0], rest[1:]...) }); err != nil {
			code := reportError(stderr, err)
			if !f.inter {
				return code
			}
		}
		if !f.inter {
			return 0
		}
	} else if f.exec != "" && !f.inter {
		return 0
	}
	r := &repl{rt: rt, out: stdout, errOut: stderr}
	if isTerminal(stdin) {
		if in, ok := stdin.(*os.File); ok {
			if err := r.interactive(ctx, in, stdout); err != nil {
				fmt.Fprintf(stderr, "gglua: %v\n", err)
				return 1
			}
			return 0
		}
	}
	if r.piped(ctx, stdin) {
		return 1
	}
	return 0
}

// runInterruptible runs f with a context that Ctrl-C cancels.
func runInterruptible(ctx context.Context, stderr io.Writer, f func(context.Context) ([]any, error)) ([]any, error) {
	ctx, stop := interruptContext(ctx, stderr)
	defer stop()
	return f(ctx)
}

// interruptHintAfter is how long a script may take to stop after a Ctrl-C
// before the command says that a second one quits.
const interruptHintAfter = time.Second

// interruptContext returns a context that the first Ctrl-C (SIGINT)
// cancels: the Lua VM stops at its next instruction and a graph between two
// nodes, and the script ends with an error. A script stuck in a call that
// does not watch the context (a read from a pipe or a terminal, a blocking
// system call) would not end that way, and signal.NotifyContext alone would
// keep swallowing every later Ctrl-C; so a second Ctrl-C ends the process
// at once (exit status 130, as a shell reports a SIGINT), and when the
// script has not stopped a second after the first, stderr says so. stop
// hands SIGINT back to its default (ending the process).
func interruptContext(parent context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
		case <-done:
			return
		}
		cancel()
		hint := time.NewTimer(interruptHintAfter)
		defer hint.Stop()
		for {
			select {
			case <-sig:
				fmt.Fprintln(stderr, "gglua: interrupted")
				os.Exit(130)
			case <-hint.C:
				fmt.Fprintln(stderr, "gglua: interrupted; the script has not stopped yet (press Ctrl-C again to quit)")
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		cancel()
	}
}

// reportKernels says, once, which SIMD features ggml was compiled with: always
// with --verbose, and unasked when the kernels are the slow portable ones.
func reportKernels(verbose bool, stderr io.Writer) {
	slow := ggmlcgo.SlowKernels()
	if !verbose && !slow {
		return
	}
	fmt.Fprintf(stderr, "gglua: ggml CPU kernels compiled with: %s\n", cpuFeatures())
	if slow {
		fmt.Fprintf(stderr, "gglua: these are the slow portable kernels (matmul runs tens of times slower); %s\n", ggmlcgo.FastBuildHint)
	}
}

func cpuFeatures() string {
	if f := ggmlcgo.CPUFeatures(); len(f) > 0 {
		return strings.Join(f, " ")
	}
	return "none"
}

func listDevices(f *cliFlags, stdout, stderr io.Writer) int {
	if f.device != "cpu" {
		// Asking for a device loads the dynamic backends, so they are listed too.
		if rt, err := runtime.New(runtime.Options{Device: f.device, Threads: 1}); err == nil {
			rt.Close()
		} else {
			fmt.Fprintf(stderr, "gglua: %v\n", err)
		}
	}
	for _, d := range ggmlcgo.Devices() {
		fmt.Fprintf(stdout, "%-8s %-6s %s", d.Name, d.Type, d.Description)
		if d.TotalBytes > 0 {
			fmt.Fprintf(stdout, " (%.1f GiB free of %.1f GiB)", float64(d.FreeBytes)/(1<<30), float64(d.TotalBytes)/(1<<30))
		}
		fmt.Fprintln(stdout)
	}
	return 0
}

// reportError prints a Lua error (file:line: message and a traceback).
func reportError(stderr io.Writer, err error) int {
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) {
		fmt.Fprintf(stderr, "gglua: %s\n", apiErr.Object.String())
		if apiErr.StackTrace != "" {
			fmt.Fprintln(stderr, apiErr.StackTrace)
		}
		return 1
	}
	fmt.Fprintf(stderr, "gglua: %v\n", err)
	return 1
}

// parseBytes reads sizes such as "2GiB", "512MB", "1e9" or "" (none).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	in := s
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(s), strings.ToUpper(u.suffix)) && (len(u.suffix) > 1 || !strings.HasSuffix(strings.ToUpper(s), "IB")) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	bytes := v * mult
	switch {
	case err != nil || math.IsNaN(v):
		return 0, fmt.Errorf("bad size %q (expected e.g. 2GiB, 512MB or a number of bytes)", in)
	case v < 0:
		return 0, fmt.Errorf("bad size %q: a size cannot be negative", in)
	case math.IsInf(v, 0) || bytes > 1<<62:
		return 0, fmt.Errorf("bad size %q: more than 2^62 bytes (for no limit, leave --mem-limit out)", in)
	case bytes != math.Trunc(bytes):
		return 0, fmt.Errorf("bad size %q: %g is not a whole number of bytes", in, bytes)
	}
	return int64(bytes), nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
