package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestEmbedExample runs examples/embed, the Go program that trains through
// a script and reads the weights back.
func TestEmbedExample(t *testing.T) {
	out, err := exec.Command("go", "run", "../examples/embed").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "learnt y = 0.500 x1 -2.000 x2 +3.000 x3 +1.000")
	assert.Contains(t, string(out), "persistent pool")
}

// runExample runs scripts/examples/<name> with args in a fresh runtime of
// one thread and returns what it printed. The examples take their sizes as
// arguments, so these runs are small: a few seconds each.
func runExample(t *testing.T, sandbox bool, name string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: sandbox, Stdout: &out})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoFile(context.Background(), filepath.Join("..", "scripts", "examples", name), args...)
	require.NoError(t, err, out.String())
	return out.String()
}

// sampleOf returns the text an example printed between its two "----" lines.
func sampleOf(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n----\n")
	require.True(t, ok, "no sample in:\n%s", out)
	sample, _, ok := strings.Cut(rest, "\n----\n")
	require.True(t, ok, "the sample does not end in:\n%s", out)
	return sample
}

// TestCNNExample: the ConvNet learns bars and crosses: the epoch loss
// falls and the held-out pictures are classified well above chance (1/3).
func TestCNNExample(t *testing.T) {
	out := runExample(t, true, "cnn.lua", "8", "400")
	first, last := number(t, out, `train loss ([0-9.]+) ->`), number(t, out, `train loss [0-9.]+ -> ([0-9.]+)`)
	assert.Less(t, last, first/3, out)
	assert.Greater(t, number(t, out, `test accuracy ([0-9.]+)%`), 75.0, out)
}

// TestLSTMExample: the character LSTM learns the poem (its loss falls far
// below uniform guessing) and samples the length asked for, from the
// prompt, in the poem's characters.
func TestLSTMExample(t *testing.T) {
	out := runExample(t, true, "lstm.lua", "80", "40")
	first, last := number(t, out, `loss ([0-9.]+) ->`), number(t, out, `loss [0-9.]+ -> ([0-9.]+)`)
	assert.Greater(t, first, 3.0, "an untrained model guesses about uniformly over the 36 characters")
	assert.Less(t, last, first/3, out)
	sample := sampleOf(t, out)
	assert.Len(t, sample, len("The Owl")+40)
	assert.True(t, strings.HasPrefix(sample, "The Owl"), sample)
	assert.Regexp(t, `^[A-Za-z ,.!"\-\n]+$`, sample, "only characters of the poem")
	assert.Contains(t, out, fmt.Sprintf("sample (%d characters):", len(sample)))
}

// TestGPTExample: the transformer trains with AdamW's two groups, warm-up
// and cosine, and clipping; its checkpoint file loads into a fresh model
// that gives the same loss, and that model samples the length asked for.
func TestGPTExample(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "gpt.gguf")
	out := runExample(t, false, "gpt.lua", "80", ckpt, "50")
	first, last := number(t, out, `loss ([0-9.]+) ->`), number(t, out, `loss [0-9.]+ -> ([0-9.]+)`)
	assert.Greater(t, first, 3.0, "an untrained model guesses about uniformly over the 32 characters")
	assert.Less(t, last, first/1.8, out)
	assert.Contains(t, out, "AdamW: 9 matrices with weight decay, 20 tensors without",
		"qkv, proj and the two MLP weights of 2 blocks, and the head; embeddings, biases and LayerNorms not")
	info, err := os.Stat(ckpt)
	require.NoError(t, err, "the checkpoint was written")
	assert.Greater(t, info.Size(), int64(4*60000), "61,248 f32 parameters")
	trained := number(t, out, `checkpoint .*: loss ([0-9.]+),`)
	restored := number(t, out, `checkpoint .*, restored ([0-9.]+)`)
	assert.Equal(t, trained, restored, "the restored model is the trained one")
	// The lr column: 8 warm-up steps from 3e-3/9, the peak 3e-3, then a
	// cosine down to eta_min 3e-4 at step 80.
	var lrs []float64
	for _, m := range regexp.MustCompile(`lr ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		lrs = append(lrs, v)
	}
	require.Len(t, lrs, 9, "steps 1, 10, 20, ..., 80: %s", out)
	assert.InDelta(t, 3e-3/9, lrs[0], 1e-5, "step 1 of 8 warm-up steps")
	assert.InDelta(t, 3e-3, lrs[1], 1e-5, "step 10, just past the warm-up")
	assert.InDelta(t, 3e-4, lrs[8], 1e-5, "step 80, the cosine's end")
	assert.IsDecreasing(t, lrs[1:])
	sample := sampleOf(t, out)
	assert.Len(t, sample, 2+50)
	assert.True(t, strings.HasPrefix(sample, "Tw"), sample)
}
