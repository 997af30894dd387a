package runner

import (
	"context"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestCurlExternalCommand(t *testing.T) {
	opts := "curl -q -g -v -sS -o /dev/null --noproxy * --max-time 5 --connect-timeout 5 -w " + CurlWriteOut
	tests := []struct {
		name    string
		url     string
		ip      string
		want    string // argv; "" when an error is wanted
		wantErr string
	}{
		{"DNS name with a port", "http://localhost:8080/path", "127.0.0.1",
			opts + " --resolve localhost:8080:127.0.0.1 --connect-to ::127.0.0.1: http://localhost:8080/path", ""},
		{"http default port", "http://web.example.com/", "192.0.2.7",
			opts + " --resolve web.example.com:80:192.0.2.7 --connect-to ::192.0.2.7: http://web.example.com/", ""},
		{"https default port, IPv6 in brackets", "https://web.example.com/health?x=1", "2001:db8::7",
			opts + " --resolve web.example.com:443:[2001:db8::7] --connect-to ::[2001:db8::7]: https://web.example.com/health?x=1", ""},
		{"host spelled as the URL has it", "https://Web.Example.COM.:8443/", "192.0.2.7",
			opts + " --resolve Web.Example.COM.:8443:192.0.2.7 --connect-to ::192.0.2.7: https://Web.Example.COM.:8443/", ""},
		{"braces and brackets in the path stay literal (-g)", "http://h.example/a{b}[c]", "192.0.2.7",
			opts + " --resolve h.example:80:192.0.2.7 --connect-to ::192.0.2.7: http://h.example/a{b}[c]", ""},
		{"IPv4 literal host: no --resolve", "http://192.0.2.7:81/", "192.0.2.7", opts + " --connect-to ::192.0.2.7: http://192.0.2.7:81/", ""},
		{"IPv6 literal host: no --resolve", "https://[2001:db8::7]/", "2001:db8::7", opts + " --connect-to ::[2001:db8::7]: https://[2001:db8::7]/", ""},
		{"literal host is another IP", "http://192.0.2.8/", "192.0.2.7", "", `http_url "http://192.0.2.8/": host 192.0.2.8 is not the resolved address 192.0.2.7`},
		{"not http", "ftp://h.example/", "192.0.2.7", "", `scheme "ftp"`},
		{"no host", "http:///path", "192.0.2.7", "", "not an absolute URL with a host"},
		{"opaque", "http:h.example", "192.0.2.7", "", "not an absolute URL with a host"},
		{"user information", "http://u:p@h.example/", "192.0.2.7", "", "user information"},
		{"whitespace", "http://h.example/ x", "192.0.2.7", "", "whitespace"},
		{"port 0", "http://h.example:0/", "192.0.2.7", "", `port "0"`},
		{"port too big", "http://h.example:65536/", "192.0.2.7", "", `port "65536"`},
		{"empty port", "http://h.example:/", "192.0.2.7", "", "empty port"},
		{"wildcard host", "http://*:80/", "192.0.2.7", "", `host "*" is neither`},
		{"escaped host", "http://h%2Eexample/", "192.0.2.7", "", `http_url "http://h%2Eexample/"`},
		{"no resolved address", "http://h.example/", "", "", "not a plain IP address"},
	}
	spec := normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			cmd, err := curlExternalCommand(spec, tt.url, ip, "/proc/42/ns/net")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one with %q (argv %s)", err, tt.wantErr, cmd)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cmd.String(); got != "nsenter --net=/proc/42/ns/net -- "+tt.want {
				t.Errorf("argv:\n got %s\nwant nsenter --net=/proc/42/ns/net -- %s", got, tt.want)
			}
		})
	}
}

// recordingRunner is a Runner with canned tools whose exec records the
// commands it is given and answers with out.
func recordingRunner(t *testing.T, out proc.Output) (*Runner, *[]proc.Command) {
	t.Helper()
	r := fakeRunner(Config{}, &measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_CURL, Version: "curl 7.88.1"},
		&measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_PING, Version: "ping from iputils 20221126"})
	var cmds []proc.Command
	r.exec = func(_ context.Context, c proc.Command) (proc.Output, error) {
		cmds = append(cmds, c)
		return out, nil
	}
	return r, &cmds
}

