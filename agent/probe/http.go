package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// maxBody bounds the bytes an HTTP probe reads of an answer; the figure
// is the time to the last of them.
const maxBody = 1 << 20

// httpClient returns the client of a network's HTTP probes: no proxy from
// the environment, no connection reuse (each probe measures a fresh
// connection), no redirects followed, dials in the network's namespace.
func httpClient(d dialer) *http.Client {
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, fmt.Errorf("dial %q: %w", addr, err)
			}
			return d.dial(ctx, ap.Addr(), ap.Port())
		},
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// httpProbe GETs http://dst:port/ and reads the answer; the figure is the
// time from the start of the connection (connect(2), once the socket
// exists in the network's namespace: see connectStartKey) to the last
// byte of the answer, as curl's time_total counts it for an IP literal
// URL. A non-2xx answer fails the probe, naming the code.
func httpProbe(ctx context.Context, c *http.Client, dst netip.Addr, port uint16) (time.Duration, measurev1.Status, string) {
	url := "http://" + netip.AddrPortFrom(dst, port).String() + "/"
	var connected bool
	trace := &httptrace.ClientTrace{
		ConnectDone: func(_, _ string, err error) { connected = err == nil },
	}
	var connectStart time.Time // set by the dial, which happens before Do returns
	ctx = context.WithValue(ctx, connectStartKey{}, &connectStart)
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, url, nil)
	if err != nil {
		return 0, measurev1.Status_STATUS_TOOL_ERROR, err.Error()
	}
	req.Header.Set("User-Agent", "meshperf-probe")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		msg := err.Error()
		if connected {
			msg = "connected, then: " + msg
		}
		return 0, netStatus(err), msg
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	end := time.Now()
	if connectStart.After(start) {
		start = connectStart
	}
	total := end.Sub(start)
	_ = resp.Body.Close()
	if err != nil {
		return 0, netStatus(err), fmt.Sprintf("GET %s: reading the answer: %v", url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, measurev1.Status_STATUS_SERVER_ERROR, "GET " + url + ": HTTP " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	}
	return total, measurev1.Status_STATUS_OK, ""
}
