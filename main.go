// Command vcon-server keeps vCons sealed at rest for many tenants.
package main

import (
	"context"
	"os"

	"github.com/vcon-server/vcon-server/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
