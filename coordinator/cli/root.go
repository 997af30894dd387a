// Package cli is the coordinator's command line (cobra): `serve` runs the
// daemon; `trigger`, `results` and `agents` are clients of its MeshService,
// over the unix socket by default. Tables go to stdout, progress and logs to
// stderr; `-o json` prints protojson for scripts.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/apitoken"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/version"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TokenEnv names the environment variable that holds the API token when
// --token-file is not given.
const TokenEnv = "MESHPERF_TOKEN"

// DefaultSocket is where `serve` listens and the clients dial by default.
const DefaultSocket = "/run/meshperf/coordinator.sock"

// maxRecvBytes bounds one answer the CLI accepts.
const maxRecvBytes = 256 << 20

// ExitError carries a process exit code: `trigger` returns one with code 1
// when a pair-path failed, after printing its report and verdict, so the
// caller exits with Code without printing more. Any other error is
// trouble, not a verdict: cmd/coordinator exits 2 on it.
type ExitError struct {
	// Code is the exit status.
	Code int
	// Err says why.
	Err error
}

// Error returns Err's message.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// options are the flags every client command shares.
type options struct {
	address  string
	output   string
	timeout  time.Duration
	logLevel string
	// tokenFile, tlsCA, tlsCert and tlsKey secure a TCP coordinator.
	tokenFile              string
	tlsCA, tlsCert, tlsKey string
	stdout                 io.Writer
	stderr                 io.Writer
	stdin                  io.Reader // trigger's answer to "cancel run X?"
}

// NewCommand returns the `coordinator` root command writing to stdout and
// stderr.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &options{stdout: stdout, stderr: stderr, stdin: os.Stdin}
	root := &cobra.Command{
		Use:           "coordinator",
		Short:         "meshperf coordinator: schedules full-mesh network tests and keeps their results",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&o.address, "coordinator", "unix://"+DefaultSocket, `coordinator to talk to: a socket path ("/run/x.sock" or "unix:///run/x.sock") or "host:port"`)
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table or json; results, report and compare also csv")
	pf.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of each API call (trigger waits for the run regardless)")
	pf.StringVar(&o.tokenFile, "token-file", "", "file with the coordinator's API token, sent to a TCP coordinator (default: the token in $"+TokenEnv+", if set)")
	pf.StringVar(&o.tlsCA, "tls-ca", "", "CA (PEM) that signed a TCP coordinator's certificate; with --tls-cert and --tls-key the CLI speaks TLS 1.3 (the files are re-read when they change, at a new connection)")
	pf.StringVar(&o.tlsCert, "tls-cert", "", "client certificate (PEM) presented to a TCP coordinator")
	pf.StringVar(&o.tlsKey, "tls-key", "", "private key (PEM) of --tls-cert")
	root.AddCommand(newServeCommand(o), newTriggerCommand(o), newResultsCommand(o), newAgentsCommand(o),
		newRunsCommand(o), newReportCommand(o), newCompareCommand(o), newPlotCommand(o), newMaintenanceCommand(o), newHistoryCommand(o), newSeriesCommand(o), newDiagnoseCommand(o),
		newTargetsCommand(o), newCancelCommand(o))
	return root
}

func (o *options) logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", o.logLevel, err)
	}
	return slog.New(slog.NewTextHandler(o.stderr, &slog.HandlerOptions{Level: lvl, ReplaceAttr: safetext.LogAttr})), nil
}

// checkOutput refuses an --output the command does not print; with no
// formats given, table and json are allowed.
func (o *options) checkOutput(formats ...string) error {
	if len(formats) == 0 {
		formats = []string{"table", "json"}
	}
	if !slices.Contains(formats, o.output) {
		return fmt.Errorf("--output %q: want %s", o.output, strings.Join(formats, " or "))
	}
	return nil
}

