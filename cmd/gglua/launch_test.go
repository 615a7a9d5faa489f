package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitNproc(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		n     int
		rest  []string
		found bool
		err   string
	}{
		{args: []string{"train.lua", "--nproc", "2"}, rest: []string{"train.lua", "--nproc", "2"}}, // the script's own argument
		{args: []string{"--nproc", "2", "train.lua", "x"}, n: 2, rest: []string{"train.lua", "x"}, found: true},
		{args: []string{"--device", "cuda", "-nproc=4", "train.lua"}, n: 4, rest: []string{"--device", "cuda", "train.lua"}, found: true},
		{args: []string{"-e", "--nproc", "train.lua"}, rest: []string{"-e", "--nproc", "train.lua"}}, // -e's code
		{args: []string{"--nproc"}, found: true, err: "--nproc needs a number"},
		{args: []string{"--nproc", "0", "s.lua"}, found: true, err: `--nproc "0": expected a number of processes >= 1`},
		{args: []string{"--nproc", "two", "s.lua"}, found: true, err: `--nproc "two"`},
	} {
		n, rest, found, err := splitNproc(tc.args)
		assert.Equal(t, tc.found, found, "%v", tc.args)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%v", tc.args)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.n, n, "%v", tc.args)
		assert.Equal(t, tc.rest, rest, "%v", tc.args)
	}
}

// TestChildDevices: --device cuda becomes each rank's own visible GPU;
// anything else is left as given.
func TestChildDevices(t *testing.T) {
	assert.Equal(t, []string{"--device", "CUDA1", "s.lua", "--device", "cuda"}, childDevices([]string{"--device", "cuda", "s.lua", "--device", "cuda"}, 1))
	assert.Equal(t, []string{"--device=CUDA0", "s.lua"}, childDevices([]string{"--device=gpu", "s.lua"}, 0))
	assert.Equal(t, []string{"--device", "cpu", "-e", "--device", "s.lua"}, childDevices([]string{"--device", "cpu", "-e", "--device", "s.lua"}, 1))
}
