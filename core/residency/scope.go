package residency

import "fmt"

// Scope names one of the two pools. The zero value is Pass: handles default to
// the pass pool.
type Scope uint8

const (
	Pass Scope = iota
	Persistent
	nScopes
)

func (s Scope) String() string {
	switch s {
	case Pass:
		return "pass"
	case Persistent:
		return "persistent"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// ParseScope turns "pass" or "persistent" into a Scope.
func ParseScope(name string) (Scope, error) {
	switch name {
	case "pass":
		return Pass, nil
	case "persistent":
		return Persistent, nil
	}
	return 0, fmt.Errorf("unknown scope %q (expected \"pass\" or \"persistent\")", name)
}

// ParseResetScope turns the argument of reset into the pools it frees:
// "pass", "persistent", or "all" (also the empty string, the default).
func ParseResetScope(name string) ([]Scope, error) {
	if name == "" || name == "all" {
		return []Scope{Pass, Persistent}, nil
	}
	s, err := ParseScope(name)
	if err != nil {
		return nil, fmt.Errorf("unknown reset scope %q (expected \"pass\", \"persistent\" or \"all\")", name)
	}
	return []Scope{s}, nil
}
