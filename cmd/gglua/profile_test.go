package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProfilePathHasTheRank(t *testing.T) {
	t.Setenv("RANK", "")
	assert.Equal(t, "/tmp/t0.out", profilePath("/tmp/t%r.out"))
	t.Setenv("RANK", "3")
	assert.Equal(t, "/tmp/t3.out", profilePath("/tmp/t%r.out"))
	assert.Equal(t, "/tmp/t.out", profilePath("/tmp/t.out"))
	assert.Equal(t, "", profilePath(""))
}

// TestProfilesAreWritten: GGLUA_CPUPROFILE and GGLUA_TRACE each write a
// non-empty file, one per rank; a path that cannot be created is an error
// on stderr, not a failed run.
func TestProfilesAreWritten(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RANK", "1")
	t.Setenv("GGLUA_CPUPROFILE", filepath.Join(dir, "cpu%r.prof"))
	t.Setenv("GGLUA_TRACE", filepath.Join(dir, "trace%r.out"))
	var stderr bytes.Buffer
	stop := startProfiles(&stderr)
	n := 0
	for i := 0; i < 1e6; i++ {
		n += i % 7
	}
	stop()
	assert.Empty(t, stderr.String())
	for _, f := range []string{"cpu1.prof", "trace1.out"} {
		info, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		assert.Positive(t, info.Size(), f)
	}

	t.Setenv("GGLUA_CPUPROFILE", "")
	t.Setenv("GGLUA_TRACE", filepath.Join(dir, "no", "such", "trace.out"))
	startProfiles(&stderr)()
	assert.Contains(t, stderr.String(), "gglua: GGLUA_TRACE: open ")
}
