package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Data parallelism end to end: the dist library under mpirun (CPU tensors,
// MPI) and the gglua --nproc launcher. The NCCL path needs GPUs: see
// tests/gpu/dist_nccl.lua.

// distTimeout bounds every job here: a job that hangs fails the test.
const distTimeout = 90 * time.Second

// runJob runs name with args (and extra environment) under a timeout and
// returns stdout, stderr and the exit status (-1: killed at the timeout).
func runJob(t *testing.T, env []string, name string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), distTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not end within %v (a hang):\nstdout:\n%s\nstderr:\n%s", name, args, distTimeout, out.String(), errb.String())
	}
	return out.String(), errb.String(), exitCode(t, err)
}

// mpirun runs gglua under mpirun -np n (the test may run as root, as CI
// does); each rank's stdout is also kept whole in a file (rankLines).
func mpirun(t *testing.T, env []string, n int, args ...string) (string, string, int, mpiOutput) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short skips the mpirun tests (make test runs them)")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev; .ci/run installs it)")
	}
	env = append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1")
	dir := t.TempDir()
	out, errOut, code := runJob(t, env, "mpirun", append([]string{"--output-filename", dir, "-np", strconv.Itoa(n), gglua}, args...)...)
	return out, errOut, code, mpiOutput(dir)
}

// mpiOutput is the folder where mpirun --output-filename put each rank's
// output (ranks' lines interleave in mpirun's own stdout).
type mpiOutput string

// rankLines are the stdout lines of rank r.
func (dir mpiOutput) rankLines(t *testing.T, r int) []string {
	files, err := filepath.Glob(filepath.Join(string(dir), "*", "rank."+strconv.Itoa(r), "stdout"))
	require.NoError(t, err)
	require.Len(t, files, 1, "rank %d's output", r)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// field is the rest of the first line starting with key.
func field(t *testing.T, lines []string, key string) string {
	t.Helper()
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, key+" "); ok {
			return s
		}
	}
	t.Fatalf("no %q line in %q", key, lines)
	return ""
}

func floats(t *testing.T, s string) []float64 {
	var v []float64
	for _, f := range strings.Fields(s) {
		x, err := strconv.ParseFloat(f, 64)
		require.NoError(t, err)
		v = append(v, x)
	}
	return v
}

// TestDataParallelMatchesOneProcess: two processes, each on half of every
// batch (shard=true), end SGD-with-momentum and Adam training (with
// clipping) with the weights one process reaches on the whole batches; both
// ranks hold identical weights although they initialised differently. The
// gradients' sums run in the backward's graph (core/data_parallel_sums.go),
// so a steady step is 1 graph compute, as without data parallelism, plus
// the one that moves the kept norm into the persistent pool at the next
// pass reset; with GGLUA_DIST_SUMS=between they run between computes, one
// more a step. On a device that computes asynchronously (the CPU made one),
// where reads overlap the device's work (and with GGLUA_DIST_READS=wait,
// where they wait for it) the weights are the same, in 3 computes a step.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	alone, errAlone, code := runJob(t, nil, gglua, "dist/train.lua")
	require.Equal(t, 0, code, errAlone)
	aloneLines := strings.Split(alone, "\n")
	want, wantNorms := floats(t, field(t, aloneLines, "W")), floats(t, field(t, aloneLines, "N"))
	require.Len(t, wantNorms, 8)
	assert.Equal(t, "2", field(t, aloneLines, "C"))
	for _, tc := range []struct {
		env      []string
		computes string
	}{{nil, "2"}, {[]string{"GGLUA_DIST_SUMS=between"}, "3"},
		{[]string{"GGLUA_ASYNC=1"}, "3"}, {[]string{"GGLUA_ASYNC=1", "GGLUA_DIST_READS=wait"}, "3"}} {
		out, errOut, code, ranks := mpirun(t, tc.env, 2, "dist/train.lua")
		require.Equal(t, 0, code, "%v stdout:\n%s\nstderr:\n%s", tc.env, out, errOut)
		r0, r1 := ranks.rankLines(t, 0), ranks.rankLines(t, 1)
		assert.Equal(t, field(t, r0, "W"), field(t, r1, "W"), "%v: the ranks' weights differ", tc.env)
		got := floats(t, field(t, r0, "W"))
		require.Len(t, got, len(want))
		for i := range want {
			assert.InDelta(t, want[i], got[i], 1e-5, "%v: weight %d", tc.env, i)
		}
		// The norms, read after later steps reset the pass pool (kept
		// values move to the persistent pool at the reset).
		assert.InDeltaSlice(t, wantNorms, floats(t, field(t, r0, "N")), 1e-5, "%v: gradient norms", tc.env)
		assert.Equal(t, field(t, r0, "N"), field(t, r1, "N"), "%v", tc.env)
		assert.Equal(t, tc.computes, field(t, r0, "C"), "%v: graph computes per steady step", tc.env)
		assert.Equal(t, tc.computes, field(t, r1, "C"), "%v", tc.env)
	}
}

