package core

import "time"

// threadChooser decides, for CPU graphs big enough to split, between all
// the pool's threads and one, by measured speed. ggml's workers meet at a
// spinning barrier after every node: on an idle machine that is fast, but
// when another process takes a core a descheduled worker leaves the others
// spinning for a whole time slice at every node, and a step ran 20x slower
// than on one thread (issue [13]). So the time per unit of work (ggml's
// element count) is kept for each choice, an exponential average, and the
// faster is used; every exploreEvery-th large compute runs the other one,
// so that a change of load is noticed both ways. Times are kept per graph
// shape (threadChoosers): a step's graph repeats, and only the same graph's
// times compare fairly (a graph of copies has a cheaper unit of work).
type threadChooser struct {
	nsPerWork [2]float64 // [0]: one thread, [1]: all; 0 until measured
	computes  int
	last      int  // the previous compute's choice
	again     bool // run all threads once more: the last run woke the pool
}

const (
	exploreEvery = 64
	chooserAlpha = 0.3 // weight of a slower measurement in the average
)

// pick returns the choice for the next large compute: 0 (one thread) or 1
// (all of them).
func (c *threadChooser) pick() int {
	c.computes++
	if c.again {
		c.again = false
		return 1
	}
	switch {
	case c.nsPerWork[1] == 0:
		return 1
	case c.nsPerWork[0] == 0:
		return 0
	}
	best := 1
	if c.nsPerWork[0] < c.nsPerWork[1] {
		best = 0
	}
	if c.computes%exploreEvery == 0 {
		c.again = best == 0 // a trial of all threads takes two runs: see record
		return 1 - best
	}
	return best
}

// record notes that a compute of work units took d with choice.
func (c *threadChooser) record(choice int, work int64, d time.Duration) {
	last := c.last
	c.last = choice
	// The first compute on all threads after one on one thread wakes the
	// paused pool (cold workers): its time says nothing of the next ones',
	// and counted it kept one thread chosen about a quarter of the time.
	if work <= 0 || choice == 1 && last == 0 {
		return
	}
	v := float64(d.Nanoseconds()) / float64(work)
	if c.nsPerWork[choice] == 0 || v < c.nsPerWork[choice] {
		c.nsPerWork[choice] = v // a speed-up counts at once: the load has gone
		return
	}
	c.nsPerWork[choice] += chooserAlpha * (v - c.nsPerWork[choice])
}

// threadChoosers keeps a chooser per graph shape (node count and work).
type threadChoosers map[[2]int64]*threadChooser

// maxChoosers bounds how many graph shapes are remembered.
const maxChoosers = 256

// forGraph is the chooser of graphs of nodes nodes and work units.
func (m *threadChoosers) forGraph(nodes int, work int64) *threadChooser {
	if *m == nil || len(*m) >= maxChoosers {
		*m = threadChoosers{}
	}
	key := [2]int64{int64(nodes), work}
	c := (*m)[key]
	if c == nil {
		c = &threadChooser{}
		(*m)[key] = c
	}
	return c
}
