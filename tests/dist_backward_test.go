package tests

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParametersNoRankUsedKeepNoGradient: under mpirun, a parameter no
// rank puts in its loss has no gradient and Adam leaves it, as in one
// process (with the average of zeros for a gradient Adam would go on
// moving it); one only rank 0 uses gets the average on every rank. Summing
// in the graph and between computes.
func TestParametersNoRankUsedKeepNoGradient(t *testing.T) {
	alone, errOut, code := runJob(t, nil, gglua, "dist/unused_params.lua")
	require.Equal(t, 0, code, errOut)
	one := strings.Split(strings.TrimSpace(alone), "\n")
	for _, sums := range []string{"graph", "between"} {
		t.Run(sums, func(t *testing.T) {
			out, errOut, code, ranks := mpirun(t, []string{"GGLUA_DIST_SUMS=" + sums}, 2, "dist/unused_params.lua")
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			r0, r1 := ranks.rankLines(t, 0), ranks.rankLines(t, 1)
			for step := 1; step <= 3; step++ {
				key := "QGRAD" + strconv.Itoa(step)
				assert.Equal(t, field(t, one, key), field(t, r0, key), "%s: q's gradient as alone", key)
				assert.Equal(t, field(t, r0, key), field(t, r1, key), key)
				key = "RGRAD" + strconv.Itoa(step)
				assert.NotEqual(t, "nil", field(t, r1, key), "%s: rank 0 used r, so rank 1 has its average", key)
				assert.Equal(t, field(t, r0, key), field(t, r1, key), key)
			}
			assert.Equal(t, "nil", field(t, r0, "QGRAD2"))
			assert.InDeltaSlice(t, floats(t, field(t, one, "Q")), floats(t, field(t, r0, "Q")), 1e-6, "q: Adam stepped it at step 1 only")
			assert.InDeltaSlice(t, floats(t, field(t, one, "P")), floats(t, field(t, r0, "P")), 1e-6, "p")
			for _, k := range []string{"P", "Q", "R"} {
				assert.Equal(t, field(t, r0, k), field(t, r1, k), "the ranks' %s", k)
			}
		})
	}
}

// TestABackwardThatFailsOnOneRankEndsTheJob: rank 1's backward fails and
// the script catches it; its next backward, its next collective and its
// end report the sums out of step, and the job ends with an error instead of hanging (or summing
// rank 1's step 3 with rank 0's step 2).
func TestABackwardThatFailsOnOneRankEndsTheJob(t *testing.T) {
	for _, sums := range []string{"graph", "between"} {
		t.Run(sums, func(t *testing.T) {
			out, errOut, code, ranks := mpirun(t, []string{"GGLUA_DIST_SUMS=" + sums}, 2, "dist/failed_backward.lua")
			require.NotEqual(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			r1 := ranks.rankLines(t, 1)
			assert.Contains(t, field(t, r1, "STEP2"), "false")
			assert.Contains(t, field(t, r1, "STEP3"), "out of step with the other processes'")
			assert.Contains(t, field(t, r1, "ALLREDUCE"), "dist.all_reduce: data parallel: a backward failed on this process", "a collective refuses too")
			assert.Contains(t, errOut, "gradient sums are out of step", "the script's end reports it")
		})
	}
}

// TestUnfreezingAfterWrappingRefusesUntilWrappedAgain: a parameter frozen
// when its model was wrapped is not averaged, so once unfrozen the next
// backward refuses, on both ranks; wrapped again, both ranks train it to
// the same weights (with it averaged on one rank's rows only, they part).
func TestUnfreezingAfterWrappingRefusesUntilWrappedAgain(t *testing.T) {
	out, errOut, code, ranks := mpirun(t, nil, 2, "dist/unfreeze.lua")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	r0, r1 := ranks.rankLines(t, 0), ranks.rankLines(t, 1)
	for _, lines := range [][]string{r0, r1} {
		assert.Contains(t, field(t, lines, "REFUSED3"), "was frozen when dist.data_parallel wrapped its model")
	}
	assert.Equal(t, field(t, r0, "BACKBONE"), field(t, r1, "BACKBONE"), "the unfrozen weight, averaged")
	assert.Equal(t, field(t, r0, "HEAD"), field(t, r1, "HEAD"))
}
