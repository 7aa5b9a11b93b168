// Command cpuprofiled is vcon-server with a CPU profile around it: the
// same cli.Main, with the profile written to $VCON_CPUPROFILE_OUT from
// start to exit (a graceful stop ends serve, so the profile is whole).
// Only tests build it (testenv.StartProfiled); releases never do.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/vcon-server/vcon-server/cli"
)

func main() {
	out := os.Getenv("VCON_CPUPROFILE_OUT")
	if out == "" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	f, err := os.Create(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuprofiled:", err)
		os.Exit(2)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "cpuprofiled:", err)
		os.Exit(2)
	}
	code := cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	pprof.StopCPUProfile()
	f.Close()
	os.Exit(code)
}
