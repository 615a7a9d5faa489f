package main

import (
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gglua/gglua/runlog"
)

// gglua plot RUN [-o out.png|out.svg] draws every scalar of a run folder
// (what log.scalar and progress bars wrote): one panel per tag, x the step
// and y the value, stacked in one image. gonum.org/v1/plot draws it: a
// pure-Go plotting library with PNG and SVG back ends, so the command
// needs no C library, browser or Python.

const plotUsage = "usage: gglua plot RUN [-o out.png|out.svg]   (RUN is a folder such as runs/train-20250131-142501)"

// Panel sizes, in pixels at vgimg's 96 dpi: small enough for a README;
// at most maxPanels panels (3 columns of 16 rows) in one image.
const (
	maxPanels   = 48
	plotWidthPx = 640
	panelPx     = 220
	pxPerPoint  = 96.0 / 72 // vg lengths are points
)

// wantsPlot is whether the command line asks for `gglua plot`: a script
// file named "plot" in the working folder still runs as a script.
func wantsPlot(rest []string) bool {
	if len(rest) == 0 || rest[0] != "plot" {
		return false
	}
	_, err := os.Stat("plot")
	return err != nil
}

// plotMain runs `gglua plot` with the arguments after "plot".
func plotMain(args []string, stdout, stderr io.Writer) int {
	run, out, err := plotArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gglua plot: %v\n%s\n", err, plotUsage)
		return 2
	}
	series, err := runlog.Read(run)
	if err != nil {
		fmt.Fprintf(stderr, "gglua plot: %v\n", err)
		return 1
	}
	if out == "" {
		out = filepath.Join(run, "scalars.png")
	}
	if len(series) > maxPanels { // 2000 tags made a 146,000-pixel image: 1.8 GB, 35 s
		fmt.Fprintf(stderr, "gglua plot: %d tags: drawing the first %d (in the order they were first logged)\n", len(series), maxPanels)
		series = series[:maxPanels]
	}
	if err := writePlot(out, series, stderr); err != nil {
		fmt.Fprintf(stderr, "gglua plot: %v\n", err)
		return 1
	}
	tags := make([]string, len(series))
	for i, s := range series {
		tags[i] = s.Tag
	}
	fmt.Fprintf(stdout, "wrote %s (%s)\n", out, strings.Join(tags, ", "))
	return 0
}

// plotArgs reads `RUN [-o out]`, the flag before or after the run.
func plotArgs(args []string, stderr io.Writer) (run, out string, err error) {
	fs := flag.NewFlagSet("gglua plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&out, "o", "", "the image to write: .png or .svg (default RUN/scalars.png)")
	fs.Usage = func() { fmt.Fprintln(stderr, plotUsage); fs.PrintDefaults() }
	var runs []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", "", err
		}
		if fs.NArg() == 0 {
			break
		}
		runs = append(runs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(runs) == 0:
		return "", "", errors.New("name the run folder to plot")
	case len(runs) > 1:
		return "", "", fmt.Errorf("one run folder at a time, got %d: %s", len(runs), strings.Join(runs, " "))
	}
	if ext := strings.ToLower(filepath.Ext(out)); out != "" && ext != ".png" && ext != ".svg" {
		return "", "", fmt.Errorf("-o %s: the image must be a .png or an .svg file", out)
	}
	return runs[0], out, nil
}

// writePlot draws one panel per series into path (PNG or SVG by its
// extension): one column of panels, or two or three columns when there are
// many, so that the image stays a readable shape. Points whose value is
// NaN or infinite cannot be drawn: they are left out and stderr says how
// many.
func writePlot(path string, series []runlog.Series, stderr io.Writer) error {
	cols := 1
	switch n := len(series); {
	case n > 16:
		cols = 3
	case n > 4:
		cols = 2
	}
	rows := (len(series) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols) // a nil panel is left blank
	}
	for i, s := range series {
		p, skipped := panel(s)
		if skipped > 0 {
			fmt.Fprintf(stderr, "gglua plot: %s: %d of %d values are NaN, infinite or past ±1e300 and are not drawn\n", s.Tag, skipped, len(s.Points))
		}
		plots[i/cols][i%cols] = p
	}
	w := vg.Length(float64(plotWidthPx*cols) / pxPerPoint)
	h := vg.Length(float64(panelPx*rows) / pxPerPoint)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: 4 * vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter}

	var canvas vg.CanvasWriterTo
	if strings.ToLower(filepath.Ext(path)) == ".svg" {
		canvas = vgsvg.New(w, h)
	} else {
		img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseBackgroundColor(color.White))
		canvas = vgimg.PngCanvas{Canvas: img}
	}
	dc := draw.New(canvas)
	for r, row := range plot.Align(plots, tiles, dc) {
		for c, cell := range row {
			if p := plots[r][c]; p != nil {
				p.Draw(cell)
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %v", path, err)
	}
	return f.Close()
}

// panel is one series' plot and the number of points it could not draw.
func panel(s runlog.Series) (*plot.Plot, int) {
	p := plot.New()
	p.Title.Text = s.Tag
	p.X.Label.Text = "step"
	p.Add(plotter.NewGrid())
	xys := make(plotter.XYs, 0, len(s.Points))
	for _, pt := range s.Points {
		if !math.IsNaN(pt.Value) && !math.IsInf(pt.Value, 0) {
			xys = append(xys, plotter.XY{X: float64(pt.Step), Y: pt.Value})
		}
	}
	if len(xys) == 0 {
		p.Title.Text += " (no finite values)"
		return p, len(s.Points)
	}
	if !axisRange(&p.X.Min, &p.X.Max, xys, func(q plotter.XY) float64 { return q.X }) ||
		!axisRange(&p.Y.Min, &p.Y.Max, xys, func(q plotter.XY) float64 { return q.Y }) {
		p.Title.Text += " (values past ±1e300 cannot be drawn)"
		return p, len(s.Points)
	}
	line, err := plotter.NewLine(xys) // fails only on NaN/Inf, left out above
	if err != nil {
		p.Title.Text += " (" + err.Error() + ")"
		return p, len(s.Points) - len(xys)
	}
	line.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255} // matplotlib's first colour, as TensorBoard users know it
	line.Width = vg.Points(1.2)
	p.Add(line)
	if len(xys) < 2 { // a line of one point draws nothing
		if dots, err := plotter.NewScatter(xys); err == nil {
			p.Add(dots)
		}
	}
	return p, len(s.Points) - len(xys)
}

// axisRange sets an axis to the range of v over xys, widened where it is a
// single value: gonum's own padding adds ±1, which a value past 2^53 does
// not notice (an "illegal range" panic, or a tick loop that never ends).
// It reports false for values too large for any range to be drawn.
func axisRange(lo, hi *float64, xys plotter.XYs, v func(plotter.XY) float64) bool {
	a, b := math.Inf(1), math.Inf(-1)
	for _, q := range xys {
		a, b = min(a, v(q)), max(b, v(q))
	}
	if math.Max(math.Abs(a), math.Abs(b)) > 1e300 {
		return false // and the axis keeps its defaults
	}
	if pad := math.Max(math.Abs(a), math.Abs(b)) * 1e-9; b-a <= pad {
		pad = math.Max(pad, 1e-6)
		a, b = a-pad, b+pad
	}
	*lo, *hi = a, b
	return true
}
