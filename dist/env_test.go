package dist

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlaceFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Place
		err  string
	}{
		{name: "no launcher", env: nil, want: Alone},
		{name: "torchrun", env: map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "node7", "MASTER_PORT": "29500"},
			want: Place{Rank: 3, World: 8, LocalRank: 1, MasterAddr: "node7", MasterPort: 29500, Launcher: "torchrun"}},
		{name: "local rank defaults to the rank", env: map[string]string{"RANK": "1", "WORLD_SIZE": "2"},
			want: Place{Rank: 1, World: 2, LocalRank: 1, Launcher: "torchrun"}},
		{name: "mpirun", env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
			want: Place{Rank: 1, World: 4, LocalRank: 0, Launcher: "mpirun"}},
		{name: "slurm", env: map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1"},
			want: Place{Rank: 5, World: 16, LocalRank: 1, Launcher: "slurm"}},
		{name: "torchrun's variables win", env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "5", "SLURM_NTASKS": "16"},
			want: Place{Rank: 0, World: 2, LocalRank: 0, Launcher: "torchrun"}},
		{name: "half set", env: map[string]string{"RANK": "0"}, err: "RANK is set but WORLD_SIZE is not"},
		{name: "half set, other half", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "2"}, err: "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"},
		{name: "not a number", env: map[string]string{"RANK": "one", "WORLD_SIZE": "2"}, err: `RANK="one" is not an integer`},
		{name: "rank too large", env: map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, err: "RANK=2 is not below WORLD_SIZE=2"},
		{name: "empty world", env: map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, err: "WORLD_SIZE=0 is below 1"},
		{name: "bad port", env: map[string]string{"MASTER_PORT": "70000"}, err: "MASTER_PORT=70000 is not a TCP port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceFromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRendezvousAddress(t *testing.T) {
	_, err := Place{World: 2}.Rendezvous()
	require.ErrorContains(t, err, "NCCL needs MASTER_ADDR and MASTER_PORT")
	addr, err := Place{World: 2, MasterAddr: "::1", MasterPort: 29500}.Rendezvous()
	require.NoError(t, err)
	assert.Equal(t, "[::1]:29500", addr)
}

func TestParseOp(t *testing.T) {
	for s, want := range map[string]Op{"sum": Sum, "AVG": Avg, "max": Max, "min": Min} {
		got, err := ParseOp(s)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := ParseOp("prod")
	require.ErrorContains(t, err, `unknown reduction "prod"`)
}

// The job's secret comes from GGLUA_DIST_SECRET, or from the regular file
// GGLUA_DIST_SECRET_FILE names (trimmed); anything else there is refused.
// PlaceFromEnv does not read it (a broken file stops no MPI job).
func TestSecretFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(file, []byte("  from the file\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, make([]byte, maxSecret+1), 0o600))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, tc := range []struct {
		env  map[string]string
		want string
		err  string
	}{
		{env: nil},
		{env: map[string]string{"GGLUA_DIST_SECRET": "s3cret"}, want: "s3cret"},
		{env: map[string]string{"GGLUA_DIST_SECRET": "s3cret", "GGLUA_DIST_SECRET_FILE": file}, want: "s3cret"},
		{env: map[string]string{"GGLUA_DIST_SECRET_FILE": file}, want: "from the file"},
		{env: map[string]string{"GGLUA_DIST_SECRET_FILE": empty}, err: "is empty"},
		{env: map[string]string{"GGLUA_DIST_SECRET_FILE": big}, err: "not a regular file of at most"},
		{env: map[string]string{"GGLUA_DIST_SECRET_FILE": fifo}, err: "not a regular file of at most"},
		{env: map[string]string{"GGLUA_DIST_SECRET_FILE": filepath.Join(dir, "none")}, err: "no such file"},
	} {
		secret, err := SecretFromEnv(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%v", tc.env)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(secret), "%v", tc.env)
	}
}
