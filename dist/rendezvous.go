package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// The rendezvous: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other
// rank connects (retrying while rank 0 is not up yet) and says who it is;
// once all have come, rank 0 sends each the payload (the NCCL unique id).
// NCCL then connects the processes itself. Every step is bounded by the
// timeout, so a process that never comes is an error, not a hang.

// rendezvousMagic starts every hello, so that a stray connection to the
// port is refused rather than taken for a rank.
const rendezvousMagic = 0x67676c75 // "gglu"

// hello is what a rank sends: magic, rank, world size.
type hello struct{ Magic, Rank, World uint32 }

// Rendezvous returns rank 0's payload on every rank (rank 0 passes it in).
func Rendezvous(addr string, rank, world int, payload []byte, timeout time.Duration) ([]byte, error) {
	if world <= 1 {
		return payload, nil
	}
	deadline := time.Now().Add(timeout)
	if rank == 0 {
		return payload, serveRendezvous(addr, world, payload, deadline)
	}
	return joinRendezvous(addr, rank, world, deadline)
}

func serveRendezvous(addr string, world int, payload []byte, deadline time.Time) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("rendezvous: %w", err)
	}
	// Rank 0 listens on every interface: MASTER_ADDR is how the others
	// reach it, which need not be an address it can bind. A port in use
	// is tried again for a moment: a rank's dial that met itself (see
	// joinRendezvous) holds it until it sees so.
	ln, err := net.Listen("tcp", net.JoinHostPort("", port))
	until := time.Now().Add(listenRetry)
	if until.After(deadline) {
		until = deadline
	}
	for err != nil && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(until) {
		time.Sleep(50 * time.Millisecond)
		ln, err = net.Listen("tcp", net.JoinHostPort("", port))
	}
	if err != nil {
		return fmt.Errorf("rendezvous: rank 0 cannot listen on port %s (MASTER_PORT): %w", port, err)
	}
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(deadline)
	conns := make([]net.Conn, world)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for joined := 1; joined < world; {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("rendezvous: rank 0 waited for %d of %d processes until the timeout (GGLUA_DIST_TIMEOUT); did they start, with the same MASTER_ADDR:MASTER_PORT (%s)? %w", world-joined, world-1, addr, err)
		}
		// A hello comes at once; a connection that says nothing (not
		// one of ours) must not hold the others up.
		helloBy := time.Now().Add(10 * time.Second)
		if helloBy.After(deadline) {
			helloBy = deadline
		}
		c.SetDeadline(helloBy)
		var h hello
		if err := binary.Read(c, binary.BigEndian, &h); err != nil || h.Magic != rendezvousMagic {
			c.Close() // not one of ours
			continue
		}
		switch {
		case int(h.World) != world:
			c.Close()
			return fmt.Errorf("rendezvous: a process has WORLD_SIZE=%d, rank 0 has %d", h.World, world)
		case h.Rank == 0 || int(h.Rank) >= world || conns[h.Rank] != nil:
			c.Close()
			return fmt.Errorf("rendezvous: rank %d came twice or is out of range (world size %d)", h.Rank, world)
		}
		conns[h.Rank] = c
		joined++
	}
	for r, c := range conns[1:] {
		c.SetDeadline(deadline)
		if err := writeFrame(c, payload); err != nil {
			return fmt.Errorf("rendezvous: sending to rank %d: %w", r+1, err)
		}
	}
	return nil
}

// listenRetry is how long rank 0 tries again to listen on a port in use.
const listenRetry = 3 * time.Second

func joinRendezvous(addr string, rank, world int, deadline time.Time) ([]byte, error) {
	var c net.Conn
	var err error
	for {
		d := net.Dialer{Deadline: deadline}
		if c, err = d.Dial("tcp", addr); err == nil && !selfConnected(c) {
			break
		}
		if err == nil {
			// Dialing a local port nothing listens on can connect the
			// socket to itself, when the kernel picks that very port as
			// its source (TCP's simultaneous open): it would hold rank
			// 0's port and talk to itself. (Seen: gglua --nproc's port is
			// the kernel's choice, in the range source ports come from.)
			c.Close()
			err = errors.New("connected to itself")
		}
		if time.Now().Add(100 * time.Millisecond).After(deadline) {
			return nil, fmt.Errorf("rendezvous: rank %d could not reach rank 0 at %s (MASTER_ADDR:MASTER_PORT) before the timeout: %w", rank, addr, err)
		}
		time.Sleep(100 * time.Millisecond) // rank 0 may not be listening yet
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if err := binary.Write(c, binary.BigEndian, hello{rendezvousMagic, uint32(rank), uint32(world)}); err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d: %w", rank, err)
	}
	p, err := readFrame(c)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d got nothing from rank 0 at %s (it failed, or timed out waiting for the others): %w", rank, addr, err)
	}
	return p, nil
}

// selfConnected reports whether c is a TCP socket connected to itself.
func selfConnected(c net.Conn) bool {
	return c.LocalAddr().String() == c.RemoteAddr().String()
}

// maxPayload bounds what a rank accepts (an NCCL id is 128 bytes).
const maxPayload = 1 << 16

func writeFrame(w io.Writer, p []byte) error {
	if err := binary.Write(w, binary.BigEndian, uint32(len(p))); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, err
	}
	if n > maxPayload {
		return nil, errors.New("payload too large")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return p, err
}
