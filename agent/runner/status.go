package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// MaxMessageBytes bounds Result.message: the tool's words are trimmed,
// folded onto one line ("; " between lines) and cut to this many bytes.
const MaxMessageBytes = 512

// Failure is a test that yielded no metrics: the status to report and a
// message with the tool's own words. Parsers return it as their error.
type Failure struct {
	// Status is never STATUS_OK or STATUS_UNSPECIFIED.
	Status measurev1.Status
	// Message is at most MaxMessageBytes of valid UTF-8 on one line. In the
	// failures the parsers return (parseFailure) and in failed results it
	// is never empty and never starts with punctuation or a symbol.
	Message string
}

// Error returns the status's short name and the message, e.g.
// "refused: unable to connect to server: Connection refused".
func (f *Failure) Error() string {
	return testspec.StatusName(f.Status) + ": " + f.Message
}

// fail builds a Failure; the message is cleaned with oneLine.
func fail(status measurev1.Status, format string, args ...any) *Failure {
	return &Failure{Status: status, Message: oneLine(fmt.Sprintf(format, args...))}
}

// asFailure returns err as a *Failure, or a TOOL_ERROR Failure.
func asFailure(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	return fail(measurev1.Status_STATUS_TOOL_ERROR, "%v", err)
}

// oneLine makes s fit for Result.message: valid UTF-8 with control
// characters dropped, each line trimmed and runs of spaces folded, empty
// lines dropped, lines joined by "; ", at most MaxMessageBytes (cut at a
// rune boundary, "..." appended).
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "?")
	var lines []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.Map(func(r rune) rune {
			switch {
			case r == '\t' || r == '\r':
				return ' '
			case unicode.IsControl(r):
				return -1
			}
			return r
		}, line)
		line = strings.Join(strings.Fields(line), " ")
		if line != "" {
			lines = append(lines, line)
		}
	}
	s = strings.Join(lines, "; ")
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// failMessage makes msg fit for a failed result of tool: oneLine, without
// the separators ("; ", ", ") a join may have left in front, never empty
// (the status's name stands in) and never starting with punctuation or a
// symbol: such a message (e.g. qperf's "::1: failed to connect") gets
// "TOOL: " in front.
func failMessage(tool string, status measurev1.Status, msg string) string {
	msg = strings.TrimLeftFunc(oneLine(msg), func(r rune) bool {
		return r == ';' || r == ',' || unicode.IsSpace(r)
	})
	if msg == "" {
		return testspec.StatusName(status)
	}
	if r, _ := utf8.DecodeRuneInString(msg); unicode.IsPunct(r) || unicode.IsSymbol(r) {
		msg = oneLine(tool + ": " + msg)
	}
	return msg
}

// finish enforces what every result of the runner satisfies, whichever path
// made it: a status is set (UNSPECIFIED becomes TOOL_ERROR); a STATUS_OK
// result carries metrics (else it becomes TOOL_ERROR); a result that is not
// OK carries no metrics and a message as failMessage makes it.
func finish(tool string, res *measurev1.Result) {
	switch {
	case res.GetStatus() == measurev1.Status_STATUS_UNSPECIFIED:
		res.Status = measurev1.Status_STATUS_TOOL_ERROR
		res.Message = joinWords("internal error: no status set", res.GetMessage())
	case res.GetStatus() == measurev1.Status_STATUS_OK && res.Metrics == nil:
		res.Status = measurev1.Status_STATUS_TOOL_ERROR
		res.Message = joinWords("internal error: ok without metrics", res.GetMessage())
	}
	if res.GetStatus() == measurev1.Status_STATUS_OK {
		// An OK result may carry a note (exitNote, replies from other
		// addresses, ...): bounded and on one line like any message.
		res.Message = oneLine(res.GetMessage())
		return
	}
	res.Metrics = nil
	res.Message = failMessage(tool, res.GetStatus(), res.GetMessage())
}

// truncatedWords says that tool's output was cut at proc's cap; a failed
// parse of such output says so (see resultsOf).
func truncatedWords(tool string) string {
	return fmt.Sprintf("%s output truncated at %d MiB", tool, proc.MaxOutputBytes>>20)
}

// parseFailure is what a parser (ParsePing, ParseQperf, ParseIperf3,
// ParseCurl) returns for err: nil for nil, else a *Failure whose status is
// err's (TOOL_ERROR for an error that is not a *Failure) and whose message
// satisfies what every failed result does (failMessage: never empty, never
// starting with punctuation), with truncatedWords in front when out was
// truncated (unless it says so already).
func parseFailure(tool string, out proc.Output, err error) error {
	if err == nil {
		return nil
	}
	f := asFailure(err)
	msg := f.Message
	if out.Truncated && !strings.Contains(msg, truncatedWords(tool)) {
		msg = joinWords(truncatedWords(tool), msg)
	}
	return &Failure{Status: f.Status, Message: failMessage(tool, f.Status, msg)}
}

