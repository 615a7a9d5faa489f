package luabind

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
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
func (env *Env) comm(L *lua.LState, fn string) dist.Comm {
	if j := dist.Current(); j != nil {
		// A backward that failed here while averaging left this process's
		// gradient sums out of step with the others': a collective now
		// would pair with one of theirs (a pending sum) and mix the two.
		if err := env.Engine.OutOfStep(); err != nil {
			argError(L, fn, "%s", err.Error())
		}
		return j.Comm
	}
	if p := distPlace(L, fn); p.World > 1 {
		argError(L, fn, "call dist.init() first (this process is rank %d of %d)", p.Rank, p.World)
	}
	return nil
}

// lend lends c (not nil) the memory of t, refusing memory of the wrong
// kind. The caller has checked t with lendable and agreed with the other
// ranks first, so a refusal here is a failure of the library.
func (env *Env) lend(L *lua.LState, fn string, c dist.Comm, t *core.Tensor, write bool, use func(core.Buffer) error) {
	err := env.Engine.WithBuffer(t, write, func(b core.Buffer) error {
		if err := memoryKind(c, t, b); err != nil {
			return err
		}
		return use(b)
	})
	if err != nil {
		argError(L, fn, "%s", err.Error())
	}
}

// tensorArg reads argument 1, the tensor a collective lends c (nil: alone),
// and what this rank refuses of it (nil: nothing), for agree.
func (env *Env) tensorArg(L *lua.LState, fn string, c dist.Comm, write bool) (*core.Tensor, func()) {
	t := toTensor(L.Get(1))
	if t == nil {
		return nil, func() { checkTensor(L, fn, 1) }
	}
	if err := env.lendable(c, t, write); err != nil {
		return t, func() { argError(L, fn, "%s", err.Error()) }
	}
	return t, nil
}

// orElse is the first refusal of two.
func orElse(first, then func()) func() {
	if first != nil {
		return first
	}
	return then
}

// alone raises this rank's refusal, if any: a job of one refuses what a
// collective would (so that a script does not fail only at scale).
func alone(refuse func()) {
	if refuse != nil {
		refuse()
	}
}

// tensorText describes a collective's tensor for agree's messages.
func tensorText(t *core.Tensor) string {
	if t == nil {
		return "no tensor"
	}
	return "a tensor of shape " + shapeText(t.Shape())
}

// distAllReduce is dist.all_reduce(t [, op]): t becomes the sum (avg, max,
// min) of every process's t, in place; it returns t.
func (env *Env) distAllReduce(L *lua.LState) int {
	const fn = "dist.all_reduce"
	c := env.comm(L, fn)
	t, refuse := env.tensorArg(L, fn, c, true)
	op, err := dist.ParseOp(L.OptString(2, "sum"))
	if err != nil {
		refuse = orElse(refuse, func() { argError(L, fn, "argument 2: %s", err.Error()) })
	}
	if c == nil {
		alone(refuse)
	} else {
		h := tensorHeader(callAllReduce, t)
		h[fOp] = uint64(op) + 1
		env.agree(L, fn, c, h, refuse, fmt.Sprintf("%s with op %q", tensorText(t), op), "a tensor of the same shape and dtype, and the same op")
		env.lend(L, fn, c, t, true, func(b core.Buffer) error { return c.AllReduce(b.Data, b.Count, op) })
	}
	L.Push(L.Get(1))
	return 1
}

// distBroadcast is dist.broadcast(t [, src]): t takes rank src's value (src
// 0-based, as ranks are; 0 by default), in place; it returns t.
func (env *Env) distBroadcast(L *lua.LState) int {
	const fn = "dist.broadcast"
	c := env.comm(L, fn)
	t, refuse := env.tensorArg(L, fn, c, true)
	src := 0
	if v := L.Get(2); v != lua.LNil {
		if n, ok := v.(lua.LNumber); ok && float64(n) == math.Trunc(float64(n)) && math.Abs(float64(n)) <= 1<<53 {
			src = int(n)
		} else {
			refuse = orElse(refuse, func() { checkInteger(L, fn, 2) })
		}
	}
	if world := distPlace(L, fn).World; src < 0 || src >= world {
		refuse = orElse(refuse, func() {
			argError(L, fn, "argument 2: src %d is not a rank (ranks count from 0 to %d)", src, world-1)
		})
	}
	if c == nil {
		alone(refuse)
	} else {
		h := tensorHeader(callBroadcast, t)
		h[fSrc] = uint64(max(src, 0))
		env.agree(L, fn, c, h, refuse, fmt.Sprintf("%s with src %d", tensorText(t), src), "a tensor of the same shape and dtype, and the same src")
		env.lend(L, fn, c, t, true, func(b core.Buffer) error { return c.Broadcast(b.Data, b.Count, src) })
	}
	L.Push(L.Get(1))
	return 1
}

