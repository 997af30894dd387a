// Command configdocs writes the config file's reference, docs/config.md,
// from the Go source of coordinator/config (config.Reference); `make
// config-docs` runs it from the module root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/meshperf/meshperf/coordinator/config"
)

func main() {
	dir := flag.String("dir", "coordinator/config", "the directory of the config package's source")
	out := flag.String("out", config.ReferencePath, "the file to write")
	flag.Parse()
	b, err := config.Reference(*dir)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdocs:", err)
		os.Exit(1)
	}
}
