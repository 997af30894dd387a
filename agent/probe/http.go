package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"strconv"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	// maxBody bounds the bytes an HTTP probe reads of an answer; the
	// figure is the time to the last of them.
	maxBody = 1 << 20
	// maxHead bounds the bytes of an answer's status line and headers.
	maxHead = 64 << 10
)

// httpClient returns the client of a network's HTTP probes: no proxy, no
// connection reuse (each probe measures a fresh connection), no redirects
// followed, no compression asked for, dials in the network's namespace;
// its transport is a probeTransport.
func httpClient(d dialer) *http.Client {
	return &http.Client{
		Transport:     probeTransport{d: d},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// probeTransport is the HTTP probes' http.RoundTripper: for each request
// it dials a fresh connection (d.dial: the socket is created in the
// network's namespace), writes the request and reads the answer's status
// line and headers, all on the calling goroutine; the answer's body reads
// from the connection on the goroutine that reads it, and closing the body
// closes the connection. The request's context bounds it all.
//
// net/http's own Transport dials in a goroutine of its own and reads and
// writes each connection in two more (readLoop, writeLoop), handing the
// request, the answer and the body's bytes between them: in the lab
// (deploy/lab's TestProbeFidelity, 2 shared cores) those hand-offs made a
// GET on a fresh connection to an agent/httptarget server in another
// process 130-215 us (35-45 %) slower than curl's, back to back, which is
// the client's cost and not the path's. curl runs a transfer on one
// thread, as this transport does.
//
// Of the request's httptrace hooks it calls ConnectDone (after connect or
// a failed dial; the net.Dialer of the agent's own namespace also calls
// ConnectStart), WroteRequest, WroteHeaders (both from Request.Write),
// GotFirstResponseByte and, as the body is closed, before the connection
// is, PutIdleConn with errNotPooled; no other.
type probeTransport struct{ d dialer }

// RoundTrip implements http.RoundTripper for http:// URLs whose host is an
// IP address and port (the probe's URLs).
func (t probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	if req.URL.Scheme != "http" {
		return nil, fmt.Errorf("probe transport: scheme %q: only http", req.URL.Scheme)
	}
	ap, err := netip.ParseAddrPort(req.URL.Host)
	if err != nil {
		return nil, fmt.Errorf("dial %q: %w", req.URL.Host, err)
	}
	c, err := t.d.dial(ctx, ap.Addr(), ap.Port())
	if t.d.ns != "" && trace != nil && trace.ConnectDone != nil {
		// In the agent's own namespace the net.Dialer has called it.
		trace.ConnectDone("tcp", req.URL.Host, err)
	}
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fail := func(what string, err error) (*http.Response, error) {
		stop()
		_ = c.Close()
		return nil, fmt.Errorf("%s %s: %w", what, req.URL.Host, ctxErr(ctx, err))
	}
	if err := req.Write(c); err != nil { // calls WroteRequest
		return fail("writing the request to", err)
	}
	lr := &io.LimitedReader{R: &firstByte{r: c, trace: trace}, N: maxHead}
	resp, err := http.ReadResponse(bufio.NewReaderSize(lr, 4<<10), req)
	if err != nil {
		return fail("reading the answer's head from", err)
	}
	lr.N = maxBody // what the body may read on from the connection
	resp.Body = &probeBody{ReadCloser: resp.Body, ctx: ctx, c: c, stop: stop, trace: trace}
	return resp, nil
}

// ctxErr is err, or ctx's error (naming err) when ctx has ended and err
// is the connection's deadline, which was ctx's end.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%v)", cerr, err) //nolint:errorlint // the sentinel decides errors.Is; the cause is text only
	}
	return err
}

// firstByte reads r and calls trace's GotFirstResponseByte once, at the
// first byte read.
type firstByte struct {
	r     io.Reader
	trace *httptrace.ClientTrace
	got   bool
}

func (f *firstByte) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if n > 0 && !f.got {
		f.got = true
		if f.trace != nil && f.trace.GotFirstResponseByte != nil {
			f.trace.GotFirstResponseByte()
		}
	}
	return n, err
}

// errNotPooled is what probeTransport's PutIdleConn hook is told: no
// connection is kept.
var errNotPooled = errors.New("the probe's connection is closed, never pooled")

// probeBody is an answer's body: closing it closes the connection.
type probeBody struct {
	io.ReadCloser
	ctx   context.Context
	c     net.Conn
	stop  func() bool
	trace *httptrace.ClientTrace
}

func (b *probeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = ctxErr(b.ctx, err)
	}
	return n, err
}

func (b *probeBody) Close() error {
	if b.trace != nil && b.trace.PutIdleConn != nil {
		b.trace.PutIdleConn(errNotPooled)
	}
	b.stop()
	return b.c.Close()
}

// httpProbe GETs http://dst:port/ (Connection: close) and reads the
// answer; the figure is the time from the start of the connection
// (connect(2), once the socket exists in the network's namespace: see
// connectStartKey) to the last byte of the answer, as curl's time_total
// counts it for an IP literal URL. A non-2xx answer fails the probe,
// naming the code.
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
	req.Close = true
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
