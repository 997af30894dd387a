// Package stringers owns the turning of a list of values that print
// themselves (fmt.Stringer: addresses, prefixes, findings) into text, the
// one loop the agent, the registry, diagnose and the lab would each
// write again.
package stringers

import (
	"fmt"
	"strings"
)

// Strings returns each x's String(), in xs's order; an empty (not nil)
// slice for no xs.
func Strings[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

// Join returns the xs' String() joined by sep, or none when xs is empty
// (none may be "").
func Join[T fmt.Stringer](xs []T, sep, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(Strings(xs), sep)
}
