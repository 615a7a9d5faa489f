package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"weak"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// EngineOptions chooses the engine's device.
type EngineOptions struct {
	// Device is "cpu" (the default), "auto" (the first GPU if one is
	// registered, else the CPU) or a ggml device name such as "CUDA0"; "cuda"
	// means the first CUDA device.
	Device string
	// Threads sizes the CPU threadpool (<= 0: one per core).
	Threads int
}

// Engine is one backend with its residency state. It is used by one
// goroutine at a time; parallel runtimes each have their own.
type Engine struct {
	backend *ggmlcgo.Backend
	res     *residency.State

	// Lazy work (lazy.go): op nodes are described in nodeCtxs, which belong
	// to the current pass, and computed together by Realize.
	nodeCtxs []*ggmlcgo.Context
	threads  threadChoosers // CPU: one thread or all, by measured speed (threads.go)
	pending  []*Tensor
	// insertAt, where it is not 0, is 1 + the place in pending at which
	// new work is queued instead of the end (queue).
	insertAt int
	eager    bool
	stats    Stats

	tape tape // autograd.go
	// backwarding: Backward is building gradients; what it makes is
	// scratch (tensor.go) unless it becomes a .grad.
	backwarding bool
	rng         *rand.Rand
	ctx         context.Context // cancels graph computes (see SetContext)
	// batch numbers the pending work: each Realize that computes it (or
	// finds none) and each drop of it ends one; lost are the batches
	// dropped. An optimizer learns from them whether a step it queued ran
	// (optim.go's settle).
	batch int64
	lost  []int64

	releases []func()     // C memory the pending nodes use, freed once they ran
	useBLAS  bool         // large matmuls go to OpenBLAS (CPU, openblas builds)
	autocast ggmlcgo.Type // products' operand type: F32 (the zero value), or BF16 inside Autocast

	passLive     []weak.Pointer[Tensor] // tensors placed in the pass pool (pass_memory.go)
	kept         []weak.Pointer[Tensor] // values moved into the persistent pool for a caller (pass_memory.go's keep)
	pendingBytes int64                  // bytes of the pending results
	uploads      map[*Tensor]upload     // host tensors' copies in the current pass (lazy.go)
	causal       map[[2]int]*Tensor     // attention's causal biases by shape (ops_attention.go)
	mem          passMemory             // steps seen, for the pass pool's bound (pass_memory.go)

	dp      *dataParallel // gradient averaging across processes (data_parallel.go)
	anomaly AnomalyMode   // see anomaly.go
	warn    func(string)
	profile *opProfile // GGLUA_OPPROFILE=1 (op_profile.go)
	// beforeCompute, when set (by tests), sees every graph Realize computes.
	beforeCompute func(*ggmlcgo.Graph)
}

// TakeRand makes e draw from old's generator (device.use keeps the seed).
func (e *Engine) TakeRand(old *Engine) { e.rng = old.Rand() }

// SetContext makes cancelling ctx stop graph computes between nodes; the
// runtime sets it for the duration of each script. nil means none.
func (e *Engine) SetContext(ctx context.Context) { e.ctx = ctx }

// Context is what SetContext set (nil if nothing).
func (e *Engine) Context() context.Context { return e.ctx }

// Rand is the engine's random generator (dropout, initialisers).
func (e *Engine) Rand() *rand.Rand {
	if e.rng == nil {
		e.rng = rand.New(rand.NewSource(0))
	}
	return e.rng
}

// NewEngine starts a backend on the chosen device.
func NewEngine(opts EngineOptions) (*Engine, error) {
	name, err := resolveDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	b, err := ggmlcgo.NewForDevice(name, opts.Threads)
	if err != nil {
		return nil, err
	}
	return &Engine{backend: b, res: residency.New(b), eager: os.Getenv("GGLUA_EAGER") == "1",
		useBLAS: b.IsCPU() && ggmlcgo.BLASAvailable() && os.Getenv("GGLUA_NO_BLAS") != "1",
		profile: newOpProfile()}, nil
}

func resolveDevice(want string) (string, error) {
	var loadErr error
	if w := strings.ToLower(want); w != "" && w != "cpu" {
		loadErr = loadDynamicBackends()
	}
	devs := ggmlcgo.Devices()
	find := func(match func(ggmlcgo.DeviceInfo) bool) (string, bool) {
		for _, d := range devs {
			if match(d) {
				return d.Name, true
			}
		}
		return "", false
	}
	var name string
	var ok bool
	switch w := strings.ToLower(want); w {
	case "", "cpu":
		name, ok = find(func(d ggmlcgo.DeviceInfo) bool { return d.Type == "cpu" })
	case "auto":
		if name, ok = find(func(d ggmlcgo.DeviceInfo) bool { return d.Type == "gpu" }); !ok {
			name, ok = find(func(d ggmlcgo.DeviceInfo) bool { return d.Type == "cpu" })
		}
	case "cuda", "gpu":
		name, ok = find(func(d ggmlcgo.DeviceInfo) bool {
			return d.Type == "gpu" && (w == "gpu" || strings.HasPrefix(strings.ToLower(d.Name), "cuda"))
		})
	default:
		name, ok = find(func(d ggmlcgo.DeviceInfo) bool { return strings.EqualFold(d.Name, want) })
	}
	if !ok {
		var have []string
		for _, d := range devs {
			have = append(have, d.Name)
		}
		msg := fmt.Sprintf("device %q is not available (devices: %s; GPU backends are loaded from GGLUA_BACKEND_PATH or the executable's folder)", want, strings.Join(have, ", "))
		if loadErr != nil {
			msg += ": " + loadErr.Error()
		}
		return "", errors.New(msg)
	}
	return name, nil
}

// Residency is the engine's pools.
func (e *Engine) Residency() *residency.State { return e.res }

// Backend is the engine's ggml backend.
func (e *Engine) Backend() *ggmlcgo.Backend { return e.backend }

// DeviceName is the lower-cased name of the engine's device ("cpu", "cuda0").
func (e *Engine) DeviceName() string { return strings.ToLower(e.backend.Name()) }

// Close frees every device buffer and the backend.
func (e *Engine) Close() {
	e.profile.write(os.Stderr, 40)
	e.profile = nil
	e.dropPending()
	e.freeNodeContexts()
	e.dp.free()
	e.res.Close()
	e.backend.Close()
}
