package dist

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The libraries are found at run time; these tests need neither installed.

func TestMissingMPISaysHowToGetIt(t *testing.T) {
	t.Setenv("GGLUA_MPI_PATH", "/nonexistent/libmpi.so")
	_, err := OpenMPI(DefaultTimeout)
	require.ErrorContains(t, err, "MPI library not found (GGLUA_MPI_PATH=/nonexistent/libmpi.so:")
	require.ErrorContains(t, err, "apt-get install openmpi-bin libopenmpi-dev")
}

// TestMPICHIsRefused: a library without Open MPI's handle objects (MPICH's
// are integers) is refused by name; libc stands in for one here.
func TestMPICHIsRefused(t *testing.T) {
	t.Setenv("GGLUA_MPI_PATH", "libc.so.6")
	_, err := OpenMPI(DefaultTimeout)
	require.ErrorContains(t, err, "libc.so.6 is not Open MPI")
	require.ErrorContains(t, err, "MPICH and its derivatives (Intel MPI, MVAPICH) are not supported yet")
}

func TestMissingNCCLSaysHowToGetIt(t *testing.T) {
	t.Setenv("GGLUA_NCCL_PATH", "/nonexistent/libnccl.so.2")
	_, err := OpenNCCL(Place{Rank: 0, World: 2, MasterAddr: "127.0.0.1", MasterPort: 29500}, 0, time.Second)
	require.ErrorContains(t, err, "NCCL library not found or unusable (GGLUA_NCCL_PATH=/nonexistent/libnccl.so.2:")
	require.ErrorContains(t, err, "libnccl2")
	require.ErrorContains(t, err, "nvidia-nccl-cu12")
}

// TestCPUNeedsAnMPILauncher: torchrun's variables alone (gglua --nproc) do
// not start MPI for CPU tensors: an error says to use mpirun.
func TestCPUNeedsAnMPILauncher(t *testing.T) {
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "")
	t.Setenv("PMIX_RANK", "")
	_, err := Init(-1)
	require.ErrorIs(t, err, ErrCPUNeedsMPI)
	require.Nil(t, Current())
}

func TestTimeoutFromEnv(t *testing.T) {
	t.Setenv("GGLUA_DIST_TIMEOUT", "")
	d, err := Timeout()
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, d)
	t.Setenv("GGLUA_DIST_TIMEOUT", "1.5")
	d, err = Timeout()
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, d)
	t.Setenv("GGLUA_DIST_TIMEOUT", "-1")
	_, err = Timeout()
	require.ErrorContains(t, err, "not a positive number of seconds")
}
