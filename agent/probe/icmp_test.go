package probe

import (
	"encoding/binary"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func echoReply(t *testing.T, id, seq uint16) []byte {
	t.Helper()
	b, err := (&icmp.Message{Type: ipv4.ICMPTypeEchoReply, Body: &icmp.Echo{ID: int(id), Seq: int(seq), Data: []byte("x")}}).Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// icmpError builds an ICMP error of type typ and code quoting an echo
// request from 10.0.0.9 to dst with id and seq; mtu is the next-hop MTU
// of a fragmentation-needed error.
func icmpError(t *testing.T, typ ipv4.ICMPType, code int, dst netip.Addr, id, seq uint16, mtu uint16) []byte {
	t.Helper()
	q := make([]byte, 28)
	q[0] = 0x45
	q[9] = 1
	copy(q[12:16], []byte{10, 0, 0, 9})
	a := dst.As4()
	copy(q[16:20], a[:])
	q[20] = byte(ipv4.ICMPTypeEcho)
	binary.BigEndian.PutUint16(q[24:], id)
	binary.BigEndian.PutUint16(q[26:], seq)
	var body icmp.MessageBody = &icmp.DstUnreach{Data: q}
	if typ == ipv4.ICMPTypeTimeExceeded {
		body = &icmp.TimeExceeded{Data: q}
	}
	b, err := (&icmp.Message{Type: typ, Code: code, Body: body}).Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint16(b[6:8], mtu)
	return b
}

// TestDeliver: the demultiplexer counts a reply only from the probed
// destination, with our ID and a waiting sequence; an ICMP error quoting
// our echo to that destination fails it.
func TestDeliver(t *testing.T) {
	target := netip.MustParseAddr("10.1.1.1")
	other := netip.MustParseAddr("10.1.1.2")
	router := netip.MustParseAddr("10.9.9.9")
	const id = 0x4d50
	tests := []struct {
		name    string
		from    netip.Addr
		msg     func(seq uint16) []byte
		want    measurev1.Status // STATUS_UNSPECIFIED: nothing delivered
		wantMsg string
		stray   bool
	}{
		{name: "reply from target", from: target, msg: func(s uint16) []byte { return echoReply(t, id, s) }, want: measurev1.Status_STATUS_OK},
		{name: "reply from another address", from: other, msg: func(s uint16) []byte { return echoReply(t, id, s) }, stray: true},
		{name: "other id", from: target, msg: func(s uint16) []byte { return echoReply(t, id+1, s) }},
		{name: "other seq", from: target, msg: func(s uint16) []byte { return echoReply(t, id, s+1) }},
		{name: "echo request (own, on loopback)", from: target, msg: func(s uint16) []byte {
			b, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: int(s)}}).Marshal(nil)
			return b
		}},
		{name: "junk", from: target, msg: func(uint16) []byte { return []byte{0, 0} }},
		{name: "host unreachable", from: router, msg: func(s uint16) []byte {
			return icmpError(t, ipv4.ICMPTypeDestinationUnreachable, 1, target, id, s, 0)
		}, want: measurev1.Status_STATUS_UNREACHABLE, wantMsg: "destination unreachable (code 1), from 10.9.9.9"},
		{name: "fragmentation needed", from: router, msg: func(s uint16) []byte {
			return icmpError(t, ipv4.ICMPTypeDestinationUnreachable, 4, target, id, s, 1400)
		}, want: measurev1.Status_STATUS_UNREACHABLE, wantMsg: "next-hop MTU 1400"},
		{name: "time exceeded", from: router, msg: func(s uint16) []byte {
			return icmpError(t, ipv4.ICMPTypeTimeExceeded, 0, target, id, s, 0)
		}, want: measurev1.Status_STATUS_UNREACHABLE, wantMsg: "time exceeded, from 10.9.9.9"},
		{name: "error quoting an echo to another address", from: router, msg: func(s uint16) []byte {
			return icmpError(t, ipv4.ICMPTypeDestinationUnreachable, 1, other, id, s, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &pinger{id: id, waiting: map[uint16]*waiter{}}
			w := &waiter{dst: target, sent: time.Now()}
			seq, err := pg.register(w)
			if err != nil {
				t.Fatal(err)
			}
			r, ok := pg.deliver(tt.from, tt.msg(seq), time.Now())
			if ok {
				if r.status != tt.want || !strings.Contains(r.msg, tt.wantMsg) {
					t.Errorf("delivered %v %q, want %v %q", r.status, r.msg, tt.want, tt.wantMsg)
				}
				if pg.waiting[seq] != nil {
					t.Error("a delivered echo is still waiting")
				}
				if _, mine := pg.expire(seq, w); mine {
					t.Error("a delivered echo expired too")
				}
				return
			}
			if tt.want != measurev1.Status_STATUS_UNSPECIFIED {
				t.Fatalf("nothing delivered, want %v", tt.want)
			}
			r, mine := pg.expire(seq, w)
			if !mine || r.status != measurev1.Status_STATUS_TIMEOUT {
				t.Fatalf("expire: %v %v, want its timeout", r, mine)
			}
			if got := strings.Contains(r.msg, "came from "+other.String()); got != tt.stray {
				t.Errorf("timeout %q names a stray source: %v, want %v", r.msg, got, tt.stray)
			}
		})
	}
}

