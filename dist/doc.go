// Package dist runs gglua's data parallelism on the collective libraries the
// field already runs: NCCL for CUDA tensors, MPI (Open MPI) for CPU tensors.
// It has no collective algorithm of its own.
//
// Both libraries are loaded at run time (dlopen), so building gglua, and
// running it in one process, needs neither: NCCL from GGLUA_NCCL_PATH, else
// libnccl.so.2 on the loader's search path; MPI from GGLUA_MPI_PATH, else
// libmpi.so.40 or libmpi.so. A library that is not there is an error naming
// it and how to get it (errors.go).
//
// This is the one cgo outside ggmlcgo, and the reason it is not in ggmlcgo:
// ggmlcgo is the face of ggml, linked at build time; these are two other C
// libraries, found at run time, whose functions are called through
// pointers from dlsym (C trampolines in mpi.go and nccl.go, since Go cannot
// call a C function pointer). Nothing else of theirs reaches Go.
//
// The pieces: env.go reads a process's place in a job from the launcher's
// variables (torchrun's RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT,
// Open MPI's OMPI_COMM_WORLD_*, Slurm's SLURM_*); Comm (comm.go) is what
// luabind's dist library calls; rendezvous.go is the TCP meeting on
// MASTER_ADDR:MASTER_PORT where rank 0 hands the others the NCCL unique id.
// Gradient averaging itself is core's (core/data_parallel.go,
// data_parallel_sums.go): it takes a sum function, or a gglua_collective
// (GraphComm: ggmlcgo/gglua_collective.h, C memory holding MPI's or NCCL's
// entry point) that its graph nodes call, and knows nothing of MPI or NCCL.
//
// MPI handles: Open MPI's MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM... are the
// addresses of exported globals (ompi_mpi_comm_world, ompi_mpi_float,
// ompi_mpi_op_sum...), which dlsym returns. MPICH's handles are integers
// fixed at compile time instead; it is not supported yet, and an MPICH
// library is refused with an error that says so.
package dist