// TestAccumulationWithNoSync: gradient accumulation over two micro-batches,
// the first's backward inside dist.no_sync, ends with the weights of one
// process on the whole batches, identical on both ranks, with the sums in
// the graph and between computes.
func TestAccumulationWithNoSync(t *testing.T) {
	alone, errAlone, code := runJob(t, nil, gglua, "dist/accumulate.lua")
	require.Equal(t, 0, code, errAlone)
	want := floats(t, field(t, strings.Split(alone, "\n"), "W"))
	for _, env := range [][]string{nil, {"GGLUA_DIST_SUMS=between"}} {
		out, errOut, code, ranks := mpirun(t, env, 2, "dist/accumulate.lua")
		require.Equal(t, 0, code, "%v stdout:\n%s\nstderr:\n%s", env, out, errOut)
		r0, r1 := ranks.rankLines(t, 0), ranks.rankLines(t, 1)
		assert.Equal(t, field(t, r0, "W"), field(t, r1, "W"), "%v: the ranks' weights differ", env)
		assert.InDeltaSlice(t, want, floats(t, field(t, r0, "W")), 1e-5, "%v", env)
	}
}

// TestCollectivesUnderMPI: all_reduce (sum, avg, max, min, in place),
// broadcast from either rank, all_gather and barrier give the values
// torch.distributed would, on both ranks.
func TestCollectivesUnderMPI(t *testing.T) {
	out, errOut, code, ranks := mpirun(t, nil, 2, "dist/collectives.lua")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for r := range 2 {
		assert.Equal(t, []string{"ok sum", "ok avg", "ok max", "ok min", "ok in place on the device",
			"ok broadcast from 1", "ok broadcast from 0", "ok all_gather rank 0", "ok all_gather rank 1",
			"ok relu's gradient after a refused all_reduce", "ok a copy of it reduced", "ok errors"},
			ranks.rankLines(t, r), "rank %d", r)
	}
}

// TestADeadRankEndsTheJob: rank 1 leaving (os.exit, or a Lua error) while
// rank 0 waits in a collective ends the whole job with an error status
// instead of leaving rank 0 waiting (runJob fails the test on a hang).
func TestADeadRankEndsTheJob(t *testing.T) {
	for name, die := range map[string]string{
		"os.exit": "os.exit(3)",
		"error":   `error("rank 1 gives up")`,
	} {
		t.Run(name, func(t *testing.T) {
			code := `dist.init()
if dist.rank() == 1 then ` + die + ` end
local t = tensor{1}
for i = 1, 100 do dist.all_reduce(t) end
print("rank 0 was never told")`
			started := time.Now()
			out, errOut, status, _ := mpirun(t, nil, 2, "-e", code)
			assert.NotEqual(t, 0, status, "stdout:\n%s\nstderr:\n%s", out, errOut)
			assert.NotContains(t, out, "never told")
			if name == "error" {
				assert.Contains(t, errOut, "rank 1 gives up")
			}
			assert.Less(t, time.Since(started), 60*time.Second)
		})
	}
}

