package dist

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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
//
// A multi-node job exposes the port on the network, so every peer proves
// it holds the job's secret (GGLUA_DIST_SECRET, which gglua --nproc makes
// for its children), both ways, as an HMAC over the other's fresh nonce:
// a stranger who connects first gets nothing and does not stop the job,
// and a squatter on the port cannot hand a rank a fake id. The payload
// travels sealed (AES-GCM under a key of the secret and both nonces).
// Hellos are read concurrently, each with its own deadline, so idle
// connections hold no one up.

// rendezvousMagic starts every hello, so that a stray connection to the
// port is refused rather than taken for a rank.
const rendezvousMagic = 0x67676c75 // "gglu"

// hello is what a rank sends first: magic, rank, world size, its nonce.
type hello struct {
	Magic, Rank, World uint32
	Nonce              [32]byte
}

// Rendezvous returns rank 0's payload on every rank (rank 0 passes it in).
// secret is the job's (Place.Secret); without one, only a loopback
// MASTER_ADDR is allowed (every process on this host).
func Rendezvous(addr string, rank, world int, payload, secret []byte, timeout time.Duration) ([]byte, error) {
	if world <= 1 {
		return payload, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w", err)
	}
	if len(secret) == 0 && !isLoopback(host) {
		return nil, fmt.Errorf("rendezvous: MASTER_ADDR=%s is reachable from other hosts: set the same secret for every process of the job in GGLUA_DIST_SECRET (or a file named by GGLUA_DIST_SECRET_FILE), e.g. GGLUA_DIST_SECRET=$(openssl rand -hex 32)", host)
	}
	deadline := time.Now().Add(timeout)
	if rank == 0 {
		return payload, serveRendezvous(addr, world, payload, secret, deadline)
	}
	return joinRendezvous(addr, rank, world, secret, deadline)
}

// isLoopback reports whether host names this machine's loopback only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenAddr is where rank 0 listens for addr: loopback for a loopback
// MASTER_ADDR; an address literal itself (every interface where this host
// has no such address: the one the others reach it by, behind NAT); and
// every interface for a host name, which may resolve here to several
// addresses, or to loopback (Debian's /etc/hosts maps the host's own name
// to 127.0.1.1) where the others resolve it to the network's.
func listenAddr(addr string) (string, bool) {
	host, port, _ := net.SplitHostPort(addr)
	switch {
	case host == "localhost":
		return net.JoinHostPort("127.0.0.1", port), true // a dial of localhost tries each of its addresses
	case net.ParseIP(host) == nil:
		return net.JoinHostPort("", port), false
	}
	return net.JoinHostPort(host, port), isLoopback(host)
}

// mac is the proof of the secret over a nonce, for the given side of the
// handshake (its rank and world bound in).
func mac(secret []byte, side string, nonce [32]byte, rank, world uint32) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("gglua rendezvous " + side))
	h.Write(nonce[:])
	binary.Write(h, binary.BigEndian, [2]uint32{rank, world})
	return h.Sum(nil)
}

// sealer is AES-GCM under a key of the secret and both nonces: unique to
// one connection, so its nonce can be fixed.
func sealer(secret []byte, server, client [32]byte) (cipher.AEAD, error) {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("gglua rendezvous key"))
	h.Write(server[:])
	h.Write(client[:])
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func nonce() ([32]byte, error) {
	var n [32]byte
	_, err := rand.Read(n[:])
	return n, err
}

// peer is a connection that proved the secret, with its rank and key.
type peer struct {
	c     net.Conn
	h     hello
	aead  cipher.AEAD
	fatal error // an authenticated peer that disagrees with the job: the job's error
}

// maxHandshakes bounds the connections rank 0 authenticates at once: a
// flood past it is closed on at once (a rank so refused tries again).
const maxHandshakes = 1024

