package core

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A GPU replays a training step as one CUDA graph only when the step
// queues the very same graph as the step before: same nodes in the same
// order at the same addresses, and no number that changes every step (the
// learning rate, Adam's bias corrections) inside an op's parameters
// (ggmlcgo/graph_replay.c). Here on the CPU: the ops, shapes and addresses
// of every step's graph, from the second step on.
func TestTrainingStepsQueueTheSameGraph(t *testing.T) {
	e := newEngine(t)
	rng := rand.New(rand.NewSource(3))
	var params []*Tensor
	sizes := []int{6, 16, 16, 16, 3}
	for i := 0; i+1 < len(sizes); i++ {
		for _, shape := range [][]int{{sizes[i+1], sizes[i]}, {1, sizes[i+1]}} {
			v := make([]float32, shape[0]*shape[1])
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.3)
			}
			p := host(t, shape, v...)
			require.NoError(t, p.SetRequiresGrad(true))
			require.NoError(t, p.MoveToDeviceAs(e, residency.Persistent, ggmlcgo.F32))
			params = append(params, p)
		}
	}
	opt, err := NewAdam(e, params, AdamOptions{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Decoupled: true})
	require.NoError(t, err)
	x := host(t, []int{8, 6}, make([]float32, 48)...)
	labels := []int{0, 1, 2, 0, 1, 2, 0, 1}

	var graphs []string
	e.beforeCompute = func(g *ggmlcgo.Graph) {
		var b strings.Builder
		for _, n := range g.Nodes() {
			fmt.Fprintf(&b, "%s %s %v %p\n", n.OpName(), n.Name(), n.Ne(), n.Data())
		}
		graphs = append(graphs, b.String())
	}
	for i := 0; i < 4; i++ {
		opt.ZeroGrad()
		loss := mlpLoss(t, e, params, x, labels, e.Tanh)
		_, err := e.Backward(loss)
		require.NoError(t, err)
		_, err = e.ClipGradNorm(params, 1)
		require.NoError(t, err)
		require.NoError(t, opt.Step())
		_, err = loss.Item()
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, len(graphs), 4)
	last := graphs[len(graphs)-1]
	assert.Equal(t, last, graphs[len(graphs)-2], "steps 3 and 4")
	assert.Equal(t, last, graphs[len(graphs)-3], "steps 2 and 4")
	assert.Regexp(t, "OPT_STEP_ADAMW|CUSTOM adamw", last)
}