// TestAnUnmatchedCollectiveTimesOut: a rank that makes one collective
// more than the others (which finish and finalize) waits past
// GGLUA_DIST_TIMEOUT, then ends with an error naming the timeout, and the
// job ends with an error status instead of hanging.
func TestAnUnmatchedCollectiveTimesOut(t *testing.T) {
	code := `dist.init()
local t = tensor{1}
dist.all_reduce(t)
if dist.rank() == 1 then dist.all_reduce(t); print("rank 1 was answered") end`
	started := time.Now()
	out, errOut, status, _ := mpirun(t, []string{"GGLUA_DIST_TIMEOUT=2"}, 2, "-e", code)
	assert.NotEqual(t, 0, status, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.NotContains(t, out, "was answered")
	assert.Contains(t, errOut, "past GGLUA_DIST_TIMEOUT (2s)")
	assert.Less(t, time.Since(started), 45*time.Second)
}

// TestMissingMPILibrary: dist.init in an MPI job without the library says
// which library and how to get it (no mpirun needed: the variables are
// what mpirun would set).
func TestMissingMPILibrary(t *testing.T) {
	_, errOut, code := runJob(t, []string{"GGLUA_MPI_PATH=/nonexistent/libmpi.so", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"},
		gglua, "-e", "dist.init()")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "dist.init: MPI library not found (GGLUA_MPI_PATH=/nonexistent/libmpi.so")
	assert.Contains(t, errOut, "apt-get install openmpi-bin libopenmpi-dev")
}

// TestDistAloneIsANoOp: with no launcher, world_size is 1, rank 0, and
// every collective leaves its tensor as it is; data_parallel returns the
// model unchanged and training works as before.
func TestDistAloneIsANoOp(t *testing.T) {
	out, errOut, code := runJob(t, nil, gglua, "-e", `
dist.init()
local t = tensor{1, 2}
dist.all_reduce(t, "avg"); dist.broadcast(t, 0); dist.barrier()
local g = dist.all_gather(t)
local m = nn.Linear(2, 1)
assert(dist.data_parallel(m) == m)
-- What a collective refuses is refused alone too, so that a script does
-- not fail only at scale: a view, an i32 tensor, a fractional src.
for _, bad in ipairs{
  function() dist.all_reduce(tensor{1, 2, 3}:narrow(1, 1, 2)) end,
  function() dist.all_gather(tensor{{1, 2}, {3, 4}}:t()) end,
  function() dist.all_reduce(tensor({1, 2}, {dtype = "i32"})) end,
  function() dist.broadcast(tensor{1}, 0.5) end,
} do
  local ok, err = pcall(bad)
  assert(not ok, "refused alone as with several processes")
end
print(dist.world_size(), dist.rank(), dist.local_rank(), dist.backend(), #g, t[1]:item(), t[2]:item(), g[1][2]:item())`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "1\t0\t0\tnil\t1\t1\t2\t2\n", out)
}

// TestLauncher: gglua --nproc 2 starts two processes with torchrun's
// variables, prefixes their lines with the rank, and on the CPU dist.init
// says that CPU tensors need mpirun.
func TestLauncher(t *testing.T) {
	out, errOut, code := runJob(t, nil, gglua, "--nproc", "2", "-e",
		`print(os.getenv("RANK"), os.getenv("WORLD_SIZE"), os.getenv("LOCAL_RANK"), os.getenv("MASTER_ADDR"), os.getenv("MASTER_PORT") ~= nil, dist.rank(), dist.world_size())`)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines) // the ranks print in either order
	require.Len(t, lines, 2)
	assert.Equal(t, "[0] 0\t2\t0\t127.0.0.1\ttrue\t0\t2", lines[0])
	assert.Equal(t, "[1] 1\t2\t1\t127.0.0.1\ttrue\t1\t2", lines[1])

	_, errOut, code = runJob(t, nil, gglua, "--nproc", "2", "-e", "dist.init()")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `\[[01]\] gglua: <string>:1: dist.init: CPU tensors are reduced by MPI`, errOut) // whichever failed first
	assert.Regexp(t, `gglua --nproc: rank [01] exited with status 1; stopping the other processes`, errOut)
	assert.Contains(t, errOut, "mpirun -np N gglua script.lua")
}

// TestLauncherStopsTheOthers: when one process fails, the launcher stops
// the others (rank 0 would run for ever) and exits with the failed one's
// status, saying which rank it was.
func TestLauncherStopsTheOthers(t *testing.T) {
	started := time.Now()
	out, errOut, code := runJob(t, nil, gglua, "--nproc", "2", "-e",
		`if dist.rank() == 1 then print("bye"); os.exit(5) end
while true do end`)
	assert.Equal(t, 5, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "[1] bye")
	assert.Contains(t, errOut, "gglua --nproc: rank 1 exited with status 5; stopping the other processes")
	assert.Less(t, time.Since(started), 30*time.Second)
}

