package clidoc

import (
	"fmt"
	"regexp"
	"strings"
)

// refDefinition matches a Markdown link reference definition,
// "[label]: target", indented at most three spaces.
var refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:[ \t]*(\S+)`)

// scheme matches the start of an absolute URL ("https:", "mailto:").
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Link is one relative link of a Markdown page.
type Link struct {
	// Path is the path the link names, relative to the page's directory
	// (or, starting with "/", to the repository's root), %-escapes kept;
	// "" for a fragment of the page itself.
	Path string
	// Fragment is the link's fragment without the "#"; "" for none.
	Fragment string
}

// Links returns the relative links and images of the Markdown text md,
// in order of appearance: inline links "[text](target)" and images
// "![alt](target)", with the target in angle brackets or not and with or
// without a title, and reference definitions "[label]: target". A query
// ("?raw=1") is cut off. Absolute URLs (with a scheme: "https:",
// "mailto:", or "//host"), empty targets, and anything inside a fenced
// code block or a code span are left out.
func Links(md []byte) []Link {
	var out []Link
	for _, line := range prose(md) {
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			out = appendTarget(out, strings.Trim(m[1], "<>"))
			continue
		}
		out = inlineLinks(out, line)
	}
	return out
}

// inlineLinks appends the inline links of one line, code spans left out.
func inlineLinks(out []Link, line string) []Link {
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '`':
			if end := codeSpanEnd(line, i); end > i {
				i = end - 1
				continue
			}
			for i+1 < len(line) && line[i+1] == '`' {
				i++
			}
		case line[i] == ']' && i+1 < len(line) && line[i+1] == '(':
			target, end := linkTarget(line, i+2)
			if end < 0 {
				continue
			}
			out = appendTarget(out, target)
			i = end
		}
	}
	return out
}

// linkTarget reads the destination of an inline link that starts at
// line[start] (just after "]("): "<...>", or up to the first space or
// the ")" that balances the parentheses. It returns the destination and
// the index of the last byte read, or -1 when the link is not closed on
// the line.
func linkTarget(line string, start int) (target string, end int) {
	if start < len(line) && line[start] == '<' {
		gt := strings.IndexByte(line[start:], '>')
		if gt < 0 {
			return "", -1
		}
		return line[start+1 : start+gt], start + gt
	}
	depth := 0
	for j := start; j < len(line); j++ {
		switch line[j] {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return line[start:j], j
			}
			depth--
		case ' ', '\t':
			if rest := strings.IndexByte(line[j:], ')'); rest >= 0 {
				return line[start:j], j + rest
			}
			return "", -1
		}
	}
	return "", -1
}

// appendTarget appends the link of target to out unless it is absolute
// or empty; a query is cut off.
func appendTarget(out []Link, target string) []Link {
	var l Link
	l.Path, l.Fragment, _ = strings.Cut(target, "#")
	l.Path, _, _ = strings.Cut(l.Path, "?")
	if l.Path == "" && l.Fragment == "" || scheme.MatchString(l.Path) || strings.HasPrefix(l.Path, "//") {
		return out
	}
	return append(out, l)
}

// prose returns the lines of the Markdown text md that are not in a
// fenced code block (nor its fences: "```" or "~~~", indented at most
// three spaces).
func prose(md []byte) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(string(md), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) <= 3 {
			if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
				fence = trimmed[:3]
				continue
			}
			if fence != "" && strings.HasPrefix(trimmed, fence) {
				fence = ""
				continue
			}
		}
		if fence == "" {
			out = append(out, line)
		}
	}
	return out
}

// atxHeading matches a Markdown ATX heading ("## Text", optionally closed
// by "#"s), indented at most three spaces.
var atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)

// htmlAnchor matches an explicit HTML anchor, <a id="name"></a>, which
// GitHub keeps (as user-content-name, reachable as #name).
var htmlAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"></a>`)

// Anchors returns the fragments GitHub gives the ATX headings of the
// Markdown text md (Anchor of each heading's text, code spans' backticks
// dropped; a repeated anchor gets "-1", "-2", ...) and the explicit
// <a id="..."></a> anchors, as a set. Headings and anchors in fenced code
// blocks are left out.
func Anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(md) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}