// tail returns the last n lines of b that are not empty, for messages.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	return strings.Join(keep, "\n")
}

// Words that tools print (strerror texts, as iperf3, curl -v and ping show
// them, and iperf3's busy message) and the status each means. The first
// match in this order wins.
var textStatuses = []struct {
	words  string
	status measurev1.Status
}{
	{"busy", measurev1.Status_STATUS_BUSY},
	{"connection refused", measurev1.Status_STATUS_REFUSED},
	{"no route to host", measurev1.Status_STATUS_UNREACHABLE},
	{"network is unreachable", measurev1.Status_STATUS_UNREACHABLE},
	{"host is unreachable", measurev1.Status_STATUS_UNREACHABLE},
	{"destination host unreachable", measurev1.Status_STATUS_UNREACHABLE},
	{"destination net unreachable", measurev1.Status_STATUS_UNREACHABLE},
	{"timed out", measurev1.Status_STATUS_TIMEOUT},
	{"timeout was reached", measurev1.Status_STATUS_TIMEOUT},
}

// classifyText maps a tool's error words to a status, or returns
// STATUS_UNSPECIFIED when the words say nothing known.
func classifyText(s string) measurev1.Status {
	s = strings.ToLower(s)
	for _, t := range textStatuses {
		if strings.Contains(s, t.words) {
			return t.status
		}
	}
	return measurev1.Status_STATUS_UNSPECIFIED
}

// runFailure maps what proc.Run returned when the run did not end on its
// own: a missing program, a start error, or the context's end. It returns
// nil when the tool exited by itself, even if ctx ended meanwhile: the
// output is then parsed as usual.
func runFailure(tool string, out proc.Output, err error) *Failure {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, proc.ErrNotFound):
		return fail(measurev1.Status_STATUS_TOOL_MISSING, "%s: %v", tool, proc.ErrNotFound)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		if out.ExitCode >= 0 {
			return nil
		}
		status, what := measurev1.Status_STATUS_TIMEOUT, "the deadline passed"
		if errors.Is(err, context.Canceled) {
			status, what = measurev1.Status_STATUS_CANCELED, "the run was canceled"
		}
		msg := fmt.Sprintf("%s before %s finished", what, tool)
		if t := tail(append(append([]byte{}, out.Stdout...), out.Stderr...), 3); t != "" {
			msg += "; its last words: " + t
		}
		return fail(status, "%s", msg)
	default:
		return fail(measurev1.Status_STATUS_TOOL_ERROR, "%s: %v", tool, err)
	}
}

// ctxFailure is the failure of a test that could not start because ctx
// had already ended, or nil if ctx is still live.
func ctxFailure(ctx context.Context, what string) *Failure {
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fail(measurev1.Status_STATUS_TIMEOUT, "the deadline passed before %s started", what)
	default:
		return fail(measurev1.Status_STATUS_CANCELED, "the run was canceled before %s started", what)
	}
}

// exitNote is what the message of an OK result says when its tool exited
// with a non-zero status, or said more (words: stderr, or qperf's
// complaints), after output the parser found complete and plausible:
// "iperf3 exited 1 after a complete result: iperf3: error - ...", "qperf
// also said: ..."; "" when the exit status is 0 and there are no words.
//
// Such a result stays STATUS_OK with the figures, the error and the exit
// status in its message, not TOOL_ERROR: a result that is not OK carries
// no metrics (finish), so TOOL_ERROR would throw away a measurement that
// passed every check of its parser for words that typically concern what
// came after it (a control connection closed at the end, a later size of
// a loop, a warning), while the message keeps the error visible in
// results, tables and JSON. Output that is not complete or not plausible
// fails its parser's checks and is not OK in the first place; curl is
// not concerned (a non-zero exit means its transfer failed: ParseCurl).
func exitNote(tool string, exitCode int, words []string) string {
	if len(words) > 3 {
		words = words[len(words)-3:]
	}
	cut := make([]string, 0, len(words))
	for _, w := range words {
		if w = strings.TrimSpace(w); w != "" {
			cut = append(cut, abbrevLine(w))
		}
	}
	said := strings.Join(cut, "; ")
	switch {
	case exitCode == 0 && said == "":
		return ""
	case exitCode == 0:
		return fmt.Sprintf("%s also said: %s", tool, said)
	}
	how := fmt.Sprintf("exited %d", exitCode)
	if exitCode < 0 {
		how = "was killed by a signal"
	}
	if said == "" {
		return fmt.Sprintf("%s %s after a complete result", tool, how)
	}
	return fmt.Sprintf("%s %s after a complete result: %s", tool, how, said)
}

// lines returns the non-empty lines of b, trimmed.
func lines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
