package core

import (
	"errors"
	"fmt"

	"github.com/gglua/gglua/core/residency"
)

// The failures a caller can tell apart with errors.Is. Every error core
// returns for one of these wraps it; the message itself stays the readable
// sentence (op, shapes, values) that a user sees.
var (
	// ErrShape: shapes, dims or element counts that do not fit an op.
	ErrShape = errors.New("shape mismatch")
	// ErrArgument: a value an op cannot take (a range outside a dim, an
	// index outside its rows, a negative rate, ...).
	ErrArgument = errors.New("bad argument")
	// ErrStale: a tensor whose memory a pool reset freed.
	ErrStale = residency.ErrStale
	// ErrBudget: an allocation past the residency budget.
	ErrBudget = residency.ErrBudget
)

// kindError is a message that wraps one of the sentinels above without
// repeating its text.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// shapeErrorf is an ErrShape with a formatted message.
func shapeErrorf(format string, args ...any) error {
	return &kindError{ErrShape, fmt.Sprintf(format, args...)}
}

// argErrorf is an ErrArgument with a formatted message.
func argErrorf(format string, args ...any) error {
	return &kindError{ErrArgument, fmt.Sprintf(format, args...)}
}