// TestShardedLoader: shard=true gives each of three ranks an equal part of
// every epoch, together all of it (padded by the epoch's start, as
// DistributedSampler), shuffled alike on every rank and anew each epoch;
// drop_last cuts to equal parts instead. The rank comes from the
// environment, as a launcher sets it.
func TestShardedLoader(t *testing.T) {
	code := `local x = tensor.arange(1, 8):reshape(7, 1)
for _, drop in ipairs{false, true} do
  local l = data.loader(x, nil, {batch = 2, shuffle = true, shard = true, seed = 5, drop_last = drop})
  for epoch = 1, 2 do
    local rows = {}
    for xb in l do for _, v in ipairs(xb:reshape(xb:numel()):totable()) do rows[#rows + 1] = v end end
    print(tostring(drop) .. " " .. #l .. " " .. table.concat(rows, ","))
  end
end`
	parts := make([][]string, 3)
	for r := range 3 {
		out, errOut, status := runJob(t, []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=3"}, gglua, "-e", code)
		require.Equal(t, 0, status, errOut)
		parts[r] = strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, parts[r], 4)
	}
	for line := range 4 {
		var all []string
		for r := range 3 {
			f := strings.Fields(parts[r][line])
			drop := f[0] == "true"
			rows := strings.Split(f[2], ",")
			if drop {
				assert.Equal(t, "1", f[1], "batches per epoch")
				assert.Len(t, rows, 2, "rank %d", r)
			} else {
				assert.Equal(t, "2", f[1], "batches per epoch")
				assert.Len(t, rows, 3, "rank %d", r)
			}
			all = append(all, rows...)
		}
		seen := map[string]bool{}
		for _, v := range all {
			seen[v] = true
		}
		if len(all) == 9 {
			assert.Len(t, seen, 7, "every row in the epoch: %v", all)
		} else {
			assert.Len(t, seen, 6, "six different rows: %v", all)
		}
	}
	assert.NotEqual(t, parts[0][0], parts[0][1], "each epoch is shuffled anew")
}

// TestGPTExampleUnderMPI: scripts/examples/gpt.lua on two processes, each
// on half of every batch, prints the losses and gradient norms one process
// prints on the whole batches (issue [14]'s "loss trajectory equal to one
// GPU on the global batch", here on CPUs).
func TestGPTExampleUnderMPI(t *testing.T) {
	example := filepath.Join("..", "scripts", "examples", "gpt.lua")
	steps := func(out string) [][]float64 {
		var rows [][]float64
		for _, m := range regexp.MustCompile(`step +\d+ +loss ([0-9.]+) +lr [0-9.]+ +grad norm ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
			loss, err1 := strconv.ParseFloat(m[1], 64)
			norm, err2 := strconv.ParseFloat(m[2], 64)
			require.NoError(t, errors.Join(err1, err2))
			rows = append(rows, []float64{loss, norm})
		}
		return rows
	}
	dir := t.TempDir()
	out, errOut, code, _ := mpirun(t, nil, 2, example, "6", filepath.Join(dir, "two.gguf"), "5")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	alone, errAlone, code := runJob(t, nil, gglua, example, "6", filepath.Join(dir, "one.gguf"), "5")
	require.Equal(t, 0, code, errAlone)
	want, got := steps(alone), steps(out)
	require.Len(t, want, 6, alone)
	require.Len(t, got, 6, "one process (rank 0) prints each step:\n%s", out)
	for i := range want {
		assert.InDelta(t, want[i][0], got[i][0], 2e-4, "step %d loss", i+1)
		assert.InDelta(t, want[i][1], got[i][1], 2e-3, "step %d grad norm", i+1)
	}
}

// TestAScriptEndRunsTheSumsDue: a backward's gradient sums wait for the next
// compute; a rank whose script ends first runs them at its end, so a rank
// that reads the weights afterwards is not left waiting (runJob fails the
// test on a hang), and both ranks end with the same weights.
func TestAScriptEndRunsTheSumsDue(t *testing.T) {
	out, errOut, code, ranks := mpirun(t, nil, 2, "dist/end_after_backward.lua")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Equal(t, "done", ranks.rankLines(t, 1)[0])
	r0 := ranks.rankLines(t, 0)
	assert.Equal(t, "done", r0[len(r0)-1])
	field(t, r0, "W")
}
