// Package safetext makes the text that agents and tools send safe to keep
// and to print: Escape turns control characters (C0, DEL, C1 and the
// Unicode bidirectional controls) and invalid UTF-8 into visible Go-style
// escapes, so that no message or tool version can move an operator's
// cursor, recolour a terminal or reorder a line; Cut bounds a text's
// length on a UTF-8 boundary and says how long it was; CSVCell keeps a
// text in a CSV export from being read as a spreadsheet formula.
package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the texts an agent sends, in bytes (after Escape, marker
// included).
const (
	// MaxMessageBytes bounds a result's or a work answer's message.
	MaxMessageBytes = 4096
	// MaxToolVersionBytes bounds a tool version.
	MaxToolVersionBytes = 256
	// MaxAddressBytes bounds a result's target address (an IP address is
	// at most 45 bytes long).
	MaxAddressBytes = 64
	// MaxProbeMessageBytes bounds a continuous probe summary's message:
	// the agent cuts it to this, the coordinator refuses a longer one and
	// stores at most this much per sample.
	MaxProbeMessageBytes = 256
)

// NeedsEscape reports whether r must not reach a terminal as it is: a C0
// control (tab and newline included), DEL, a C1 control, a Unicode
// bidirectional control (U+061C, U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069), the line and paragraph separators U+2028 and U+2029,
// or utf8.RuneError (which is what an invalid byte decodes to).
func NeedsEscape(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029' || r == utf8.RuneError
}

// Escape returns s with every rune NeedsEscape reports written as
// strconv.Quote writes it (\n, \t, \x1b, \u202e) and every invalid UTF-8
// byte as \xNN. A literal U+FFFD is kept. Other text, backslashes
// included, is unchanged, so Escape(Escape(s)) == Escape(s); s is returned
// as it is when nothing needs escaping.
func Escape(s string) string {
	if !needsEscaping(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case r == utf8.RuneError: // a literal U+FFFD: printable
			b.WriteString(s[i : i+size])
		case NeedsEscape(r):
			q := strconv.QuoteRune(r) // '\x1b', '\u202e', '\n'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscaping reports whether Escape would change s.
func needsEscaping(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r != utf8.RuneError && NeedsEscape(r)) {
			return true
		}
		i += size
	}
	return false
}

// Marker is what Cut appends, with the original length in bytes:
// "… [cut: 1258291 bytes]".
func Marker(originalBytes int) string {
	return "… [cut: " + strconv.Itoa(originalBytes) + " bytes]"
}

// Cut returns s if it is at most maxBytes long; otherwise as much of s as
// fits, cut on a UTF-8 boundary, followed by Marker(len(s)), in maxBytes
// at most. With a maxBytes too small for the marker it returns the marker
// alone.
func Cut(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	return cutTo(s, maxBytes, len(s))
}

// cutTo cuts s to maxBytes with the marker of an original of n bytes.
func cutTo(s string, maxBytes, n int) string {
	m := Marker(n)
	keep := maxBytes - len(m)
	if keep <= 0 {
		return m
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + m
}

// Bound returns s escaped (Escape) and cut to maxBytes (Cut), the marker
// naming s's own length; changed reports whether it differs from s.
func Bound(s string, maxBytes int) (out string, changed bool) {
	out = Escape(s)
	if len(out) > maxBytes {
		out = cutTo(out, maxBytes, len(s))
	}
	return out, out != s
}

// Line is Escape for a table cell: runs of white space (newlines and tabs
// included) become one space first, so that a cell stays on its line and
// in its column, then the rest is escaped.
func Line(s string) string {
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		s = strings.Join(strings.Fields(s), " ")
	}
	return Escape(s)
}

// CSVCell is Escape for a free-text cell of a CSV export (a message, a
// tool version): a text that starts with '=', '+', '-' or '@' gets a
// leading "'", so that a spreadsheet opening the export shows it as
// text instead of running it as a formula (=HYPERLINK(...), @SUM(...)).
// Tab and carriage return, the other formula starters, are escaped
// already. Figures are no text: write them as they are.
func CSVCell(s string) string {
	s = Escape(s)
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		return "'" + s
	}
	return s
}
