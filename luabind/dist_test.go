package luabind

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dist.data_parallel's options are checked whether or not the script runs
// in a job (here alone, where it returns the model as it is): a bucket
// size in MiB above 0, PyTorch DDP's bucket_cap_mb, and no other option.
func TestDataParallelOptions(t *testing.T) {
	L, _ := logTestState(t, false)
	require.NoError(t, L.DoString(`m = nn.Linear(3, 2)`))
	require.NoError(t, L.DoString(`assert(dist.data_parallel(m, {bucket_cap_mb = 1.5}) == m)`))
	require.NoError(t, L.DoString(`assert(dist.data_parallel(m) == m)`))
	for _, c := range []struct{ code, want string }{
		{`dist.data_parallel(m, {bucket_cap_mb = 0})`, "dist.data_parallel: option bucket_cap_mb must be > 0 and at most 1048576 (MiB), got 0"},
		{`dist.data_parallel(m, {bucket_cap_mb = 0/0})`, "option bucket_cap_mb must be > 0"},
		{`dist.data_parallel(m, {bucket_cap_mb = 1e300})`, "option bucket_cap_mb must be > 0"},
		{`dist.data_parallel(m, {bucket_cap_mb = "25"})`, "option bucket_cap_mb must be a number, got string"},
		{`dist.data_parallel(m, {bucket_cap = 25})`, "dist.data_parallel: unknown option bucket_cap (expected bucket_cap_mb)"},
		{`dist.data_parallel(m, 25)`, "dist.data_parallel: argument 2: expected an options table, got number"},
	} {
		err := L.DoString(c.code)
		if assert.Error(t, err, c.code) {
			assert.Contains(t, err.Error(), c.want, c.code)
		}
	}
}
