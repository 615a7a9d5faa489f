package luabind

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/dist"
	"github.com/gglua/gglua/ggmlcgo"
)

// The dist library: data parallelism over NCCL (CUDA tensors) or MPI (CPU
// tensors), through package dist. With no launcher in the environment the
// job is one process: world_size() is 1 and every collective leaves its
// tensor as it is, so one script runs either way.

func (env *Env) distFunctions() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"all_gather":    env.distAllGather,
		"all_reduce":    env.distAllReduce,
		"backend":       env.distBackend,
		"barrier":       env.distBarrier,
		"broadcast":     env.distBroadcast,
		"data_parallel": env.distDataParallel,
		"init":          env.distInit,
		"local_rank":    func(L *lua.LState) int { return pushInt(L, distPlace(L, "dist.local_rank").LocalRank) },
		"no_sync":       env.distNoSync,
		"rank":          func(L *lua.LState) int { return pushInt(L, distPlace(L, "dist.rank").Rank) },
		"world_size":    func(L *lua.LState) int { return pushInt(L, distPlace(L, "dist.world_size").World) },
	}
}

func openDist(L *lua.LState, env *Env) {
	L.SetGlobal("dist", L.SetFuncs(L.NewTable(), functions("dist.", env.distFunctions())))
}

func pushInt(L *lua.LState, n int) int {
	L.Push(lua.LNumber(n))
	return 1
}

// distPlace is the started job's place, or before dist.init the one the
// environment gives.
func distPlace(L *lua.LState, fn string) dist.Place {
	if j := dist.Current(); j != nil {
		return j.Place
	}
	p, err := dist.PlaceFromEnv(os.Getenv)
	if err != nil {
		argError(L, fn, "%s", err.Error())
	}
	return p
}

// shardPlace is (rank, world) for data.loader's shard option.
func shardPlace(L *lua.LState) (int, int) {
	p := distPlace(L, "data.loader")
	return p.Rank, p.World
}

// gpuIndex is the CUDA device index of the engine (-1: the CPU).
func (env *Env) gpuIndex(L *lua.LState, fn string) int {
	if env.Engine.Backend().IsCPU() {
		return -1
	}
	name := env.Engine.DeviceName()
	if i, err := strconv.Atoi(strings.TrimPrefix(name, "cuda")); err == nil && strings.HasPrefix(name, "cuda") {
		return i
	}
	argError(L, fn, "device %s has no collective library (NCCL serves CUDA devices, MPI the CPU)", name)
	return 0
}

// distInit is dist.init(): it places the process and starts the
// communicator (MPI for the CPU device, NCCL for CUDA); again, nothing.
func (env *Env) distInit(L *lua.LState) int {
	p := distPlace(L, "dist.init")
	if env.Sandbox && p.World > 1 {
		argError(L, "dist.init", "collectives are not allowed in a sandboxed runtime")
	}
	if _, err := dist.Init(env.gpuIndex(L, "dist.init")); err != nil {
		argError(L, "dist.init", "%s", err.Error())
	}
	return 0
}

// distBackend is dist.backend(): "mpi", "nccl", or nil in a job of one
// process (or before dist.init).
func (env *Env) distBackend(L *lua.LState) int {
	if j := dist.Current(); j != nil && j.Comm != nil {
		L.Push(lua.LString(j.Comm.Backend()))
		return 1
	}
	L.Push(lua.LNil)
	return 1
}

// comm is the job's communicator, or nil in a job of one process (every
// collective is then the identity). Several processes without dist.init
// is an error: a collective cannot start itself silently on one rank.
func comm(L *lua.LState, fn string) dist.Comm {
	if j := dist.Current(); j != nil {
		return j.Comm
	}
	if p := distPlace(L, fn); p.World > 1 {
		argError(L, fn, "call dist.init() first (this process is rank %d of %d)", p.Rank, p.World)
	}
	return nil
}

