package luabind

import (
	"os"
	"strconv"
	"strings"
)

// processMemory reads the process's resident set and its peak (Linux's
// /proc/self/status VmRSS and VmHWM), for soak tests and benchmarks.
func processMemory() (rss, peak int64, ok bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	field := func(name string) int64 {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, found := strings.CutPrefix(line, name+":"); found {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				return kb * 1024
			}
		}
		return 0
	}
	return field("VmRSS"), field("VmHWM"), true
}
