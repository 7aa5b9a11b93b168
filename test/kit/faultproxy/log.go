package faultproxy

import (
	"io"
	"log"
)

// quietLog drops the http package's log lines: cut and reset connections
// are what the proxy is for, not news.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