// lend lends c the memory of t, refusing memory of the wrong kind.
//
// Alone (c nil) nothing is sent, but t is still checked as a collective
// would check it, so that a script that runs alone does not fail only at
// scale (a view, an i32 tensor).
func (env *Env) lend(L *lua.LState, fn string, c dist.Comm, t *core.Tensor, write bool, use func(core.Buffer) error) {
	err := env.Engine.WithBuffer(t, write, func(b core.Buffer) error {
		switch {
		case c == nil:
			return nil
		case b.OnDevice && !c.OnDevice():
			return fmt.Errorf("MPI reduces host memory, this tensor is on %s", t.Device())
		case !b.OnDevice && c.OnDevice():
			return fmt.Errorf("NCCL reduces GPU memory, this tensor is on the host: move it with to_gpu(t) first")
		}
		return use(b)
	})
	if err != nil {
		argError(L, fn, "%s", err.Error())
	}
}

// distAllReduce is dist.all_reduce(t [, op]): t becomes the sum (avg, max,
// min) of every process's t, in place; it returns t.
func (env *Env) distAllReduce(L *lua.LState) int {
	t := checkTensor(L, "dist.all_reduce", 1)
	op, err := dist.ParseOp(L.OptString(2, "sum"))
	if err != nil {
		argError(L, "dist.all_reduce", "argument 2: %s", err.Error())
	}
	c := comm(L, "dist.all_reduce")
	env.lend(L, "dist.all_reduce", c, t, true, func(b core.Buffer) error { return c.AllReduce(b.Data, b.Count, op) })
	L.Push(L.Get(1))
	return 1
}

// distBroadcast is dist.broadcast(t [, src]): t takes rank src's value (src
// 0-based, as ranks are; 0 by default), in place; it returns t.
func (env *Env) distBroadcast(L *lua.LState) int {
	t := checkTensor(L, "dist.broadcast", 1)
	src := 0
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		src = checkInteger(L, "dist.broadcast", 2)
	}
	world := distPlace(L, "dist.broadcast").World
	if src < 0 || src >= world {
		argError(L, "dist.broadcast", "argument 2: src %d is not a rank (ranks count from 0 to %d)", src, world-1)
	}
	c := comm(L, "dist.broadcast")
	env.lend(L, "dist.broadcast", c, t, true, func(b core.Buffer) error { return c.Broadcast(b.Data, b.Count, src) })
	L.Push(L.Get(1))
	return 1
}

// distAllGather is dist.all_gather(t): a table of every process's t, in
// rank order (entry i is rank i-1's, Lua lists counting from 1).
func (env *Env) distAllGather(L *lua.LState) int {
	t := checkTensor(L, "dist.all_gather", 1)
	out := L.CreateTable(1, 0)
	c := comm(L, "dist.all_gather")
	if c == nil {
		env.lend(L, "dist.all_gather", nil, t, false, nil)
		v, err := env.Engine.Clone(t)
		raise(L, err)
		out.Append(env.push(L, v))
		L.Push(out)
		return 1
	}
	n := int(t.Numel())
	all, err := core.Zeros(c.Size() * n)
	raise(L, err)
	if c.OnDevice() {
		all, err = all.ToDevice(env.Engine, residency.Pass, ggmlcgo.F32)
		raise(L, err)
	}
	env.lend(L, "dist.all_gather", c, all, true, func(recv core.Buffer) error {
		var err error
		env.lend(L, "dist.all_gather", c, t, false, func(send core.Buffer) error {
			err = c.AllGather(send.Data, recv.Data, n)
			return err
		})
		return err
	})
	for r := 0; r < c.Size(); r++ {
		part, err := env.Engine.Narrow(all, 0, r*n, n)
		if err == nil {
			part, err = env.Engine.Reshape(part, t.Shape()...)
		}
		raise(L, err)
		out.Append(env.push(L, part))
	}
	L.Push(out)
	return 1
}

// distBarrier is dist.barrier(): it returns once every process called it.
func (env *Env) distBarrier(L *lua.LState) int {
	if c := comm(L, "dist.barrier"); c != nil {
		if err := env.Engine.Realize(); err != nil {
			raise(L, err)
		}
		if err := c.Barrier(); err != nil {
			argError(L, "dist.barrier", "%s", err.Error())
		}
	}
	return 0
}

