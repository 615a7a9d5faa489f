package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runlog"
)

// makeRun writes a run folder with a falling loss, an accuracy logged
// every tenth step and one NaN loss.
func makeRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runs", "demo")
	r, err := runlog.Open(dir)
	require.NoError(t, err)
	for step := int64(1); step <= 50; step++ {
		v := math.Exp(-float64(step) / 10)
		if step == 25 {
			v = math.NaN()
		}
		require.NoError(t, r.Scalar("loss", step, v))
		if step%10 == 0 {
			require.NoError(t, r.Scalar("acc", step, 1-v))
		}
	}
	require.NoError(t, r.Close())
	return dir
}

// gglua runs the command line args and returns its exit status, stdout and stderr.
func gglua(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "%s is not a valid PNG", path)
	return img
}

// svgTexts parses an SVG as XML and returns the text of its <text> elements.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	inText, root := false, ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s is not valid XML", path)
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			inText = el.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(el)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	assert.Equal(t, "svg", root)
	return texts
}

func TestPlotWritesPNGAndSVG(t *testing.T) {
	dir := makeRun(t)
	out := t.TempDir()

	pngPath := filepath.Join(out, "curves.png")
	code, stdout, stderr := gglua("plot", dir, "-o", pngPath)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "wrote "+pngPath+" (loss, acc)\n", stdout)
	assert.Contains(t, stderr, "loss: 1 of 50 values are NaN, infinite or past ±1e300 and are not drawn")
	img := decodePNG(t, pngPath)
	assert.Equal(t, image.Rect(0, 0, plotWidthPx, 2*panelPx), img.Bounds(), "one panel per tag")
	assert.Greater(t, distinctColors(img), 3, "something is drawn")

	svgPath := filepath.Join(out, "curves.svg")
	code, _, stderr = gglua("plot", "-o", svgPath, dir) // the flag before the run works too
	require.Equal(t, 0, code, stderr)
	texts := svgTexts(t, svgPath)
	assert.Contains(t, texts, "loss")
	assert.Contains(t, texts, "acc")
	assert.Contains(t, texts, "step")

	// Without -o, the image goes into the run folder.
	code, stdout, stderr = gglua("plot", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, filepath.Join(dir, "scalars.png"))
	decodePNG(t, filepath.Join(dir, "scalars.png"))
}

// distinctColors counts the colours of img (up to 100).
func distinctColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y && len(seen) < 100; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}

func TestPlotErrorsAreClear(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "runs", "empty")
	require.NoError(t, os.MkdirAll(empty, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(empty, runlog.MetricsFile), nil, 0o644))
	good := makeRun(t)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plot"}, 2, "gglua plot: name the run folder to plot\nusage: gglua plot RUN"},
		{[]string{"plot", filepath.Join(root, "nope")}, 1, "gglua plot: no run folder " + filepath.Join(root, "nope")},
		{[]string{"plot", empty}, 1, "metrics.jsonl holds no scalars yet"},
		{[]string{"plot", filepath.Join(root, "runs")}, 1, "is a folder of runs; name one of them: " + empty},
		{[]string{"plot", root}, 1, "has no metrics.jsonl: not a gglua run folder"},
		{[]string{"plot", good, "-o", filepath.Join(root, "x.jpg")}, 2, "the image must be a .png or an .svg file"},
		{[]string{"plot", good, good}, 2, "one run folder at a time, got 2"},
		{[]string{"plot", good, "-o", filepath.Join(root, "no", "such", "x.png")}, 1, "no such file or directory"},
	}
	for _, c := range cases {
		code, stdout, stderr := gglua(c.args...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.want, "%v", c.args)
		assert.Empty(t, stdout, "%v", c.args)
	}
}

// A script file named plot still runs as a script.
func TestAScriptNamedPlotStillRuns(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("plot", []byte(`print("script ran")`), 0o644))
	code, stdout, stderr := gglua("plot")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "script ran\n", stdout)
}

// readmeCurvesCommands returns the command lines of the first sh block of
// README.md's "## Curves" section, each split into gglua's arguments
// (the leading bin/gglua dropped, a trailing # comment removed).
func readmeCurvesCommands(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Curves\n")
	require.True(t, ok, "README.md has no ## Curves section")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok, "the Curves section has no sh block")
	block, _, _ = strings.Cut(block, "```")
	var cmds [][]string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		words := shellWords(t, line)
		require.NotEmpty(t, words)
		require.Equal(t, "bin/gglua", words[0], "every command in the block is gglua's: %s", line)
		cmds = append(cmds, words[1:])
	}
	return cmds
}

