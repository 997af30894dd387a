package probe

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// ICMPv6 message types (RFC 4443) the pingers send and read.
const (
	icmp6DstUnreach   = 1
	icmp6PacketTooBig = 2
	icmp6TimeExceeded = 3
	icmp6EchoRequest  = 128
	icmp6EchoReply    = 129
)

// listenICMPv6 opens one raw ip6:ipv6-icmp socket bound to addr. An echo
// socket reads only echo replies, destination unreachables, packet too
// big and time exceeded (ICMP6_FILTER), with kernel receive timestamps; a
// don't-fragment socket reads nothing and sets IPV6_MTU_DISCOVER to
// IPV6_PMTUDISC_DO and IPV6_DONTFRAG, so that an echo over the path MTU
// fails (EMSGSIZE) instead of going out in fragments. The kernel computes
// the ICMPv6 checksum of what is sent (RFC 3542 3.1).
func listenICMPv6(addr string, df bool) (*net.IPConn, error) {
	pc, err := net.ListenPacket("ip6:ipv6-icmp", addr)
	if err != nil {
		return nil, err
	}
	c := pc.(*net.IPConn)
	var filter unix.ICMPv6Filter // a set bit blocks its type
	for i := range filter.Data {
		filter.Data[i] = ^uint32(0)
	}
	if !df {
		for _, t := range []int{icmp6EchoReply, icmp6DstUnreach, icmp6PacketTooBig, icmp6TimeExceeded} {
			filter.Data[t>>5] &^= 1 << uint(t&31)
		}
	}
	return configure(c, func(fd int) error {
		if err := unix.SetsockoptICMPv6Filter(fd, unix.IPPROTO_ICMPV6, unix.ICMPV6_FILTER, &filter); err != nil {
			return err
		}
		if df {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO); err != nil {
				return err
			}
			return unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1)
		}
		return setEchoReceive(fd)
	})
}

// ipHeader is the length in bytes of the IP header the pinger's echoes
// go out with: 20 for IPv4, 40 for IPv6.
func (pg *pinger) ipHeader() int {
	if pg.v6 {
		return 40
	}
	return 20
}

// deliver6 is deliver for an ICMPv6 message b (a raw ICMPv6 socket reads
// no IPv6 header).
func (pg *pinger) deliver6(src netip.Addr, b []byte, at time.Time) (result, bool) {
	switch b[0] {
	case icmp6EchoReply:
		return pg.reply(src, b, at)
	case icmp6DstUnreach, icmp6PacketTooBig, icmp6TimeExceeded:
		dst, id, seq, ok := quotedEcho6(b[8:])
		if !ok || id != pg.id {
			return result{}, false
		}
		var msg string
		switch b[0] {
		case icmp6DstUnreach:
			msg = fmt.Sprintf("destination unreachable (code %d), from %s", b[1], src)
		case icmp6PacketTooBig:
			msg = fmt.Sprintf("packet too big, next-hop MTU %d, from %s", binary.BigEndian.Uint32(b[4:8]), src)
		default:
			msg = fmt.Sprintf("time exceeded, from %s", src)
		}
		return pg.refused(dst, seq, msg)
	}
	return result{}, false
}

// quotedEcho6 parses the IPv6 packet an ICMPv6 error quotes: its
// destination and, if it was an echo request (right after the fixed
// header: the pingers send no extension headers), the echo's ID and
// sequence.
func quotedEcho6(d []byte) (dst netip.Addr, id, seq uint16, ok bool) {
	if len(d) < 48 || d[0]>>4 != 6 || d[6] != unix.IPPROTO_ICMPV6 || d[40] != icmp6EchoRequest {
		return netip.Addr{}, 0, 0, false
	}
	dst = netip.AddrFrom16([16]byte(d[24:40]))
	return dst, binary.BigEndian.Uint16(d[44:]), binary.BigEndian.Uint16(d[46:]), true
}

// marshalEcho6 appends to b an ICMPv6 echo request (ID, sequence, data)
// with a zero checksum: the kernel fills it in on a raw ICMPv6 socket.
func marshalEcho6(b []byte, id, seq uint16, data []byte) []byte {
	b = append(b, icmp6EchoRequest, 0, 0, 0, byte(id>>8), byte(id), byte(seq>>8), byte(seq))
	return append(b, data...)
}