// TestDeliverBeforeSent: a reply that matches an echo not yet stamped as
// sent (a forgery racing the send) does not count.
func TestDeliverBeforeSent(t *testing.T) {
	target := netip.MustParseAddr("10.1.1.1")
	pg := &pinger{id: 7, waiting: map[uint16]*waiter{}}
	seq, err := pg.register(&waiter{dst: target})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := pg.deliver(target, echoReply(t, 7, seq), time.Now()); ok {
		t.Errorf("delivered %v for an echo not sent", r)
	}
}

// ping sends one echo on pg, whose reader puts into box, and waits for
// its result, timing it out after timeout as the prober's loop would.
func ping(t *testing.T, pg *pinger, box *mailbox, dst netip.Addr, size int, df bool, timeout time.Duration) (time.Duration, measurev1.Status, string) {
	t.Helper()
	seq, w, fail, ok := pg.send(seriesKey{peer: "p"}, time.Now(), dst, size, df)
	if !ok {
		return fail.rtt, fail.status, fail.msg
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if rs := box.take(nil); len(rs) > 0 {
			return rs[0].rtt, rs[0].status, rs[0].msg
		}
		time.Sleep(time.Millisecond)
	}
	if r, mine := pg.expire(seq, w); mine {
		return r.rtt, r.status, r.msg
	}
	for { // the reader took it as the timeout passed
		if rs := box.take(nil); len(rs) > 0 {
			return rs[0].rtt, rs[0].status, rs[0].msg
		}
		time.Sleep(time.Millisecond)
	}
}

// startReader runs pg's reader until the test ends and returns its
// mailbox.
func startReader(t *testing.T, pg *pinger) *mailbox {
	t.Helper()
	box, done := newMailbox(time.Now), make(chan struct{})
	go func() { defer close(done); pg.read(discard(), box) }()
	t.Cleanup(func() { pg.close(); <-done })
	return box
}

// rawOK skips the test when raw ICMP sockets cannot be opened.
func rawOK(t testing.TB) {
	t.Helper()
	pg := openPinger(&Network{Net: measurev1.Network_NETWORK_HOST, IP: netip.MustParseAddr("127.0.0.1")}, false)
	if pg.openErr != nil {
		t.Skipf("needs root: raw ICMP sockets (root or CAP_NET_RAW): %v", pg.openErr)
	}
	pg.close()
}

