package residency

import (
	"errors"
	"fmt"

	"github.com/gglua/gglua/ggmlcgo"
)

// Handle reaches a device tensor: {tensor, shape, scope, gen}. It is live
// while its own pool is at the generation it was allocated in.
type Handle struct {
	state  *State
	scope  Scope
	gen    int64
	tensor ggmlcgo.Tensor
	shape  []int
	typ    ggmlcgo.Type
	host   []byte // a host copy of the data, if the owner cached one
	// parent is the handle whose memory an alias shares: an alias keeps it
	// reachable, so that the memory is not taken back under the alias.
	parent   *Handle
	pinnedAt uint64 // the State's epoch when Tensor last pinned it
}

// The errors callers test with errors.Is; every message that reports one
// wraps it.
var (
	// ErrStale: a handle whose pool was reset (its memory is gone).
	ErrStale = errors.New("stale handle")
	// ErrBudget: an allocation the budget (SetLimit) does not allow. Its
	// text, "budget exceeded", starts every such message.
	ErrBudget = errors.New("budget exceeded")
)

// Live reports whether the handle's memory still exists.
func (h *Handle) Live() bool { return h.gen == h.state.pools[h.scope].gen }

// Scope is the pool the handle belongs to.
func (h *Handle) Scope() Scope { return h.scope }

// Gen is the generation of its pool the handle was allocated in.
func (h *Handle) Gen() int64 { return h.gen }

// Shape is the tensor's shape, outermost first.
func (h *Handle) Shape() []int { return append([]int(nil), h.shape...) }

// Type is the element type.
func (h *Handle) Type() ggmlcgo.Type { return h.typ }

// Nbytes is the size of the data (a quantized type's whole blocks).
func (h *Handle) Nbytes() int64 {
	n := int64(1)
	for _, d := range h.shape {
		n *= int64(d)
	}
	return n / h.typ.BlockSize() * h.typ.TypeBytes()
}

func (h *Handle) staleError(op string) error {
	return fmt.Errorf("%s: %w: its buffer was freed by a reset of the %s pool (allocated in generation %d, the pool is now at %d)",
		op, ErrStale, h.scope, h.gen, h.state.pools[h.scope].gen)
}

// Tensor is the ggml tensor, for building graphs. It is an error once the
// handle is stale, so a freed tensor never reaches ggml. A graph built from
// it may read its memory until the State is told Computed (or the pass
// pool is reset): until then the handle is kept reachable, so that its
// memory is not given to another tensor even if its owner drops it.
func (h *Handle) Tensor() (ggmlcgo.Tensor, error) {
	if !h.Live() {
		return ggmlcgo.Tensor{}, h.staleError("tensor")
	}
	h.state.pin(h)
	return h.tensor, nil
}

// Write uploads data (exactly Nbytes) to the device and drops the host copy.
func (h *Handle) Write(data []byte) error {
	if !h.Live() {
		return h.staleError("write")
	}
	if err := h.tensor.SetVia(data, h.state.stagingFor(len(data))); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	h.state.h2d += int64(len(data))
	h.host = nil
	return nil
}

// Read copies the data into dst (exactly Nbytes). A stale handle returns its
// host copy if it has one and is otherwise an error naming the pool.
func (h *Handle) Read(dst []byte) error {
	if !h.Live() {
		if h.HostCopy() == nil {
			return h.staleError("read")
		}
		if len(dst) != len(h.host) {
			return fmt.Errorf("read: tensor holds %d bytes, buffer has %d", len(h.host), len(dst))
		}
		copy(dst, h.host)
		return nil
	}
	if err := h.tensor.Get(dst); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	h.state.d2h += int64(len(dst))
	return nil
}

// ReadNow is Read without waiting for the device's queued graphs (ggmlcgo's
// Tensor.GetNow): the caller knows none of them writes h.
func (h *Handle) ReadNow(dst []byte) error {
	if !h.Live() {
		return h.Read(dst)
	}
	if err := h.tensor.GetNow(dst); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	h.state.d2h += int64(len(dst))
	return nil
}

// CopyToHost reads the value now and keeps it as the host copy
// (KeepHostCopy).
func (h *Handle) CopyToHost() error {
	raw := make([]byte, h.Nbytes())
	if err := h.Read(raw); err != nil {
		return err
	}
	return h.KeepHostCopy(raw)
}

// KeepHostCopy records data (which the caller must not change afterwards) as
// the host copy that Read falls back to once the handle is stale. A later
// Write drops it.
func (h *Handle) KeepHostCopy(data []byte) error {
	if int64(len(data)) != h.Nbytes() {
		return fmt.Errorf("host copy: tensor holds %d bytes, copy has %d", h.Nbytes(), len(data))
	}
	h.host = data
	return nil
}

// Upload allocates a tensor for r and writes data to it. Nothing is allocated
// when it fails.
func (s *State) Upload(r Request, data []byte) (*Handle, error) {
	nbytes, err := s.check(r)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != nbytes {
		return nil, fmt.Errorf("residency: upload of %d bytes into a %v %v tensor of %d bytes", len(data), r.Type, r.Shape, nbytes)
	}
	h, err := s.Alloc(r)
	if err != nil {
		return nil, err
	}
	return h, h.Write(data)
}

// Alias is a handle to t, a view into h's memory: same pool, same
// generation, so it goes stale with h, and h's memory stays h's while the
// alias is reachable.
func (h *Handle) Alias(t ggmlcgo.Tensor, shape []int) *Handle {
	c := *h
	c.tensor, c.typ, c.host = t, t.Type(), nil
	c.shape = append([]int(nil), shape...)
	c.parent, c.pinnedAt = h, 0
	if h.parent != nil {
		c.parent = h.parent
	}
	return &c
}

// Zero fills the tensor with zeros on the device (no host traffic).
func (h *Handle) Zero() error {
	if !h.Live() {
		return h.staleError("zero")
	}
	return h.tensor.Zero()
}

// DropHostCopy forgets the host copy (the device value changed).
func (h *Handle) DropHostCopy() { h.host = nil }

// HostCopy is the host copy kept by KeepHostCopy (nil if none).
func (h *Handle) HostCopy() []byte { return h.host }
