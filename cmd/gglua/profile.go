package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// Profiles of a run, for a step's host time:
//
//	GGLUA_CPUPROFILE=path  a Go CPU profile (`go tool pprof`): where the
//	                       host's busy time goes (graph building, Lua,
//	                       cgo calls into ggml);
//	GGLUA_TRACE=path       a Go execution trace (`go tool trace`): what
//	                       the host did when it was not busy too, each
//	                       goroutine's blocking calls, system calls and
//	                       the collector's pauses, on a time line (a
//	                       one-off slow step).
//
// "%r" in a path is the process's rank (RANK, 0 without), so that every
// process of `gglua --nproc` writes its own.

// startProfiles starts what the environment asks for and returns the
// function that ends it all.
func startProfiles(stderr io.Writer) func() {
	stopCPU := startProfile("GGLUA_CPUPROFILE", profilePath(os.Getenv("GGLUA_CPUPROFILE")), pprof.StartCPUProfile, pprof.StopCPUProfile, stderr)
	stopTrace := startProfile("GGLUA_TRACE", profilePath(os.Getenv("GGLUA_TRACE")), trace.Start, trace.Stop, stderr)
	return func() {
		stopTrace()
		stopCPU()
	}
}

// profilePath is path with "%r" replaced by the process's rank.
func profilePath(path string) string {
	rank := os.Getenv("RANK")
	if rank == "" {
		rank = "0"
	}
	return strings.ReplaceAll(path, "%r", rank)
}

// startProfile writes one profile (named by its variable, for errors) to
// path, when set, with start and stop; it returns the function that ends
// it.
func startProfile(name, path string, start func(io.Writer) error, stop func(), stderr io.Writer) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "gglua: %s: %v\n", name, err)
		return func() {}
	}
	return func() {
		stop()
		f.Close()
	}
}
