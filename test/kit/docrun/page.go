// Package docrun runs the documentation's pages as tests: every ```sh
// block of a page is run, in order, in one bash session, and what it prints
// is compared with the ```text block shown after it. docs/README.md
// describes the conventions for page writers; docs/docs_test.go runs every
// page of docs/.
package docrun

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Page is one Markdown file, cut into the blocks the runner runs.
type Page struct {
	Path   string   // as read
	Name   string   // base name, "getting-started.md"
	After  []string // pages whose blocks run first, in the same session
	Blocks []*Block
	// Server says a block of the page runs a command that names
	// objects.example.com, the S3 service the runner then starts.
	Server bool
	// KMS says a block names kms.example.com, the key service the runner
	// is then given (Options.KMS).
	KMS bool
}

// Block is one ```sh block and the output the page shows for it.
type Block struct {
	Page    string
	Line    int    // of the opening fence, 1-based
	Command string // the block's text
	// Output is the ```text block that follows, if one does before any
	// other fenced block. A block without one must print nothing.
	Output     string
	HasOutput  bool
	OutputLine int
	// Skip is why the page asks that this block not be run ("" to run).
	Skip string
	// Needs are vcon-server commands ("master-key rotate") that the
	// block's section needs; while the binary lacks one, the block is not
	// run, and the runner says so.
	Needs []string
}

// A directive is an HTML comment, invisible when the page is rendered:
//
//	<!-- docs-test: skip (why) -->            the next fenced block is not run
//	<!-- docs-test: after a.md b.md -->       run a.md and b.md first, same session
//	<!-- docs-test: needs-command backup -->  this section's blocks need a command
var directive = regexp.MustCompile(`^\s*<!--\s*docs-test:\s*([a-z-]+)\s*(.*?)\s*-->\s*$`)

var (
	fenceOpen  = regexp.MustCompile("^( {0,3})```([A-Za-z0-9_+-]*)\\s*$")
	heading    = regexp.MustCompile(`^(#{1,6})\s`)
	objectHost = regexp.MustCompile(`\bobjects\.example\.com\b`)
)

// ParseFile reads and parses the page at path.
func ParseFile(path string) (*Page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(filepath.Base(path), string(b))
	if err != nil {
		return nil, err
	}
	p.Path = path
	return p, nil
}

// Parse cuts a page's text into blocks. It refuses what would make a page
// run differently from how it reads: an unknown directive, a skip without
// a reason, a fence never closed.
func Parse(name, text string) (*Page, error) {
	p := &Page{Name: name, Path: name}
	type need struct {
		level int
		cmd   string
	}
	var (
		needs      []need
		level      int    // of the heading the scan is under
		skipReason string // set by a skip directive, for the next fence
		last       *Block // the latest sh block still waiting for its output
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if m := directive.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "skip":
				reason := strings.TrimSuffix(strings.TrimPrefix(m[2], "("), ")")
				if strings.TrimSpace(reason) == "" {
					return nil, fmt.Errorf("%s:%d: a skip directive must say why: <!-- docs-test: skip (why) -->", name, lineNo)
				}
				skipReason = reason
			case "after":
				p.After = append(p.After, strings.Fields(m[2])...)
			case "needs-command":
				if m[2] == "" {
					return nil, fmt.Errorf("%s:%d: needs-command names a vcon-server command", name, lineNo)
				}
				needs = append(needs, need{level, m[2]})
			default:
				return nil, fmt.Errorf("%s:%d: unknown docs-test directive %q (skip, after, needs-command)", name, lineNo, m[1])
			}
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			level = len(m[1])
			// A heading of the same or a higher level ends the sections
			// that needs-command directives were written in.
			kept := needs[:0]
			for _, n := range needs {
				if n.level < level {
					kept = append(kept, n)
				}
			}
			needs = kept
			continue
		}
		m := fenceOpen.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		indent, info := m[1], m[2]
		start := lineNo
		var body []string
		closed := false
		for sc.Scan() {
			lineNo++
			l := sc.Text()
			if strings.TrimSpace(l) == "```" {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(l, indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the fenced block is never closed", name, start)
		}
		content := strings.Join(body, "\n")
		if len(body) > 0 {
			content += "\n"
		}
		switch info {
		case "sh":
			if skipReason == "" && objectHost.MatchString(content) {
				p.Server = true
			}
			if skipReason == "" && strings.Contains(content, "kms.example.com") {
				p.KMS = true
			}
			b := &Block{Page: name, Line: start, Command: content, Skip: skipReason}
			for _, n := range needs {
				b.Needs = append(b.Needs, n.cmd)
			}
			p.Blocks = append(p.Blocks, b)
			last = b
		case "text":
			if last != nil {
				last.Output, last.HasOutput, last.OutputLine = content, true, start
			}
			last = nil
		default:
			last = nil
		}
		skipReason = ""
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if skipReason != "" {
		return nil, fmt.Errorf("%s: a skip directive is not followed by a fenced block", name)
	}
	return p, nil
}