func serveRendezvous(addr string, world int, payload, secret []byte, deadline time.Time) error {
	// A port in use is tried again for a moment: a rank's dial that met
	// itself (see joinRendezvous) holds it until it sees so.
	where, loopback := listenAddr(addr)
	ln, err := net.Listen("tcp", where)
	if err != nil && !loopback && errors.Is(err, syscall.EADDRNOTAVAIL) {
		_, port, _ := net.SplitHostPort(addr)
		where = net.JoinHostPort("", port)
		ln, err = net.Listen("tcp", where)
	}
	until := earlier(time.Now().Add(listenRetry), deadline)
	for err != nil && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(until) {
		time.Sleep(50 * time.Millisecond)
		ln, err = net.Listen("tcp", where)
	}
	if err != nil {
		return fmt.Errorf("rendezvous: rank 0 cannot listen on %s (MASTER_ADDR:MASTER_PORT): %w", where, err)
	}
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(deadline)
	joined := make(chan peer)
	done := make(chan struct{})
	defer close(done)
	slots := make(chan struct{}, maxHandshakes)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			select {
			case slots <- struct{}{}:
			default:
				c.Close() // too many at once: a flood, not the job
				continue
			}
			go func() {
				defer func() { <-slots }()
				p, ok := handshake(c, world, secret, deadline)
				if !ok {
					c.Close() // not one of ours: ignored
					return
				}
				select {
				case joined <- p:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	peers := make([]*peer, world)
	defer func() {
		for _, p := range peers {
			if p != nil {
				p.c.Close()
			}
		}
	}()
	for n := 1; n < world; {
		select {
		case p := <-joined:
			switch {
			case p.fatal != nil:
				p.c.Close()
				return p.fatal
			case peers[p.h.Rank] != nil:
				p.c.Close()
				return fmt.Errorf("rendezvous: rank %d came twice (world size %d)", p.h.Rank, world)
			}
			peers[p.h.Rank] = &p
			n++
		case err := <-acceptErr:
			return fmt.Errorf("rendezvous: rank 0 waited for %d of %d processes until the timeout (GGLUA_DIST_TIMEOUT); did they start, with the same MASTER_ADDR:MASTER_PORT (%s) and secret? %w", world-n, world-1, addr, err)
		}
	}
	for r, p := range peers[1:] {
		p.c.SetDeadline(deadline)
		if err := writeFrame(p.c, p.aead.Seal(nil, make([]byte, p.aead.NonceSize()), payload, nil)); err != nil {
			return fmt.Errorf("rendezvous: sending to rank %d: %w", r+1, err)
		}
	}
	return nil
}

// handshake authenticates one connection on rank 0: its hello, rank 0's
// nonce and proof, the peer's proof. ok is false for anything that is not
// a rank of this job holding the secret.
func handshake(c net.Conn, world int, secret []byte, deadline time.Time) (peer, bool) {
	c.SetDeadline(earlier(time.Now().Add(helloWait), deadline)) // a hello comes at once
	var h hello
	if err := binary.Read(c, binary.BigEndian, &h); err != nil || h.Magic != rendezvousMagic {
		return peer{}, false
	}
	ns, err := nonce()
	if err != nil {
		return peer{}, false
	}
	if _, err := c.Write(append(ns[:], mac(secret, "server", h.Nonce, h.Rank, h.World)...)); err != nil {
		return peer{}, false
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil || !hmac.Equal(proof, mac(secret, "client", ns, h.Rank, h.World)) {
		return peer{}, false
	}
	p := peer{c: c, h: h}
	switch {
	case int(h.World) != world:
		p.fatal = fmt.Errorf("rendezvous: a process has WORLD_SIZE=%d, rank 0 has %d", h.World, world)
	case h.Rank == 0 || int(h.Rank) >= world:
		p.fatal = fmt.Errorf("rendezvous: a process has rank %d, out of range (world size %d)", h.Rank, world)
	}
	if p.aead, err = sealer(secret, ns, h.Nonce); err != nil {
		return peer{}, false
	}
	return p, true
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// helloWait is how long rank 0 waits for a connection's hello and proof,
// and a rank for rank 0's answer to its hello (both come at once).
const helloWait = 5 * time.Second

// listenRetry is how long rank 0 tries again to listen on a port in use.
const listenRetry = 3 * time.Second

func joinRendezvous(addr string, rank, world int, secret []byte, deadline time.Time) ([]byte, error) {
	for {
		p, met, err := joinOnce(addr, rank, world, secret, deadline)
		switch {
		case err == nil:
			return p, nil
		case met:
			return nil, fmt.Errorf("rendezvous: rank %d met rank 0 at %s but %w", rank, addr, err)
		case time.Now().Add(100 * time.Millisecond).After(deadline):
			return nil, fmt.Errorf("rendezvous: rank %d could not meet rank 0 at %s (MASTER_ADDR:MASTER_PORT) before the timeout: %w", rank, addr, err)
		}
		time.Sleep(100 * time.Millisecond) // rank 0 may not be listening yet, or a stranger answered
	}
}

// errNotRankZero: what answered at the port did not prove the secret.
var errNotRankZero = errors.New("what answered there did not prove the job's secret (another process on MASTER_PORT, or a different GGLUA_DIST_SECRET)")

// joinOnce is one attempt of a rank: connect, authenticate both ways,
// receive the sealed payload. met: rank 0 proved the secret, so a failure
// after is the job's (no retry).
func joinOnce(addr string, rank, world int, secret []byte, deadline time.Time) (_ []byte, met bool, _ error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	if selfConnected(c) {
		// Dialing a local port nothing listens on can connect the socket
		// to itself, when the kernel picks that very port as its source
		// (TCP's simultaneous open): it would hold rank 0's port and talk
		// to itself. (Seen: gglua --nproc's port is the kernel's choice,
		// in the range source ports come from.)
		return nil, false, errors.New("connected to itself")
	}
	c.SetDeadline(earlier(time.Now().Add(helloWait), deadline)) // a silent listener is left for another try
	nc, err := nonce()
	if err != nil {
		return nil, false, err
	}
	if err := binary.Write(c, binary.BigEndian, hello{rendezvousMagic, uint32(rank), uint32(world), nc}); err != nil {
		return nil, false, err
	}
	reply := make([]byte, 32+sha256.Size)
	if _, err := io.ReadFull(c, reply); err != nil {
		return nil, false, fmt.Errorf("rank 0 closed the connection: %w", err)
	}
	var ns [32]byte
	copy(ns[:], reply)
	if !hmac.Equal(reply[32:], mac(secret, "server", nc, uint32(rank), uint32(world))) {
		return nil, false, errNotRankZero
	}
	c.SetDeadline(deadline) // rank 0 answers once every rank has come
	if _, err := c.Write(mac(secret, "client", ns, uint32(rank), uint32(world))); err != nil {
		return nil, true, err
	}
	sealed, err := readFrame(c)
	if err != nil {
		return nil, true, fmt.Errorf("got nothing from it (it failed, found the job's settings differ, or timed out waiting for the others): %w", err)
	}
	aead, err := sealer(secret, ns, nc)
	if err != nil {
		return nil, true, err
	}
	p, err := aead.Open(nil, make([]byte, aead.NonceSize()), sealed, nil)
	if err != nil {
		return nil, true, errors.New("its payload does not open with the job's secret")
	}
	return p, true, nil
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
