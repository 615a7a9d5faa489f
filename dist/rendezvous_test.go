package dist

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestRendezvousSharesRankZerosPayload: every rank gets rank 0's payload,
// whichever starts first (rank 0 last here: the others retry).
func TestRendezvousSharesRankZerosPayload(t *testing.T) {
	addr := freeAddr(t)
	const world = 4
	id := []byte("the NCCL unique id: 128 bytes in real life")
	got := make([][]byte, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := world - 1; r >= 0; r-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var payload []byte
			if r == 0 {
				time.Sleep(200 * time.Millisecond)
				payload = id
			}
			got[r], errs[r] = Rendezvous(addr, r, world, payload, 10*time.Second)
		}()
	}
	wg.Wait()
	for r := range world {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, id, got[r], "rank %d", r)
	}
}

// TestRendezvousTimesOut: a rank that never comes is an error on rank 0
// and rank 0 never coming is one on the others, both at the timeout.
func TestRendezvousTimesOut(t *testing.T) {
	addr := freeAddr(t)
	started := time.Now()
	_, err := Rendezvous(addr, 0, 3, []byte("id"), 300*time.Millisecond)
	require.ErrorContains(t, err, "rank 0 waited for 2 of 2 processes until the timeout")
	_, err = Rendezvous(addr, 1, 3, nil, 300*time.Millisecond)
	require.ErrorContains(t, err, "rank 1 could not reach rank 0 at "+addr)
	assert.Less(t, time.Since(started), 5*time.Second)
}

// TestRendezvousRefusesAMismatchedWorld: processes that disagree on the
// world size fail with an error instead of waiting.
func TestRendezvousRefusesAMismatchedWorld(t *testing.T) {
	addr := freeAddr(t)
	errs := make(chan error, 2)
	go func() {
		_, err := Rendezvous(addr, 0, 2, []byte("id"), 5*time.Second)
		errs <- err
	}()
	go func() {
		_, err := Rendezvous(addr, 1, 3, nil, 5*time.Second)
		errs <- err
	}()
	e1, e2 := <-errs, <-errs
	require.Error(t, e1)
	require.Error(t, e2)
	assert.Contains(t, e1.Error()+e2.Error(), "a process has WORLD_SIZE=3, rank 0 has 2")
}

// TestRendezvousWaitsForABusyPort: rank 0 tries its port again while
// something holds it for a moment (a rank's dial that met itself), and
// the rendezvous goes through once it is free.
func TestRendezvousWaitsForABusyPort(t *testing.T) {
	addr := freeAddr(t)
	holder, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := Rendezvous(addr, 0, 2, []byte("id"), 10*time.Second)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, holder.Close())
	time.Sleep(300 * time.Millisecond)
	got, err := Rendezvous(addr, 1, 2, nil, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []byte("id"), got)
	require.NoError(t, <-done)
}

// TestASocketConnectedToItselfIsSeen: a TCP dial from a local port to
// that same port with nothing listening connects the socket to itself
// (simultaneous open), which a rank must not take for rank 0.
func TestASocketConnectedToItselfIsSeen(t *testing.T) {
	addr := freeAddr(t)
	local, err := net.ResolveTCPAddr("tcp", addr)
	require.NoError(t, err)
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	self, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	defer self.Close()
	assert.True(t, selfConnected(self))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	other, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer other.Close()
	assert.False(t, selfConnected(other))
}