// TestRunExternalRuns: RunExternal hands the tool the resolved address
// (ping) or the URL pinned to it (curl), and reports that address.
func TestRunExternalRuns(t *testing.T) {
	curlOut := proc.Output{Stdout: []byte(curlMarker + "\nhttp_code=200\ntime_namelookup=0.000010\ntime_connect=0.000100\n" +
		"time_appconnect=0.000000\ntime_starttransfer=0.000500\ntime_total=0.000600\nsize_download=3\nexitcode=0\nerrormsg=\n")}
	pingOut := proc.Output{Stdout: []byte("PING 192.0.2.7 (192.0.2.7) 56(84) bytes of data.\n64 bytes from 192.0.2.7: icmp_seq=1 ttl=64 time=0.040 ms\n\n" +
		"--- 192.0.2.7 ping statistics ---\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\nrtt min/avg/max/mdev = 0.040/0.040/0.040/0.000 ms\n")}
	tests := []struct {
		name     string
		test     measurev1.Test
		ext      External
		out      proc.Output
		wantArgv string // the tail of the argv
	}{
		{"http", measurev1.Test_TEST_HTTP, External{Name: "web", IP: netip.MustParseAddr("127.0.0.1"), HTTPURL: "http://localhost:8080/path"}, curlOut,
			"--resolve localhost:8080:127.0.0.1 --connect-to ::127.0.0.1: http://localhost:8080/path"},
		{"ping", measurev1.Test_TEST_PING, External{Name: "lb", IP: netip.MustParseAddr("192.0.2.7")}, pingOut, "-W 1 192.0.2.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, cmds := recordingRunner(t, tt.out)
			req := &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: tt.test}, Network: measurev1.Network_NETWORK_HOST, ExternalTarget: tt.ext.Name}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := r.RunExternal(ctx, req, tt.ext)
			if len(got) != 1 || got[0].GetStatus() != measurev1.Status_STATUS_OK || got[0].GetTargetAddress() != tt.ext.IP.String() {
				t.Fatalf("results %v, want one OK with target_address %s", got, tt.ext.IP)
			}
			if len(*cmds) != 1 || !strings.HasSuffix((*cmds)[0].String(), " "+tt.wantArgv) {
				t.Errorf("commands %v, want one ending in %q", *cmds, tt.wantArgv)
			}
			checkResults(t, req.GetSpec(), got)
		})
	}
}

// TestRunExternalRefuses: a request that breaks RunExternal's rules (or a
// Run that names an external target) is INVALID and runs no tool.
func TestRunExternalRefuses(t *testing.T) {
	web := External{Name: "web", IP: netip.MustParseAddr("192.0.2.7"), HTTPURL: "http://web.example/"}
	lb := External{Name: "lb", IP: netip.MustParseAddr("192.0.2.8")}
	srv := External{Name: "srv", IP: netip.MustParseAddr("192.0.2.9"), Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766}
	host := measurev1.Network_NETWORK_HOST
	spec := func(test measurev1.Test) *measurev1.TestSpec { return &measurev1.TestSpec{Test: test} }
	tests := []struct {
		name   string
		req    *agentv1.RunClient
		ext    *External // nil: Run
		wantIn string
	}{
		{"Run with an external target", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: host, ExternalTarget: "lb"}, nil,
			`external_target "lb": this run is for a node target`},
		{"no external_target", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: host}, &lb, `external_target is empty`},
		{"another external_target", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: host, ExternalTarget: "web"}, &lb,
			`external_target "web" is not the external target "lb"`},
		{"target_ip too", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: host, ExternalTarget: "lb", TargetIp: "192.0.2.8"}, &lb,
			`external_target "lb": target_ip "192.0.2.8" must be empty`},
		{"port too", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_HTTP), Network: host, ExternalTarget: "web", Port: 80}, &web, "port 80"},
		{"iperf3", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_IPERF3_TCP), Network: host, ExternalTarget: "web"}, &web,
			`external_target "web" has no iperf3_port: it takes no iperf3 test (test iperf3_tcp)`},
		{"iperf3 with a port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_IPERF3_TCP), Network: host, ExternalTarget: "web", Port: 5201}, &web,
			`external_target "web" has no iperf3_port`},
		{"qperf", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_QPERF_TCP_LAT), Network: host, ExternalTarget: "web"}, &web,
			`external_target "web" has no qperf_port and qperf_data_port`},
		{"iperf3 to another port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_IPERF3_TCP), Network: host, ExternalTarget: "srv", Port: 22}, &srv,
			`external_target "srv": port 22 is not its iperf3_port 5201`},
		{"iperf3 without a port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_IPERF3_UDP), Network: host, ExternalTarget: "srv"}, &srv,
			`external_target "srv": port 0 is not its iperf3_port 5201`},
		{"iperf3 with a data port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_IPERF3_TCP), Network: host, ExternalTarget: "srv", Port: 5201,
			DataPort: 19766}, &srv, `external_target "srv": data_port 19766 must be 0 for test iperf3_tcp`},
		{"qperf to iperf3's port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_QPERF_TCP_BW), Network: host, ExternalTarget: "srv", Port: 5201,
			DataPort: 19766}, &srv, `external_target "srv": port 5201 is not its qperf_port 19765`},
		{"qperf to another data port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_QPERF_TCP_BW), Network: host, ExternalTarget: "srv", Port: 19765,
			DataPort: 6443}, &srv, `external_target "srv": data_port 6443 is not its qperf_data_port 19766`},
		{"ping with a port", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: host, ExternalTarget: "srv", Port: 5201}, &srv,
			`external_target "srv": port 5201 and data_port 0 must be 0 for test ping`},
		{"http without http_url", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_HTTP), Network: host, ExternalTarget: "lb"}, &lb,
			`external_target "lb" has no http_url`},
		{"unusable resolved address", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: host, ExternalTarget: "lb"},
			&External{Name: "lb", IP: netip.MustParseAddr("0.0.0.0")}, "unspecified"},
		{"URL's IP is not the resolved one", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_HTTP), Network: host, ExternalTarget: "lit"},
			&External{Name: "lit", IP: netip.MustParseAddr("192.0.2.7"), HTTPURL: "http://192.0.2.9/"}, "not the resolved address"},
		{"no pod network", &agentv1.RunClient{Spec: spec(measurev1.Test_TEST_PING), Network: measurev1.Network_NETWORK_POD, ExternalTarget: "lb"}, &lb,
			"network: NETWORK_POD has no namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, cmds := recordingRunner(t, proc.Output{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []*measurev1.Result
			if tt.ext == nil {
				got = r.Run(ctx, tt.req)
			} else {
				got = r.RunExternal(ctx, tt.req, *tt.ext)
			}
			if len(got) != 1 || got[0].GetStatus() != measurev1.Status_STATUS_INVALID || !strings.Contains(got[0].GetMessage(), tt.wantIn) {
				t.Errorf("results %v, want one INVALID with %q", got, tt.wantIn)
			}
			if len(*cmds) != 0 {
				t.Errorf("ran %v for a refused request", *cmds)
			}
			checkResults(t, tt.req.GetSpec(), got)
		})
	}
}

