package export_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/vcon-server/vcon-server/export"
)

// openDirEnv makes this test binary only run export.OpenDir on the folder
// it names and print the refusal (see above).
const openDirEnv = "VCON_EXPORT_TEST_OPENDIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(openDirEnv); dir != "" {
		if _, err := export.OpenDir(dir); err != nil {
			fmt.Println(err)
		} else {
			fmt.Println("accepted")
		}
		os.Exit(0)
	}
	code := m.Run()
	removeBench()
	os.Exit(code)
}
