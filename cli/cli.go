// Package cli is the vcon-server command line: it parses the arguments,
// loads the configuration and runs one command. Output that scripts read is
// JSON, one object a line; a refusal is one line "vcon-server: <why>" on
// standard error and exit status 1.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/vcon-server/vcon-server/internal/config"
)

// Version is stamped at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// DefaultConfig is where the configuration is read from without --config.
const DefaultConfig = "/etc/vcon-server/vcon-server.toml"

// env is what a command runs with.
type env struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	config string
	opened *config.Config // the configuration the command loaded, if any
}

type command struct {
	name    string // "tenant create"
	args    string // positional arguments, for usage
	summary string
	flags   func(fs *flag.FlagSet)
	run     func(e *env, fs *flag.FlagSet, args []string) error
}

var commands []*command

func register(c *command) { commands = append(commands, c) }

// usageError is a refusal of the command line itself.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Main runs the command line args (without the program name) and returns
// the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, config: DefaultConfig}
	if err := run(e, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "vcon-server: %s\n", err)
		return 1
	}
	return 0
}

func run(e *env, args []string) error {
	// --config may stand anywhere; take it out first.
	rest, err := takeConfig(e, args)
	if err != nil {
		return err
	}
	var words []string
	for _, a := range rest {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	if len(words) == 0 {
		if len(rest) > 0 && (rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help") {
			printUsage(e.stdout)
			return flag.ErrHelp
		}
		printUsage(e.stderr)
		return usageError{"name a command; vcon-server --help lists them"}
	}
	// The longest registered name that the leading words spell.
	var cmd *command
	n := 0
	for _, c := range commands {
		parts := strings.Fields(c.name)
		if len(parts) <= len(words) && strings.Join(words[:len(parts)], " ") == c.name && len(parts) > n {
			cmd, n = c, len(parts)
		}
	}
	if cmd == nil {
		if words[0] == "help" {
			printUsage(e.stdout)
			return flag.ErrHelp
		}
		return usageError{fmt.Sprintf("unknown command %q; vcon-server --help lists the commands", strings.Join(words, " "))}
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	pos, err := parseInterleaved(fs, rest[n:])
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(e.stdout, cmd, fs)
		return flag.ErrHelp
	}
	if err != nil {
		return usageError{fmt.Sprintf("%s: %v; vcon-server %s --help shows its usage", cmd.name, err, cmd.name)}
	}
	want := len(strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(cmd.args)))
	required := len(strings.Fields(cmd.args)) - strings.Count(cmd.args, "[")
	if len(pos) < required || len(pos) > want {
		return usageError{fmt.Sprintf("usage: vcon-server %s %s", cmd.name, cmd.args)}
	}
	if err := cmd.run(e, fs, pos); err != nil {
		return err
	}
	// A rotation's replica is written under the new key: by the command
	// with the server stopped, by the server that takes the key otherwise.
	if cmd.name == "serve" || cmd.name == "restore" || cmd.name == "master-key rotate" {
		return nil
	}
	return e.syncReplica()
}

func takeConfig(e *env, args []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config" || a == "-config":
			if i+1 >= len(args) {
				return nil, usageError{"--config needs a file name"}
			}
			e.config = args[i+1]
			i++
		case strings.HasPrefix(a, "--config="):
			e.config = strings.TrimPrefix(a, "--config=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, nil
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, as the docs write them.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, nil
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: vcon-server [--config FILE] COMMAND ...")
	fmt.Fprintln(w, "\nKeeps vCons sealed at rest for many tenants. Commands:")
	sorted := append([]*command(nil), commands...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, c := range sorted {
		fmt.Fprintf(w, "  %-24s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\n--config defaults to %s. vcon-server COMMAND --help shows a command's flags.\n", DefaultConfig)
}

func commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: vcon-server %s %s\n\n%s\n", c.name, c.args, c.summary)
	fs.SetOutput(w)
	fmt.Fprintln(w, "\nflags:")
	fs.PrintDefaults()
	fmt.Fprintln(w, "  -config FILE\n    \tthe configuration file (default "+DefaultConfig+")")
}

// emit prints v as one JSON line.
func (e *env) emit(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }
