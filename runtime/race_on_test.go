//go:build race

package runtime_test

// raceDetector: the race detector slows every memory access several
// times, so the hostile suite allows its runs more time past a deadline.
const raceDetector = true