// distAllGather is dist.all_gather(t): a table of every process's t, in
// rank order (entry i is rank i-1's, Lua lists counting from 1). Each entry
// is a tensor of its own (no view, no history), alone as with several
// processes, so that what a script does with one works either way.
func (env *Env) distAllGather(L *lua.LState) int {
	const fn = "dist.all_gather"
	c := env.comm(L, fn)
	t, refuse := env.tensorArg(L, fn, c, false)
	out := L.CreateTable(1, 0)
	if c == nil {
		alone(refuse)
		v, err := env.Engine.Clone(t.Detach())
		raise(L, err)
		out.Append(env.push(L, v))
		L.Push(out)
		return 1
	}
	env.agree(L, fn, c, tensorHeader(callAllGather, t), refuse, tensorText(t), "a tensor of the same shape and dtype")
	n := int(t.Numel())
	all, err := core.Zeros(c.Size() * n)
	raise(L, err)
	if c.OnDevice() {
		all, err = all.ToDevice(env.Engine, residency.Pass, ggmlcgo.F32)
		raise(L, err)
	}
	env.lend(L, fn, c, all, true, func(recv core.Buffer) error {
		var err error
		env.lend(L, fn, c, t, false, func(send core.Buffer) error {
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
		if err == nil {
			part, err = env.Engine.Clone(part)
		}
		raise(L, err)
		out.Append(env.push(L, part))
	}
	L.Push(out)
	return 1
}

// distBarrier is dist.barrier(): it returns once every process called it.
// The ranks' agreement on the call is itself the barrier (an all_reduce
// returns once every rank has sent its part), so that a rank calling
// another collective meanwhile is an error rather than a hang.
func (env *Env) distBarrier(L *lua.LState) int {
	const fn = "dist.barrier"
	if c := env.comm(L, fn); c != nil {
		env.agree(L, fn, c, header{fCall: callBarrier}, nil, "", "")
	}
	return 0
}

// distDataParallel is dist.data_parallel(model): it gives every process
// rank 0's parameters and buffers (every tensor of the module's
// state_dict), then has every backward average the parameters' gradients
// across processes (core/data_parallel.go), and returns model. model is a
// module (anything with :parameters()) or a list of parameters. Models
// wrapped by earlier calls stay averaged, as each DDP wrapper averages its
// own.
func (env *Env) distDataParallel(L *lua.LState) int {
	const fn = "dist.data_parallel"
	bucket := bucketBytes(L, fn, 2)
	c := env.comm(L, fn)
	m := env.modelTensors(L, fn, 1, c)
	if c == nil {
		alone(m.refuse)
		L.Push(L.Get(1))
		return 1
	}
	old, oldFrozen := env.Engine.DataParallelParams(), env.Engine.DataParallelFrozen()
	// The sums run in the backward's graph where the backend can
	// (core/data_parallel_sums.go), else (or with GGLUA_DIST_SUMS=between,
	// to compare) between computes.
	gc, inGraph := c.(dist.GraphComm)
	inGraph = inGraph && os.Getenv("GGLUA_DIST_SUMS") != "between"
	h := header{fCall: callDataParallel, fParams: uint64(len(m.params)), fOthers: uint64(len(m.others)),
		fAveraged: uint64(len(old)), fBucket: uint64(bucket)}
	if !inGraph {
		h[fSums] = 1
	}
	h.setShapes(m.shapes()...)
	env.agree(L, fn, c, h, m.refuse, m.describe(),
		"the same model, with as many parameters and buffers of the same shapes in the same order, and the same options")
	for _, t := range slices.Concat(m.params, m.others) {
		env.lend(L, fn, c, t, true, func(b core.Buffer) error { return c.Broadcast(b.Data, b.Count, 0) })
	}
	var coll *core.GraphCollective
	if inGraph {
		p, failed, err := gc.GraphCollective(ggmlcgo.DeviceBlockedFor)
		if err != nil {
			argError(L, fn, "%s", err.Error())
		}
		coll = &core.GraphCollective{C: p, OnDevice: c.OnDevice(), Err: failed, BucketBytes: bucket}
	}
	// SetDataParallel replaces the averaged set: it gets the earlier
	// calls' parameters too (first, so their order stays), once each.
	seen := map[*core.Tensor]bool{}
	var params []*core.Tensor
	for _, p := range slices.Concat(old, m.params) {
		if !seen[p] {
			seen[p] = true
			params = append(params, p)
		}
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
	// Frozen parameters of every wrapped model, those of earlier calls
	// too, unfrozen since or not: one is dropped only once a call averages
	// it (in seen, the averaged set).
	var frozen []*core.Tensor
	for _, t := range slices.Concat(oldFrozen, m.frozen) {
		if !seen[t] {
			seen[t] = true
			frozen = append(frozen, t)
		}
	}
	env.Engine.WatchFrozen(frozen)
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

// model is what data_parallel reads of its argument.
type model struct {
	params []*core.Tensor // averaged: the module's parameters(), or the list
	others []*core.Tensor // only broadcast: frozen parameters, the rest of its state_dict()
	frozen []*core.Tensor // the frozen parameters (in others too)
	names  []string       // others' names in state_dict()
	refuse func()         // what this rank refuses of them (nil: nothing), for agree
}

// modelTensors reads argument n: a module or a list of parameters. A
// module's other tensors are the parameters() that do not require grad
// (frozen) and the rest of what its state_dict() lists (buffers, such as
// BatchNorm's running statistics, by name): DDP broadcasts those too, and
// averages only the gradients of parameters that require grad. What
// depends on the tensors (no parameters, a view, memory of the wrong kind)
// is a refusal, raised after agree has told every rank, rather than an
// error here, which other ranks would wait for in a broadcast.
func (env *Env) modelTensors(L *lua.LState, fn string, n int, c dist.Comm) *model {
	tbl, ok := L.Get(n).(*lua.LTable)
	if !ok {
		argError(L, fn, "argument %d: expected a module or a list of parameters, got %s", n, luaTypeName(L.Get(n)))
	}
	m := &model{}
	refuse := func(format string, args ...any) {
		m.refuse = orElse(m.refuse, func() { argError(L, fn, "argument %d: "+format, append([]any{n}, args...)...) })
	}
	list, module := callMethod(L, fn, n, tbl, "parameters")
	if !module {
		list = tbl
	}
	seen := map[*core.Tensor]bool{}
	for i := 1; i <= list.Len(); i++ {
		v := list.RawGetInt(i)
		t := toTensor(v)
		if t == nil {
			refuse("parameter %d is a %s, expected a tensor", i, luaTypeName(v))
			continue
		}
		if seen[t] { // a tied weight
			continue
		}
		seen[t] = true
		shape := shapeText(t.Shape())
		if module && t.IsLeaf() && !t.RequiresGrad() {
			// A frozen parameter, as PyTorch's parameters() lists them:
			// DDP broadcasts it and averages nothing of it.
			m.others = append(m.others, t)
			m.frozen = append(m.frozen, t)
			m.names = append(m.names, fmt.Sprintf("parameter %d", i))
			if err := env.lendable(c, t, true); err != nil {
				refuse("parameter %d (shape %s): %s", i, shape, err.Error())
			}
			continue
		}
		m.params = append(m.params, t)
		switch {
		case !t.RequiresGrad() || !t.IsLeaf():
			refuse("parameter %d (shape %s) is not a leaf that requires grad (tensor.param makes one)", i, shape)
		case t.IsView():
			refuse("parameter %d (shape %s) is a view", i, shape)
		default:
			if err := env.lendable(c, t, true); err != nil {
				refuse("parameter %d (shape %s): %s", i, shape, err.Error())
			}
		}
	}
	if len(m.params) == 0 && m.refuse == nil {
		refuse("no parameters that require grad")
	}
	if !module {
		return m
	}
	sd, ok := callMethod(L, fn, n, tbl, "state_dict")
	if !ok {
		return m
	}
	byName := map[string]lua.LValue{}
	sd.ForEach(func(k, v lua.LValue) {
		if s, ok := k.(lua.LString); ok {
			byName[string(s)] = v
		}
	})
	for _, name := range slices.Sorted(maps.Keys(byName)) { // alike on every rank
		t := toTensor(byName[name])
		switch {
		case t == nil:
			refuse("state_dict()'s %s is a %s, expected a tensor", name, luaTypeName(byName[name]))
		case seen[t]:
		default:
			seen[t] = true
			m.others = append(m.others, t)
			m.names = append(m.names, name)
			if err := env.lendable(c, t, true); err != nil {
				refuse("state_dict()'s %s (shape %s): %s", name, shapeText(t.Shape()), err.Error())
			}
		}
	}
	return m
}

// callMethod calls tbl:name() when tbl has such a method and returns the
// table it returned (ok false: no such method).
func callMethod(L *lua.LState, fn string, n int, tbl *lua.LTable, name string) (*lua.LTable, bool) {
	m := L.GetField(tbl, name)
	if m == lua.LNil {
		return nil, false
	}
	f, ok := m.(*lua.LFunction)
	if !ok {
		argError(L, fn, "argument %d: %s is a %s, expected a method", n, name, luaTypeName(m))
	}
	L.Push(f)
	L.Push(tbl)
	L.Call(1, 1)
	res := L.Get(-1)
	L.Pop(1)
	out, ok := res.(*lua.LTable)
	if !ok {
		argError(L, fn, "argument %d: %s() returned a %s, expected a table", n, name, luaTypeName(res))
	}
	return out, true
}

// shapes are the model's tensors' shapes, in the order they are broadcast.
func (m *model) shapes() [][]int {
	var out [][]int
	for _, t := range slices.Concat(m.params, m.others) {
		out = append(out, t.Shape())
	}
	return out
}

// describe is the model as agree's messages name it.
func (m *model) describe() string {
	list := func(ts []*core.Tensor, names []string) string {
		var parts []string
		for i, t := range ts {
			if i == 12 {
				parts = append(parts, "...")
				break
			}
			s := shapeText(t.Shape())
			if names != nil {
				s = names[i] + " " + s
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ", ")
	}
	s := fmt.Sprintf("a model with %s to average (shapes %s)", plural(len(m.params), "parameter"), list(m.params, nil))
	if len(m.others) > 0 {
		s += fmt.Sprintf(" and %s (%s)", plural(len(m.others), "other tensor"), list(m.others, m.names))
	}
	return s
}

// plural is "1 parameter", "2 parameters".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
