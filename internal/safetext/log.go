package safetext

import "log/slog"

// LogAttr is a slog.HandlerOptions.ReplaceAttr that escapes (Escape)
// string and error values, the message included: slog's text handler
// quotes most control characters itself, but not DEL, and its JSON
// handler leaves DEL, C1 and bidi controls raw.
func LogAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch a.Value.Kind() {
	case slog.KindString:
		s = a.Value.String()
	case slog.KindAny:
		err, ok := a.Value.Any().(error)
		if !ok || err == nil {
			return a
		}
		s = err.Error()
	default:
		return a
	}
	if needsEscaping(s) {
		a.Value = slog.StringValue(Escape(s))
	}
	return a
}
