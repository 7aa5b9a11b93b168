package docrun

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

const uuidRE = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`

// Placeholders are what a page may write in a shown output for a value
// that differs at every run. Each matches within one line.
var Placeholders = map[string]string{
	"<tenant id>":  uuidRE,
	"<uuid>":       uuidRE,
	"<version id>": uuidRE,
	"<catalog id>": uuidRE,
	"<key id>":     `[0-9a-f]{16}`,
	"<token>":      `vcs_[0-9a-f]{16}_[A-Za-z0-9_-]{43}`,
	"<file id>":    `(?:[0-9a-f]{32}|` + uuidRE + `)`,
	"<yyyy-mm-dd>": `[0-9]{4}-[0-9]{2}-[0-9]{2}`,
	// RFC 3339, as the server prints times: UTC, fractions when not zero.
	"<time>":   `[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})`,
	"<n>":      `[0-9]+`,
	"<hex>":    `[0-9a-f]+`,
	"<sha256>": `[0-9a-f]{64}`,
	"<base64>": `[A-Za-z0-9+/_=-]+`,
	"<port>":   `[0-9]{1,5}`,
	// Anything, up to the end of the line (a version string, a date).
	"<words>": `.*`,
}

// ellipsis, alone on a line of a shown output, stands for any number of
// lines, none included.
const ellipsis = "..."

var placeholderRE = func() *regexp.Regexp {
	names := make([]string, 0, len(Placeholders))
	for n := range Placeholders {
		names = append(names, regexp.QuoteMeta(n))
	}
	sort.Strings(names)
	return regexp.MustCompile(strings.Join(names, "|"))
}()

// lineMatcher is one line of a shown output.
type lineMatcher struct {
	text string         // as the page shows it
	re   *regexp.Regexp // nil for the ellipsis
}

func (m lineMatcher) match(line string) bool {
	return m.re == nil || m.re.MatchString(line)
}

// compileLine turns one shown line into a regexp: literal text, with each
// placeholder replaced by its pattern.
func compileLine(line string) lineMatcher {
	if line == ellipsis {
		return lineMatcher{text: line}
	}
	var b strings.Builder
	b.WriteString("^")
	rest := line
	for {
		loc := placeholderRE.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		// A placeholder also matches its own text, so that a page can show
		// a message that itself says "Bearer <token>".
		name := rest[loc[0]:loc[1]]
		b.WriteString("(?:" + Placeholders[name] + "|" + regexp.QuoteMeta(name) + ")")
		rest = rest[loc[1]:]
	}
	b.WriteString("$")
	return lineMatcher{text: line, re: regexp.MustCompile(b.String())}
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Match reports whether got is what shown shows, placeholders and
// ellipses included. Trailing newlines are not compared.
func Match(shown, got string) bool {
	_, ok := diff(shown, got)
	return ok
}

// Diff returns a readable difference between the shown output and what
// was printed, "" when they match: lines only shown start with "-", lines
// only printed with "+", lines in both with " ".
func Diff(shown, got string) string {
	d, ok := diff(shown, got)
	if ok {
		return ""
	}
	return d
}

// diff aligns the shown lines with the printed ones by a longest common
// subsequence in which a shown line "equals" a printed line it matches,
// and an ellipsis may take any number of printed lines.
func diff(shown, got string) (string, bool) {
	want := splitLines(shown)
	have := splitLines(got)
	ms := make([]lineMatcher, len(want))
	for i, l := range want {
		ms[i] = compileLine(l)
	}
	n, m := len(ms), len(have)
	// cost[i][j]: the fewest unmatched lines aligning ms[i:] with have[j:].
	cost := make([][]int, n+1)
	for i := range cost {
		cost[i] = make([]int, m+1)
	}
	for i := n; i >= 0; i-- {
		for j := m; j >= 0; j-- {
			switch {
			case i == n:
				cost[i][j] = m - j
			case j == m:
				c := 1
				if ms[i].re == nil {
					c = 0
				}
				cost[i][j] = c + cost[i+1][j]
			case ms[i].re == nil:
				// The ellipsis ends here, or takes one more line.
				cost[i][j] = min(cost[i+1][j], cost[i][j+1])
			default:
				best := 1 + min(cost[i+1][j], cost[i][j+1])
				if ms[i].match(have[j]) && cost[i+1][j+1] < best {
					best = cost[i+1][j+1]
				}
				cost[i][j] = best
			}
		}
	}
	if cost[0][0] == 0 {
		return "", true
	}
	var b strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && ms[i].re == nil:
			if j < m && cost[i][j] == cost[i][j+1] {
				fmt.Fprintf(&b, " %s\n", have[j])
				j++
			} else {
				i++
			}
		case i < n && j < m && ms[i].match(have[j]) && cost[i][j] == cost[i+1][j+1]:
			fmt.Fprintf(&b, " %s\n", have[j])
			i++
			j++
		case i < n && (j == m || cost[i][j] == 1+cost[i+1][j]):
			fmt.Fprintf(&b, "-%s\n", ms[i].text)
			i++
		default:
			fmt.Fprintf(&b, "+%s\n", have[j])
			j++
		}
	}
	return b.String(), false
}
