package docrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The stand-ins are small programs put first on the page's PATH in place
// of the host tools a page uses that the runner must not run for real:
// they act on the scratch root only. Each is a bash script, so it works
// from sub-shells, `timeout sh -c`, and after `sudo` as well.

// sudoScript drops sudo's options (-u USER and the like) and runs the
// command as the test's own user.
const sudoScript = `#!/bin/bash
# docs runner stand-in for sudo: runs the command as the current user.
while [ $# -gt 0 ]; do
  case $1 in
    -u|-g|-C|-h|-p|-r|-t|-U) shift 2 ;;
    --user=*|--group=*) shift ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
`

// installScript is the real install(1) without -o/-g: the scratch root
// has no vcon user, and the test may not run as root.
const installScript = `#!/bin/bash
# docs runner stand-in for install: the real one, without owner and group.
args=()
while [ $# -gt 0 ]; do
  case $1 in
    -o|-g|--owner|--group) shift 2 ;;
    --owner=*|--group=*) shift ;;
    *) args+=("$1"); shift ;;
  esac
done
exec /usr/bin/install "${args[@]}"
`

// noopScript stands for commands that change the host's accounts or
// owners (useradd, chown): the scratch root has one user.
const noopScript = `#!/bin/bash
# docs runner stand-in: accounts and owners are the host's; nothing to do.
exit 0
`

// systemctlScript runs the unit's ExecStart in the background with its
// output appended to the journal file, as systemd runs a Type=simple
// service: start returns once the process is started, not once it
// answers, so pages wait for /health as they must on a real host.
const systemctlScript = `#!/bin/bash
# docs runner stand-in for systemctl, for the vcon-server unit only.
ROOT=@ROOT@
unit_file=$ROOT/etc/systemd/system/vcon-server.service
pid_file=$ROOT/run/vcon-server.pid
journal=$ROOT/run/vcon-server.journal
mkdir -p "$ROOT/run"

running() { [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }

start() {
  running && return 0
  local line
  if [ -f "$unit_file" ]; then
    line=$(sed -n 's/^ExecStart=//p' "$unit_file" | tail -n 1)
  else
    line="/usr/local/bin/vcon-server serve --config /etc/vcon-server/vcon-server.toml"
  fi
  # The unit names host paths: move them under the scratch root.
  line=$(printf '%s' "$line" | sed -E "s#(^|[^A-Za-z0-9_./:-])(@PATHS@)\b#\1$ROOT\2#g")
  rm -f "$ROOT/run/vcon-server.stopped"
  # shellcheck disable=SC2086
  $line >>"$journal" 2>&1 </dev/null &
  echo $! >"$pid_file"
}

stop() {
  running || { touch "$ROOT/run/vcon-server.stopped"; return 0; }
  local pid; pid=$(cat "$pid_file")
  touch "$ROOT/run/vcon-server.stopped"
  kill -TERM "$pid"
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid"
}

state() {
  if running; then echo active
  elif [ ! -f "$pid_file" ] || [ -f "$ROOT/run/vcon-server.stopped" ]; then echo inactive
  else echo failed
  fi
}

verb=$1; shift
now=0
quiet=0
units=()
for a in "$@"; do
  case $a in
    --now) now=1 ;;
    -q|--quiet) quiet=1 ;;
    -*) ;;
    *) units+=("${a%.service}") ;;
  esac
done
for u in "${units[@]}"; do
  if [ "$u" != vcon-server ]; then
    echo "systemctl (docs runner): only the vcon-server unit is run here, not $u" >&2
    exit 5
  fi
done
case $verb in
  daemon-reload) ;;
  enable)
    if [ ! -e "$ROOT/run/vcon-server.enabled" ]; then
      touch "$ROOT/run/vcon-server.enabled"
      echo "Created symlink /etc/systemd/system/multi-user.target.wants/vcon-server.service → /etc/systemd/system/vcon-server.service." >&2
    fi
    [ $now = 1 ] && start ;;
  disable) rm -f "$ROOT/run/vcon-server.enabled"; [ $now = 1 ] && stop ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  is-active) s=$(state); [ $quiet = 1 ] || echo "$s"; [ "$s" = active ] ;;
  status)
    s=$(state)
    case $s in
      active) echo "     Active: active (running)" ;;
      failed) echo "     Active: failed" ;;
      *) echo "     Active: inactive (dead)" ;;
    esac
    [ "$s" = active ] || exit 3 ;;
  *) echo "systemctl (docs runner): $verb is not supported" >&2; exit 1 ;;
esac
`

// journalctlScript prints the server's output, which systemd would have
// sent to the journal. Options other than -n are accepted and ignored:
// pages use -o cat, which prints the lines as the server wrote them.
const journalctlScript = `#!/bin/bash
# docs runner stand-in for journalctl -u vcon-server.
ROOT=@ROOT@
journal=$ROOT/run/vcon-server.journal
n=
while [ $# -gt 0 ]; do
  case $1 in
    -n|--lines) n=$2; shift 2 ;;
    --lines=*) n=${1#--lines=}; shift ;;
    -u|--unit|-o|--output|--since|--until|-S|-U) shift 2 ;;
    *) shift ;;
  esac
done
[ -f "$journal" ] || exit 0
if [ -n "$n" ]; then tail -n "$n" "$journal"; else cat "$journal"; fi
`

// gitScript clones the project from the checkout under test when a page
// clones it from its public address: the runner has no network, and the
// page must build what is being tested. Every other use is the real git.
const gitScript = `#!/bin/bash
# docs runner stand-in for git clone of the project.
if [ "$1" = clone ]; then
  args=()
  ours=0
  positional=0
  for a in "${@:2}"; do
    case $a in
      https://github.com/vcon-server/vcon-server|https://github.com/vcon-server/vcon-server.git) args+=("@MODULE@"); ours=1; positional=$((positional+1)) ;;
      -*) args+=("$a") ;;
      *) args+=("$a"); positional=$((positional+1)) ;;
    esac
  done
  # The folder is named after the public address, not the checkout's.
  if [ $ours = 1 ] && [ $positional = 1 ]; then args+=(vcon-server); fi
  # The checkout under test may be a detached HEAD (CI): no advice about it.
  exec @GIT@ -c advice.detachedHead=false clone "${args[@]}"
fi
exec @GIT@ "$@"
`

// writeStandIns writes the stand-ins into dir (first on PATH).
func writeStandIns(dir, root, module, git string) error {
	paths := strings.TrimSuffix(strings.TrimPrefix(hostPaths.String(), `(^|[^A-Za-z0-9_./:-])(`), `)\b`)
	scripts := map[string]string{
		"sudo":       sudoScript,
		"install":    installScript,
		"useradd":    noopScript,
		"groupadd":   noopScript,
		"chown":      noopScript,
		"chgrp":      noopScript,
		"systemctl":  systemctlScript,
		"journalctl": journalctlScript,
		"git":        gitScript,
	}
	r := strings.NewReplacer("@ROOT@", shellQuote(root), "@PATHS@", paths, "@MODULE@", filepath.Clean(module), "@GIT@", shellQuote(git))
	for name, text := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(r.Replace(text)), 0o755); err != nil {
			return fmt.Errorf("write stand-in %s: %w", name, err)
		}
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