// distDataParallel is dist.data_parallel(model): it gives every process
// rank 0's parameters, then has every backward average the gradients
// across processes (core/data_parallel.go), and returns model. model is a
// module (anything with :parameters()) or a list of parameters.
func (env *Env) distDataParallel(L *lua.LState) int {
	const fn = "dist.data_parallel"
	params := modelParameters(L, fn, 1)
	bucket := bucketBytes(L, fn, 2)
	c := comm(L, fn)
	if c == nil {
		L.Push(L.Get(1))
		return 1
	}
	for _, p := range params {
		env.lend(L, fn, c, p, true, func(b core.Buffer) error { return c.Broadcast(b.Data, b.Count, 0) })
	}
	// The sums run in the backward's graph where the backend can
	// (core/data_parallel_sums.go), else (or with GGLUA_DIST_SUMS=between,
	// to compare) between computes.
	var coll *core.GraphCollective
	if gc, ok := c.(dist.GraphComm); ok && os.Getenv("GGLUA_DIST_SUMS") != "between" {
		p, failed, err := gc.GraphCollective(ggmlcgo.DeviceBlockedFor)
		if err != nil {
			argError(L, fn, "%s", err.Error())
		}
		coll = &core.GraphCollective{C: p, OnDevice: c.OnDevice(), Err: failed, BucketBytes: bucket}
	}
	err := env.Engine.SetDataParallel(params, c.Size(), func(b core.Buffer) error {
		if b.OnDevice != c.OnDevice() {
			return fmt.Errorf("gradients are in %s memory, %s reduces the other kind", map[bool]string{true: "GPU", false: "host"}[b.OnDevice], c.Backend())
		}
		return c.AllReduce(b.Data, b.Count, dist.Sum)
	}, coll)
	if err != nil {
		argError(L, fn, "%s", err.Error())
	}
	L.Push(L.Get(1))
	return 1
}

// bucketBytes reads argument n, data_parallel's options: bucket_cap_mb,
// the size of a bucket of gradients summed at once in the backward's graph
// (PyTorch DDP's, in MiB as there; default 25). 0: the default.
func bucketBytes(L *lua.LState, fn string, n int) int64 {
	o := readOpts(L, fn, n)
	mb := o.number("bucket_cap_mb", 0)
	o.done()
	const most = 1 << 20 // MiB: a TiB bucket is a typo, and int64 bytes stay exact
	if o.has("bucket_cap_mb") && !(mb > 0 && mb <= most) {
		argError(L, fn, "option bucket_cap_mb must be > 0 and at most %d (MiB), got %g", most, mb)
	}
	if !o.has("bucket_cap_mb") {
		return 0
	}
	return max(1, int64(mb*(1<<20)))
}

// distNoSync is dist.no_sync(fn): fn runs with the gradients' sums held
// back (backward accumulates locally), and the first backward after it
// averages everything accumulated, as PyTorch DDP's model.no_sync().
func (env *Env) distNoSync(L *lua.LState) int {
	f, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		argError(L, "dist.no_sync", "expected a function to run (dist.no_sync(fn)), got %s", L.Get(1).Type())
	}
	return pushAll(L, env.callLua(L, f, env.Engine.NoSync))
}

// modelParameters reads argument n: a module (its parameters()) or a list
// of tensors.
func modelParameters(L *lua.LState, fn string, n int) []*core.Tensor {
	tbl, ok := L.Get(n).(*lua.LTable)
	if !ok {
		argError(L, fn, "argument %d: expected a module or a list of parameters, got %s", n, luaTypeName(L.Get(n)))
	}
	list := tbl
	if m := L.GetField(tbl, "parameters"); m != lua.LNil {
		f, ok := m.(*lua.LFunction)
		if !ok {
			argError(L, fn, "argument %d: parameters is a %s, expected a method", n, luaTypeName(m))
		}
		L.Push(f)
		L.Push(tbl)
		L.Call(1, 1)
		res := L.Get(-1)
		L.Pop(1)
		if list, ok = res.(*lua.LTable); !ok {
			argError(L, fn, "argument %d: parameters() returned a %s, expected a list", n, luaTypeName(res))
		}
	}
	var params []*core.Tensor
	for i := 1; i <= list.Len(); i++ {
		t := toTensor(list.RawGetInt(i))
		if t == nil {
			argError(L, fn, "argument %d: parameter %d is a %s, expected a tensor", n, i, luaTypeName(list.RawGetInt(i)))
		}
		params = append(params, t)
	}
	if len(params) == 0 {
		argError(L, fn, "argument %d: no parameters", n)
	}
	return params
}
