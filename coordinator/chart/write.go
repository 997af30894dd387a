package chart

import (
	"fmt"
	"path/filepath"

	"github.com/google/renameio/v2"
	"gonum.org/v1/plot/vg"
)

// writeFile writes the canvas to path through a temporary file in its
// directory (renameio), so a failed render never leaves half an image.
func writeFile(path string, c vg.CanvasWriterTo) error {
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithPermissions(0o666))
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	defer func() { _ = f.Cleanup() }() // after the replace: nothing to do
	if _, err := c.WriteTo(f); err != nil {
		return fmt.Errorf("chart: write %s: %w", path, err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("chart: write %s: %w", path, err)
	}
	return nil
}
