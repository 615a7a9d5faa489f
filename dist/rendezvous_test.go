package dist

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testSecret = []byte("the job's secret")

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
			got[r], errs[r] = Rendezvous(addr, r, world, payload, testSecret, 10*time.Second)
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
	_, err := Rendezvous(addr, 0, 3, []byte("id"), testSecret, 300*time.Millisecond)
	require.ErrorContains(t, err, "rank 0 waited for 2 of 2 processes until the timeout")
	_, err = Rendezvous(addr, 1, 3, nil, testSecret, 300*time.Millisecond)
	require.ErrorContains(t, err, "rank 1 could not meet rank 0 at "+addr)
	assert.Less(t, time.Since(started), 5*time.Second)
}

// TestRendezvousRefusesAMismatchedWorld: processes that disagree on the
// world size fail with an error instead of waiting.
func TestRendezvousRefusesAMismatchedWorld(t *testing.T) {
	addr := freeAddr(t)
	errs := make(chan error, 2)
	go func() {
		_, err := Rendezvous(addr, 0, 2, []byte("id"), testSecret, 5*time.Second)
		errs <- err
	}()
	go func() {
		_, err := Rendezvous(addr, 1, 3, nil, testSecret, 5*time.Second)
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
		_, err := Rendezvous(addr, 0, 2, []byte("id"), testSecret, 10*time.Second)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, holder.Close())
	time.Sleep(300 * time.Millisecond)
	got, err := Rendezvous(addr, 1, 2, nil, testSecret, 10*time.Second)
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

// rankZero runs rank 0 of a job of world on addr in the background.
func rankZero(addr string, world int, payload []byte, timeout time.Duration) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := Rendezvous(addr, 0, world, payload, testSecret, timeout)
		done <- err
	}()
	return done
}

// A stranger who connects first with a well-formed hello for rank 1 but
// no secret gets nothing (not the id), and the job goes on: the real rank
// 1 joins after it. Idle connections (100) hold no one up either.
func TestRendezvousIgnoresStrangers(t *testing.T) {
	addr := freeAddr(t)
	done := rankZero(addr, 2, []byte("the id"), 10*time.Second)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	var stranger net.Conn
	for i := 0; ; i++ { // rank 0 may not listen yet
		c, err := net.Dial("tcp", addr)
		if err == nil {
			stranger = c
			break
		}
		require.Less(t, i, 100, "rank 0 never listened")
		time.Sleep(20 * time.Millisecond)
	}
	defer stranger.Close()
	for range 100 { // more than a bound of 64 handshakes at once let through
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		idle = append(idle, c)
	}
	require.NoError(t, binary.Write(stranger, binary.BigEndian, hello{Magic: rendezvousMagic, Rank: 1, World: 2}))
	reply := make([]byte, 32+sha256.Size)
	_, err := io.ReadFull(stranger, reply)
	require.NoError(t, err)
	_, err = stranger.Write(make([]byte, sha256.Size)) // a proof it cannot make
	require.NoError(t, err)
	stranger.SetDeadline(time.Now().Add(5 * time.Second))
	rest, _ := io.ReadAll(stranger)
	assert.Empty(t, rest, "the stranger is closed on, sent nothing")

	started := time.Now()
	got, err := Rendezvous(addr, 1, 2, nil, testSecret, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []byte("the id"), got)
	require.NoError(t, <-done)
	assert.Less(t, time.Since(started), 3*time.Second, "idle connections held the rank up")
}

// A squatter on the port that does not know the secret cannot hand a rank
// a payload: the rank refuses it and says why. A rank 0 with another
// secret is the same.
func TestRendezvousRefusesARankZeroWithoutTheSecret(t *testing.T) {
	addr := freeAddr(t)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var h hello
				if binary.Read(c, binary.BigEndian, &h) != nil {
					return
				}
				c.Write(make([]byte, 32+sha256.Size)) // a nonce and a proof it cannot make
				writeFrame(c, []byte("a fake id"))
			}()
		}
	}()
	_, err = Rendezvous(addr, 1, 2, nil, testSecret, 500*time.Millisecond)
	require.ErrorContains(t, err, "did not prove the job's secret")
	ln.Close()

	addr = freeAddr(t)
	done := make(chan error, 1)
	go func() {
		_, err := Rendezvous(addr, 0, 2, []byte("id"), []byte("another job's"), 700*time.Millisecond)
		done <- err
	}()
	_, err = Rendezvous(addr, 1, 2, nil, testSecret, 700*time.Millisecond)
	require.ErrorContains(t, err, "did not prove the job's secret")
	require.Error(t, <-done)
}

// The payload does not cross the wire in clear: what a relay between a
// rank and rank 0 sees holds neither the id nor the secret.
func TestRendezvousSealsThePayload(t *testing.T) {
	addr, relay := freeAddr(t), freeAddr(t)
	id := []byte("an NCCL id, 128 bytes in real life, that an eavesdropper must not read")
	done := rankZero(addr, 2, id, 10*time.Second)
	ln, err := net.Listen("tcp", relay)
	require.NoError(t, err)
	defer ln.Close()
	var seen syncBuffer
	go func() {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		defer in.Close()
		var out net.Conn
		for i := 0; i < 100; i++ {
			if out, err = net.Dial("tcp", addr); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return
		}
		defer out.Close()
		go io.Copy(io.MultiWriter(out, &seen), in)
		io.Copy(io.MultiWriter(in, &seen), out)
	}()
	got, err := Rendezvous(relay, 1, 2, nil, testSecret, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, id, got)
	require.NoError(t, <-done)
	wire := seen.Bytes()
	assert.NotEmpty(t, wire)
	assert.False(t, bytes.Contains(wire, id[:16]), "the id crossed in clear")
	assert.False(t, bytes.Contains(wire, testSecret), "the secret crossed")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

// Without a secret only a loopback MASTER_ADDR is allowed; rank 0 binds
// loopback for it, an address literal itself, and every interface for a
// host name (which may resolve to loopback here and to the network's
// address on the others).
func TestRendezvousNeedsASecretOffThisHost(t *testing.T) {
	_, err := Rendezvous("10.1.2.3:29500", 1, 2, nil, nil, time.Second)
	require.ErrorContains(t, err, "GGLUA_DIST_SECRET")
	for addr, want := range map[string]string{
		"127.0.0.1:29500": "127.0.0.1:29500", "localhost:29500": "127.0.0.1:29500", "[::1]:29500": "[::1]:29500",
		"10.1.2.3:29500": "10.1.2.3:29500", "node7:29500": ":29500",
	} {
		got, _ := listenAddr(addr)
		assert.Equal(t, want, got, addr)
	}
	addr := freeAddr(t)
	done := make(chan error, 1)
	go func() {
		_, err := Rendezvous(addr, 0, 2, []byte("id"), nil, 5*time.Second)
		done <- err
	}()
	got, err := Rendezvous(addr, 1, 2, nil, nil, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []byte("id"), got)
	require.NoError(t, <-done)
}
