package tests

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmbedExample runs examples/embed, the Go program that trains through
// a script and reads the weights back.
func TestEmbedExample(t *testing.T) {
	out, err := exec.Command("go", "run", "../examples/embed").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "learnt y = 0.500 x1 -2.000 x2 +3.000 x3 +1.000")
	assert.Contains(t, string(out), "persistent pool")
}