// FuzzCurlPin: curlExternalCommand never panics, and when it accepts a
// URL, curl gets it unchanged as its last argument, and a DNS-name host is
// pinned, as Go reads it, to the given IP on the URL's port.
func FuzzCurlPin(f *testing.F) {
	for _, s := range []string{"http://localhost:8080/path", "https://Web.Example.COM./", "http://192.0.2.7/", "https://[2001:db8::7]:8443/x",
		"http://h%2Eexample/", "http://u@h/", "ftp://h/", "http://*:80/", "http://h.example:/", "http://a b/",
		"http://0x7f.1/", "http://0x7f000001:80/", "http://a.0/", "http://1.2.3.0x4/", "http://web.example.com:80@evil/"} {
		f.Add(s, []byte{192, 0, 2, 7})
		f.Add(s, []byte{169, 254, 169, 254})
		f.Add(s, []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7})
	}
	spec, err := testspec.Normalize(&measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string, ipBytes []byte) {
		ip, _ := netip.AddrFromSlice(ipBytes)
		cmd, err := curlExternalCommand(spec, raw, ip, "")
		if err != nil {
			if !strings.Contains(err.Error(), "http_url") {
				t.Errorf("error %q does not name http_url", err)
			}
			return
		}
		args := cmd.Args
		if len(args) == 0 || args[len(args)-1] != raw {
			t.Fatalf("argv %q does not end with the URL %q", args, raw)
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q that url.Parse refuses: %v", raw, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
			t.Errorf("accepted %q: scheme %q, user %v", raw, u.Scheme, u.User)
		}
		var pins, catchAll []string
		for i, a := range args[:len(args)-1] {
			switch {
			case a == "--resolve" && i+1 < len(args)-1:
				pins = append(pins, args[i+1])
			case a == "--connect-to" && i+1 < len(args)-1:
				catchAll = append(catchAll, args[i+1])
			}
		}
		if want := connectTo(ip)[1]; len(catchAll) != 1 || catchAll[0] != want {
			t.Errorf("URL %q to %s: --connect-to %q, want [%s]", raw, ip, catchAll, want)
		}
		if err := protocol.CheckExternalIP(ip); err != nil {
			t.Errorf("URL %q pinned to %s: %v", raw, ip, err)
		}
		labels := strings.Split(strings.TrimSuffix(u.Hostname(), "."), ".")
		last := strings.ToLower(labels[len(labels)-1])
		if _, err := netip.ParseAddr(u.Hostname()); err != nil && (strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "") {
			t.Errorf("accepted %q, whose host curl may read as an IPv4 address", raw)
		}
		if hostIP, err := netip.ParseAddr(u.Hostname()); err == nil {
			if hostIP != ip || len(pins) != 0 {
				t.Errorf("literal host %s with IP %s: pins %q", hostIP, ip, pins)
			}
			return
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		want := u.Hostname() + ":" + port + ":" + ip.String()
		if ip.Is6() {
			want = u.Hostname() + ":" + port + ":[" + ip.String() + "]"
		}
		if len(pins) != 1 || pins[0] != want {
			t.Errorf("URL %q to %s: pins %q, want [%s]", raw, ip, pins, want)
		}
	})
}
