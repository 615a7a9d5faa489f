package core

import (
	"fmt"
	"math"
)

// AnomalyMode says what an optimizer step does when a gradient holds NaN or
// Inf (ggmlR's check_grad_anomaly): nothing (the default: the check costs a
// read of one number per parameter), warn and skip the update, or stop with
// an error.
type AnomalyMode int

const (
	AnomalyOff AnomalyMode = iota
	AnomalyWarn
	AnomalyStop
)

// ParseAnomalyMode reads "off", "warn" or "stop".
func ParseAnomalyMode(s string) (AnomalyMode, error) {
	switch s {
	case "off", "silent":
		return AnomalyOff, nil
	case "warn":
		return AnomalyWarn, nil
	case "stop", "error":
		return AnomalyStop, nil
	}
	return 0, argErrorf("anomaly mode %q: expected \"off\", \"warn\" or \"stop\"", s)
}

// SetAnomalyMode sets the check; warn reports through warn (nil: ignored).
func (e *Engine) SetAnomalyMode(m AnomalyMode, warn func(string)) {
	e.anomaly, e.warn = m, warn
}

// checkGrads looks for NaN/Inf in the gradients of params (one reduction
// per parameter, computed on the device, one number read back each). It
// returns an error in stop mode, skip=true in warn mode.
func (e *Engine) checkGrads(params []*Tensor) (skip bool, err error) {
	if e.anomaly == AnomalyOff {
		return false, nil
	}
	for i, p := range params {
		g := p.Grad()
		if g == nil {
			continue
		}
		s, err := e.Sum(g) // NaN and Inf survive a sum
		if err != nil {
			return false, err
		}
		v, err := s.Item()
		if err != nil {
			return false, err
		}
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			continue
		}
		msg := fmt.Sprintf("anomaly: the gradient of parameter %d (shape %s) holds NaN or Inf", i+1, ShapeString(p.shape))
		if e.anomaly == AnomalyStop {
			return false, fmt.Errorf("%s; the step was not taken", msg)
		}
		if e.warn != nil {
			e.warn(msg + "; skipping this step")
		}
		return true, nil
	}
	return false, nil
}
