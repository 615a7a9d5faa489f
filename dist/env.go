package dist

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Place is where this process stands in a job, as its launcher said
// through the environment.
type Place struct {
	Rank      int // 0-based, as every launcher numbers them
	World     int // processes in the job; 1 when no launcher set anything
	LocalRank int // rank among the processes of this host: which GPU to take
	// MasterAddr and MasterPort are where rank 0 listens for the others
	// (the NCCL rendezvous); empty and 0 when not set.
	MasterAddr string
	MasterPort int
	// Launcher names the variables the place came from: "torchrun"
	// (RANK, WORLD_SIZE, LOCAL_RANK: torchrun, gglua --nproc, or a user),
	// "mpirun" (Open MPI's OMPI_COMM_WORLD_*), "slurm" (srun's SLURM_*), or
	// "" (none: one process).
	Launcher string
}

// Alone is the place of a process started without a launcher.
var Alone = Place{World: 1, Launcher: ""}

// launchers are the variable sets PlaceFromEnv reads, first match first:
// an explicit torchrun-style setting wins over what mpirun or srun set.
var launchers = []struct {
	name, rank, world, local string
}{
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
}

// PlaceFromEnv reads the place from getenv (os.Getenv in use). No variables
// at all is one process (Alone); a half-set or inconsistent environment is
// an error naming the variable, never a silent single-process run.
func PlaceFromEnv(getenv func(string) string) (Place, error) {
	p := Alone
	for _, l := range launchers {
		rank, world := strings.TrimSpace(getenv(l.rank)), strings.TrimSpace(getenv(l.world))
		if rank == "" && world == "" {
			continue
		}
		if rank == "" || world == "" {
			set, unset := l.rank, l.world
			if rank == "" {
				set, unset = l.world, l.rank
			}
			return p, fmt.Errorf("%s is set but %s is not (both are needed to place this process in a job)", set, unset)
		}
		var err error
		p.Launcher = l.name
		if p.World, err = envInt(l.world, world, 1); err != nil {
			return Alone, err
		}
		if p.Rank, err = envInt(l.rank, rank, 0); err != nil {
			return Alone, err
		}
		if p.Rank >= p.World {
			return Alone, fmt.Errorf("%s=%d is not below %s=%d (ranks count from 0)", l.rank, p.Rank, l.world, p.World)
		}
		p.LocalRank = p.Rank // one host, unless the launcher says otherwise
		if s := strings.TrimSpace(getenv(l.local)); s != "" {
			if p.LocalRank, err = envInt(l.local, s, 0); err != nil {
				return Alone, err
			}
		}
		break
	}
	p.MasterAddr = strings.TrimSpace(getenv("MASTER_ADDR"))
	if s := strings.TrimSpace(getenv("MASTER_PORT")); s != "" {
		port, err := envInt("MASTER_PORT", s, 1)
		if err != nil {
			return Alone, err
		}
		if port > 65535 {
			return Alone, fmt.Errorf("MASTER_PORT=%d is not a TCP port (1-65535)", port)
		}
		p.MasterPort = port
	}
	return p, nil
}

// maxSecret bounds a secret file's size (a secret is a few dozen bytes).
const maxSecret = 4096

// SecretFromEnv is the job's secret, which every process proves to the
// others at the rendezvous: GGLUA_DIST_SECRET, or the regular file that
// GGLUA_DIST_SECRET_FILE names (its surrounding whitespace trimmed); gglua
// --nproc makes one for its children. None (nil): the rendezvous runs only
// on a loopback MASTER_ADDR. Read only where a rendezvous needs it.
func SecretFromEnv(getenv func(string) string) ([]byte, error) {
	if s := strings.TrimSpace(getenv("GGLUA_DIST_SECRET")); s != "" {
		return []byte(s), nil
	}
	path := strings.TrimSpace(getenv("GGLUA_DIST_SECRET_FILE"))
	if path == "" {
		return nil, nil
	}
	// O_NONBLOCK: a FIFO in the file's place opens at once (and is
	// refused below) instead of blocking until a writer comes.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("GGLUA_DIST_SECRET_FILE: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > maxSecret {
		return nil, fmt.Errorf("GGLUA_DIST_SECRET_FILE=%s is not a regular file of at most %d bytes", path, maxSecret)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecret))
	if err != nil {
		return nil, fmt.Errorf("GGLUA_DIST_SECRET_FILE: %w", err)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("GGLUA_DIST_SECRET_FILE=%s is empty", path)
}

// envInt reads an integer variable of at least min.
func envInt(name, s string, min int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not an integer", name, s)
	}
	if v < min {
		return 0, fmt.Errorf("%s=%d is below %d", name, v, min)
	}
	return v, nil
}

// Rendezvous is MASTER_ADDR:MASTER_PORT, or an error saying what is
// missing.
func (p Place) Rendezvous() (string, error) {
	if p.MasterAddr == "" || p.MasterPort == 0 {
		return "", fmt.Errorf("NCCL needs MASTER_ADDR and MASTER_PORT (where rank 0 shares the NCCL id; gglua --nproc and torchrun set them, under srun set them yourself, e.g. MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1) MASTER_PORT=29500)")
	}
	return net.JoinHostPort(p.MasterAddr, strconv.Itoa(p.MasterPort)), nil
}