// TestPingLoopback: echoes to loopback addresses are answered by the
// kernel; a don't-fragment echo over the interface MTU fails on send.
func TestPingLoopback(t *testing.T) {
	rawOK(t)
	pg := openPinger(&Network{Net: measurev1.Network_NETWORK_HOST, IP: netip.MustParseAddr("127.0.0.1")}, false)
	results := startReader(t, pg)
	tests := []struct {
		name string
		dst  string
		size int
		df   bool
		want measurev1.Status
		msg  string
	}{
		{name: "small", dst: "127.0.0.1", size: 56, want: measurev1.Status_STATUS_OK},
		{name: "other loopback address", dst: "127.0.0.7", size: 0, want: measurev1.Status_STATUS_OK},
		{name: "fills the loopback MTU with DF", dst: "127.0.0.2", size: 65535 - 28, df: true, want: measurev1.Status_STATUS_OK},
		{name: "large without DF", dst: "127.0.0.3", size: 9000, want: measurev1.Status_STATUS_OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rtt, st, msg := ping(t, pg, results, netip.MustParseAddr(tt.dst), tt.size, tt.df, 2*time.Second)
			if st != tt.want || !strings.Contains(msg, tt.msg) {
				t.Fatalf("ping: %v %q, want %v %q", st, msg, tt.want, tt.msg)
			}
			if st == measurev1.Status_STATUS_OK && (rtt <= 0 || rtt > 2*time.Second) {
				t.Errorf("rtt %v", rtt)
			}
		})
	}
}

// TestPingInNetNS: sockets opened inside a namespace whose lo has MTU
// 1280 and answers no echo: a don't-fragment echo over the MTU fails on
// send with the kernel's words; a reply injected from another address
// does not count, and the timeout names it.
func TestPingInNetNS(t *testing.T) {
	rawOK(t)
	ns := testnet.NewNetNS(t, "mp-probe")
	name := filepath.Base(ns)
	for _, args := range [][]string{
		{"ip", "-n", name, "link", "set", "lo", "mtu", "1280"},
		{"ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.icmp_echo_ignore_all=1"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	pg := openPinger(&Network{Net: measurev1.Network_NETWORK_POD, NetNS: ns, IP: netip.MustParseAddr("127.0.0.1")}, false)
	if pg.openErr != nil {
		t.Fatal(pg.openErr)
	}
	results := startReader(t, pg)
	target := netip.MustParseAddr("127.0.0.1")

	_, st, msg := ping(t, pg, results, target, 1300, true, 2*time.Second)
	if st != measurev1.Status_STATUS_UNREACHABLE || !strings.Contains(msg, "message too long") {
		t.Errorf("DF echo of 1328 bytes over MTU 1280: %v %q, want UNREACHABLE naming EMSGSIZE", st, msg)
	}

	type out struct {
		st  measurev1.Status
		msg string
	}
	res := make(chan out, 1)
	go func() {
		_, st, msg := ping(t, pg, results, target, 8, false, 500*time.Millisecond)
		res <- out{st, msg}
	}()
	injected := false
	for deadline := time.Now().Add(400 * time.Millisecond); !injected && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		pg.mu.Lock()
		for seq, w := range pg.waiting {
			if w.sent.IsZero() {
				break
			}
			b := echoReply(t, pg.id, seq)
			pg.mu.Unlock()
			if r, ok := pg.deliver(netip.MustParseAddr("127.0.0.9"), b, time.Now()); ok {
				t.Errorf("a reply from 127.0.0.9 counted: %v", r)
			}
			pg.mu.Lock()
			injected = true
			break
		}
		pg.mu.Unlock()
	}
	r := <-res
	if !injected {
		t.Fatal("the echo never waited for its reply")
	}
	if r.st != measurev1.Status_STATUS_TIMEOUT || !strings.Contains(r.msg, "came from 127.0.0.9") {
		t.Errorf("echo answered only from 127.0.0.9: %v %q, want TIMEOUT naming it", r.st, r.msg)
	}
}

// TestMarshalEcho: the echo request the pinger sends parses as one, with
// a valid checksum, for even and odd payloads.
func TestMarshalEcho(t *testing.T) {
	for _, size := range []int{0, 1, 56, 1471} {
		b := marshalEcho(nil, 0x1234, 0xabcd, payload[:size])
		m, err := icmp.ParseMessage(1, b)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		e, ok := m.Body.(*icmp.Echo)
		if m.Type != ipv4.ICMPTypeEcho || !ok || e.ID != 0x1234 || e.Seq != 0xabcd || len(e.Data) != size {
			t.Fatalf("size %d: parsed %v %+v", size, m.Type, m.Body)
		}
		want, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x1234, Seq: 0xabcd, Data: payload[:size]}}).Marshal(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(want) {
			t.Errorf("size %d: % x, want x/net/icmp's % x", size, b[:8], want[:8])
		}
	}
}