// shellWords splits a command line as sh would, for the little the README
// uses: blanks, single quotes, and a # comment after a blank.
func shellWords(t *testing.T, line string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			w.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			require.NotContains(t, `"\$`+"`", string(r), "shellWords does not handle %q (column %d of %s)", r, i+1, line)
			w.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unclosed quote in %s", line)
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// The README's Curves example runs as written (in a scratch folder that
// sees the repository's scripts/), and what it draws is the image the
// README shows. GGLUA_UPDATE_DOCS=1 writes the new image into docs/img
// instead, after a change that moves the curve on purpose.
func TestREADMECurvesExample(t *testing.T) {
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmds := readmeCurvesCommands(t)
	require.Len(t, cmds, 2)
	image := cmds[1][len(cmds[1])-1]
	require.Equal(t, "docs/img/loss.png", image, "the plot command writes the README's image")

	scratch := t.TempDir()
	t.Chdir(scratch)
	t.Setenv("TMPDIR", scratch) // train.lua's checkpoint
	require.NoError(t, os.Symlink(filepath.Join(repo, "scripts"), "scripts"))
	require.NoError(t, os.MkdirAll("docs/img", 0o755))
	for _, args := range cmds {
		code, _, stderr := gglua(args...)
		require.Equal(t, 0, code, "gglua %s: %s", strings.Join(args, " "), stderr)
	}
	series, err := runlog.Read("runs/spirals")
	require.NoError(t, err)
	require.Len(t, series, 1)
	assert.Equal(t, "loss", series[0].Tag)
	assert.Equal(t, 300, len(series[0].Points), "one point per step")

	committed := filepath.Join(repo, image)
	if os.Getenv("GGLUA_UPDATE_DOCS") != "" {
		b, err := os.ReadFile(image)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(committed, b, 0o644))
		t.Logf("wrote %s", committed)
		return
	}
	got, want := decodePNG(t, image), decodePNG(t, committed)
	require.Equal(t, want.Bounds(), got.Bounds())
	// Kernels of other CPUs may round the losses a little differently: a
	// few pixels may move, a different curve may not.
	assert.Less(t, differingPixels(got, want), got.Bounds().Dx()*got.Bounds().Dy()/200,
		"README.md's %s is not what its commands draw; if the change is meant, rerun with GGLUA_UPDATE_DOCS=1", image)
}

// differingPixels counts the pixels whose colours differ visibly.
func differingPixels(a, b image.Image) int {
	n := 0
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if absDiff(r1, r2)+absDiff(g1, g2)+absDiff(b1, b2) > 3*0x1000 {
				n++
			}
		}
	}
	return n
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// Many tags are laid out in columns; a tag of one point, or of no finite
// value, still gets its panel.
func TestPlotLaysOutManyTags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "many")
	r, err := runlog.Open(dir)
	require.NoError(t, err)
	for i := range 5 {
		for step := int64(1); step <= 3; step++ {
			require.NoError(t, r.Scalar("m"+string(rune('a'+i)), step, float64(step*int64(i))))
		}
	}
	require.NoError(t, r.Scalar("single", 4, 1))
	require.NoError(t, r.Scalar("broken", 1, math.Inf(1)))
	require.NoError(t, r.Close())
	out := filepath.Join(t.TempDir(), "many.png")
	code, stdout, stderr := gglua("plot", dir, "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "(ma, mb, mc, md, me, single, broken)")
	assert.Contains(t, stderr, "broken: 1 of 1 values are NaN, infinite or past ±1e300")
	assert.Equal(t, image.Rect(0, 0, 2*plotWidthPx, 4*panelPx), decodePNG(t, out).Bounds(), "7 tags: 2 columns of 4 rows")

	svg := filepath.Join(t.TempDir(), "many.svg")
	code, _, stderr = gglua("plot", dir, "-o", svg)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, svgTexts(t, svg), "broken (no finite values)")
}

// A run of 2000 one-point tags (a 60 KB file) drew a 146,000-pixel
// image (1.8 GB, 35 s): the first maxPanels tags are drawn, and stderr
// says so.
func TestPlotBoundsItsPanels(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tags")
	r, err := runlog.Open(dir)
	require.NoError(t, err)
	for i := range 2000 {
		require.NoError(t, r.Scalar(fmt.Sprintf("t%04d", i), 1, float64(i)))
	}
	require.NoError(t, r.Close())
	out := filepath.Join(t.TempDir(), "tags.png")
	code, stdout, stderr := gglua("plot", dir, "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2000 tags: drawing the first 48")
	assert.Contains(t, stdout, "t0047)")
	assert.NotContains(t, stdout, "t0048")
	assert.Equal(t, image.Rect(0, 0, 3*plotWidthPx, 16*panelPx), decodePNG(t, out).Bounds())
}

// TestPlotExtremeValues: a constant series past 2^53, values near float64's
// limits and steps past 2^53 are drawn or named, never a panic or a hang
// (gonum pads a one-value range by ±1, which such values do not notice).
func TestPlotExtremeValues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "extreme")
	r, err := runlog.Open(dir)
	require.NoError(t, err)
	for _, p := range []struct {
		tag  string
		step int64
		v    float64
	}{
		{"flat", 1, 1e16}, {"flat", 2, 1e16}, {"huge", 1, 1e308}, {"huge", 2, -1e308},
		{"one", 1, 3.4e38}, {"late", 1 << 53, 5}, {"tiny", 1, 1e-300}, {"tiny", 2, 1e-300},
	} {
		require.NoError(t, r.Scalar(p.tag, p.step, p.v))
	}
	require.NoError(t, r.Close())
	done := make(chan struct{})
	var code int
	var stderr string
	go func() {
		code, _, stderr = gglua("plot", dir, "-o", filepath.Join(t.TempDir(), "x.svg"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("gglua plot did not end within 60 s")
	}
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "panic")
}