// dial connects to the coordinator's MeshService.
func (o *options) dial() (meshv1.MeshServiceClient, func(), error) {
	if o.timeout <= 0 {
		return nil, nil, fmt.Errorf("--timeout %v: want a positive duration", o.timeout)
	}
	address := o.address
	if strings.HasPrefix(address, "/") {
		address = "unix://" + address // a bare socket path
	}
	security, err := o.security(strings.HasPrefix(address, "unix:"))
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(address, append(security,
		// A large run's planned tests or a full page of results can pass
		// gRPC's 4 MiB default.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvBytes)))...)
	if err != nil {
		return nil, nil, fmt.Errorf("coordinator address %q: %w", o.address, err)
	}
	return meshv1.NewMeshServiceClient(conn), func() { _ = conn.Close() }, nil
}

// security returns the dial options that secure the connection: none on
// the unix socket (its mode guards it; the TLS flags are refused there),
// and on TCP TLS with the --tls-* files and the API token from --token-file
// or $MESHPERF_TOKEN. A token is never sent without TLS.
func (o *options) security(unix bool) ([]grpc.DialOption, error) {
	tlsOn, err := mtls.AllOrNone(mtls.File{Flag: "tls-ca", Path: o.tlsCA}, mtls.File{Flag: "tls-cert", Path: o.tlsCert}, mtls.File{Flag: "tls-key", Path: o.tlsKey})
	if err != nil {
		return nil, err
	}
	if unix {
		if tlsOn {
			return nil, fmt.Errorf("--tls-ca, --tls-cert and --tls-key are for a TCP coordinator; %s is a unix socket, which is plaintext", o.address)
		}
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	var token string
	switch {
	case o.tokenFile != "":
		b, err := apitoken.ReadFile("--token-file", o.tokenFile)
		if err != nil {
			return nil, err
		}
		token = string(b)
	default:
		token = strings.TrimSpace(os.Getenv(TokenEnv))
	}
	if !tlsOn {
		if token != "" {
			return nil, fmt.Errorf("an API token (--token-file or $%s) is only sent over TLS: give --tls-ca, --tls-cert and --tls-key for %s", TokenEnv, o.address)
		}
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	log, err := o.logger()
	if err != nil {
		return nil, err
	}
	files, err := mtls.Load(mtls.Config{CAFile: o.tlsCA, CertFile: o.tlsCert, KeyFile: o.tlsKey, Logger: log})
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(files.ClientCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return opts, nil
}

// bearer sends an API token as "authorization: Bearer TOKEN", over TLS only.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// call bounds one API call with --timeout.
func (o *options) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.timeout)
}

// unary dials the coordinator, makes one call bounded by --timeout, and
// closes the connection; what names the call in its error ("list agents:
// ...").
func unary[Resp any](ctx context.Context, o *options, what string, call func(context.Context, meshv1.MeshServiceClient) (Resp, error)) (Resp, error) {
	var zero Resp
	client, closeConn, err := o.dial()
	if err != nil {
		return zero, err
	}
	defer closeConn()
	return bounded(ctx, o, what, func(ctx context.Context) (Resp, error) { return call(ctx, client) })
}

// bounded makes one call on an open connection, bounded by --timeout;
// what names the call in its error ("get run r1: ...").
func bounded[Resp any](ctx context.Context, o *options, what string, call func(context.Context) (Resp, error)) (Resp, error) {
	ctx, cancel := o.call(ctx)
	defer cancel()
	resp, err := call(ctx)
	if err != nil {
		var zero Resp
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return resp, nil
}

// printJSON writes m as indented protojson: proto field names, enums by
// name, 64-bit integers as strings and durations as "1.5s" (the protobuf
// JSON mapping).
func (o *options) printJSON(m proto.Message) error {
	// Field names as in the .proto files (throughput_bps), zero values
	// included, so scripts see every field.
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintln(o.stdout, string(b))
	return err
}

// printTable prints m as JSON under -o json; else a table: the header
// (tab-separated column names), then the rows that rows writes to tw, a
// line each, aligned when the table is flushed.
func (o *options) printTable(m proto.Message, header string, rows func(tw io.Writer)) error {
	if o.output == "json" {
		return o.printJSON(m)
	}
	tw := newTable(o.stdout, header)
	rows(tw)
	return tw.Flush()
}

// printLine prints m as JSON under -o json, else line.
func (o *options) printLine(m proto.Message, line string) error {
	if o.output == "json" {
		return o.printJSON(m)
	}
	_, err := fmt.Fprintln(o.stdout, line)
	return err
}

// newTable returns the writer of a table on w, its columns aligned (two
// spaces apart) once it is flushed, with the header row (tab-separated
// column names) written first unless it is "".
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, header)
	}
	return tw
}

// splitList splits comma-separated flag values and drops empty items.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
