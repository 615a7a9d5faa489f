package core

import (
	"fmt"
	"slices"
	"sort"
)

// Sequential is torch's SequentialLR: schedulers made on one optimizer,
// each driving the rates in turn. Made, it sets the rates back to the
// groups' bases and takes the first scheduler's step 0 from them; at each
// milestone the next scheduler starts again from step 0 and its bases (as
// torch's step(0): the closed form at 0), and every other step advances the
// scheduler whose turn it is.
type Sequential struct {
	subs       []*Scheduler
	milestones []int
	epoch      int
}

// SequentialLR chains subs, all made on r, at the milestones (one fewer
// than subs, increasing, from 1).
func SequentialLR(r Rated, subs []*Scheduler, milestones []int) (*Sequential, error) {
	const fn = "sequential scheduler"
	if len(subs) == 0 {
		return nil, argErrorf("%s: needs at least one scheduler", fn)
	}
	for i, s := range subs {
		if s.on != r {
			return nil, argErrorf("%s: scheduler %d belongs to another optimizer", fn, i+1)
		}
	}
	if len(milestones) != len(subs)-1 {
		return nil, argErrorf("%s: expects one milestone fewer than schedulers, got %d schedulers and %d milestones", fn, len(subs), len(milestones))
	}
	for i, m := range milestones {
		if m < 1 || (i > 0 && m <= milestones[i-1]) {
			return nil, argErrorf("%s: milestones must be increasing steps from 1, got %v", fn, milestones)
		}
	}
	q := &Sequential{subs: slices.Clone(subs), milestones: slices.Clone(milestones)}
	// As torch: the rates back to the groups' initial_lr, then the first
	// scheduler's step 0 from them.
	first := q.subs[0]
	cur := make([]float64, len(first.rates))
	for g, r := range first.rates {
		cur[g] = first.base[g]
		if lr, ok := r.InitialLR(); ok {
			cur[g] = lr
		}
	}
	if err := first.restart(cur); err != nil {
		return nil, err
	}
	return q, nil
}

// turn is the index of the scheduler driving step epoch, and whether that
// step is its first.
func (q *Sequential) turn(epoch int) (int, bool) {
	i := sort.SearchInts(q.milestones, epoch+1) // torch's bisect_right
	return i, i > 0 && q.milestones[i-1] == epoch
}

// Step advances one step: a milestone restarts the next scheduler.
func (q *Sequential) Step() error {
	i, first := q.turn(q.epoch + 1)
	var err error
	if first {
		err = q.subs[i].restart(nil)
	} else {
		err = q.subs[i].Step()
	}
	if err != nil {
		return err
	}
	q.epoch++
	return nil
}

// Kind is "sequential".
func (q *Sequential) Kind() string { return "sequential" }

// LR is the first group's current rate.
func (q *Sequential) LR() float64 { return q.subs[0].LR() }

// LastLRs are the rates the last step set.
func (q *Sequential) LastLRs() []float64 {
	i, _ := q.turn(q.epoch)
	return q.subs[i].LastLRs()
}

// LastEpoch is the number of Step calls.
func (q *Sequential) LastEpoch() int { return q.epoch }

func (q *Sequential) params() []SchedulerParam {
	var ps []SchedulerParam
	for i, m := range q.milestones {
		ps = append(ps, SchedulerParam{fmt.Sprintf("milestone.%d", i+1), float64(m)})
	}
	return ps
}

// StateDict holds last_epoch, the milestones and each scheduler's state.
func (q *Sequential) StateDict() SchedulerState {
	st := SchedulerState{Kind: "sequential", Nums: map[string]float64{"last_epoch": float64(q.epoch)}}
	for _, p := range q.params() {
		st.Nums[p.Name] = p.Value
	}
	for _, s := range q.subs {
		st.Subs = append(st.Subs, s.StateDict())
	}
	return st
}

// LoadStateDict restores what StateDict returned; it changes nothing
// unless every scheduler's state loads.
func (q *Sequential) LoadStateDict(st SchedulerState) error {
	const fn = "scheduler load_state_dict"
	if st.Kind != "sequential" {
		return argErrorf("%s: the state is of a %q scheduler, this one is \"sequential\"", fn, st.Kind)
	}
	if len(st.Texts) > 0 || len(st.Subs) != len(q.subs) {
		return argErrorf("%s: the state holds %d schedulers' states, this sequential scheduler has %d", fn, len(st.Subs), len(q.subs))
	}
	epoch, err := checkSchedulerNums(fn, "sequential", st.Nums, q.params(), 0)
	if err != nil {
		return err
	}
	var loads []func()
	for i, s := range q.subs {
		load, err := s.loader(st.Subs[i])
		if err != nil {
			return fmt.Errorf("%w (scheduler %d of the sequence)", err, i+1)
		}
		loads = append(loads, load)
	}
	i, _ := q.turn(epoch)
	for j, load := range loads {
		if j != i {
			load()
		}
	}
	loads[i]() // last: the rates are those the scheduler whose turn it is set

	q.epoch = epoch
	return nil
}
