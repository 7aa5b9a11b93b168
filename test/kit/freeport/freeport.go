// Package freeport picks the loopback ports of the servers tests start as
// processes of their own, which must be told a port before they bind it.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Port returns a loopback port no one listens on right now, below the
// kernel's range of ephemeral ports: a port from that range may be taken
// by any outgoing connection between this look and the server's bind (a
// crash walk once failed so, with packages testing in parallel).
func Port() (int, error) {
	if first := firstEphemeral(); first > 10000 {
		for range 100 {
			p := 10000 + rand.IntN(first-10000)
			if free(p) {
				return p, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Pair returns a port p such that p and p+1 are both free (Port).
func Pair() (int, error) {
	for range 20 {
		p, err := Port()
		if err != nil {
			return 0, err
		}
		if free(p + 1) {
			return p, nil
		}
	}
	return 0, &net.OpError{Op: "listen", Net: "tcp", Err: os.ErrExist}
}

func free(p int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// firstEphemeral is the first port the kernel gives outgoing connections.
func firstEphemeral() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768 // Linux's default
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
