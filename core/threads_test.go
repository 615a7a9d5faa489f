package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestThreadChooserFollowsTheLoad: the chooser measures both choices, takes
// the faster, keeps trying the other now and then, and moves over when the
// load changes (a busy machine makes all threads slower than one).
func TestThreadChooserFollowsTheLoad(t *testing.T) {
	var c threadChooser
	cost := [2]time.Duration{2 * time.Millisecond, time.Millisecond} // idle: all threads twice as fast
	run := func(n int) (all int) {
		for range n {
			ch := c.pick()
			all += ch
			c.record(ch, 1000, cost[ch])
		}
		return all
	}
	assert.Greater(t, run(256), 250, "idle: all threads, but for the trials of one")
	cost[1] = 20 * time.Millisecond // another process takes a core
	assert.Less(t, run(256), 10, "busy: one thread, but for the trials of all")
	cost[1] = time.Millisecond // idle again
	run(exploreEvery)
	assert.Greater(t, run(256), 250, "idle again: all threads")
	c.record(0, 0, time.Second) // no work: nothing learnt
	assert.Equal(t, 2*time.Millisecond, time.Duration(c.nsPerWork[0]*1000))
}
