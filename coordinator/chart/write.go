package chart

import (
	"fmt"
	"os"

	"gonum.org/v1/plot/vg"
)

// writeFile writes the canvas to path through a temporary file, so a
// failed render never leaves half an image.
func writeFile(path string, c vg.CanvasWriterTo) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("chart: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("chart: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}
