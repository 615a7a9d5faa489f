package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/luabind"
	"github.com/gglua/gglua/runtime"
)

// A Lua example in the docs is a ```lua fenced block. One that cannot run
// on its own (a fragment, or one that needs a GPU or a launcher) says so on
// the line before its fence, with a reason:
//
//	<!-- not run: a fragment of the loop above -->
//	```lua
//
// Every other block runs in a fresh runtime of its own.

// docBlock is one ```lua block of a markdown file.
type docBlock struct {
	file   string // as globbed, relative to tests/
	line   int    // of the opening fence, 1-based
	code   string
	notRun string // the reason given in a "not run" comment, "" if it runs
}

func (b docBlock) where() string {
	return fmt.Sprintf("%s:%d", strings.TrimPrefix(b.file, "../"), b.line)
}

var (
	// A fence: up to three spaces of indent (more inside a list item),
	// three or more backticks or tildes, then the info string.
	fenceRE  = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([^`\\s]*)")
	notRunRE = regexp.MustCompile(`^\s*<!--\s*not run:\s*(\S.*?)\s*-->\s*$`)
	// The calls that touch files, refused in the sandbox.
	needsFilesRE = regexp.MustCompile(`\b(tensor\.save|tensor\.load|data\.csv|log\.run|log\.scalar|io\.|os\.)`)
)

// luaBlocks returns the ```lua blocks of a markdown text. Blocks in other
// languages are skipped whole, so a fence inside them is not mistaken for
// one; a fenced block in a list item loses the item's indent.
func luaBlocks(file, text string) ([]docBlock, error) {
	var out []docBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, lang := m[1], m[2], m[3]
		start := i
		var body []string
		for i++; i < len(lines); i++ {
			// A closing fence is the opening's character, at least as many.
			if c := strings.TrimSpace(lines[i]); len(c) >= len(fence) && strings.Trim(c, fence[:1]) == "" {
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: a fenced block that never closes", file, start+1)
		}
		if lang != "lua" {
			continue
		}
		b := docBlock{file: file, line: start + 1, code: strings.Join(body, "\n")}
		if start > 0 {
			if nm := notRunRE.FindStringSubmatch(lines[start-1]); nm != nil {
				b.notRun = nm[1]
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// docFiles are the markdown files whose examples run.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// TestDocsExamples runs every Lua example of README.md and docs/*.md
// (docs/API.md's come from luabind/docs.txt) in a fresh runtime: sandboxed,
// or, when it reads or writes files, outside the sandbox in a temporary
// directory that is also its TMPDIR.
func TestDocsExamples(t *testing.T) {
	var blocks []docBlock
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		bs, err := luaBlocks(f, string(text))
		require.NoError(t, err)
		blocks = append(blocks, bs...)
	}
	require.NotEmpty(t, blocks, "no ```lua block found: is the test reading the right files?")
	var skipped []string
	ran := 0
	for _, b := range blocks {
		if b.notRun != "" {
			skipped = append(skipped, fmt.Sprintf("  %s: %s", b.where(), b.notRun))
			continue
		}
		ran++
		t.Run(b.where(), func(t *testing.T) { runDocBlock(t, b) })
	}
	t.Logf("%d Lua examples run; %d marked not run:\n%s", ran, len(skipped), strings.Join(skipped, "\n"))
}

func runDocBlock(t *testing.T, b docBlock) {
	sandbox := !needsFilesRE.MatchString(b.code)
	if !sandbox {
		dir := t.TempDir()
		t.Chdir(dir)
		t.Setenv("TMPDIR", dir)
	}
	var out bytes.Buffer
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: sandbox, Stdout: &out, Stderr: &out})
	require.NoError(t, err)
	defer rt.Close()
	// Blank lines before the code make the chunk's line numbers the
	// markdown file's, so a Lua error points into the file.
	code := strings.Repeat("\n", b.line) + b.code
	_, err = rt.DoString(context.Background(), code)
	hint := ""
	if strings.HasSuffix(b.file, "API.md") {
		hint = " (docs/API.md is generated: fix the example in luabind/docs.txt, then go run ./scripts/gendocs)"
	}
	require.NoError(t, err, "the Lua example at %s fails%s; a line <string>:N is the file's line N.\nIts output:\n%s", b.where(), hint, out.String())
}

// The extraction finds lua blocks only, with their lines, indents and
// "not run" marks, and refuses an unclosed fence.
func TestLuaBlocksExtraction(t *testing.T) {
	md := strings.Join([]string{
		"# T",                          // 1
		"```sh",                        // 2
		"```lua",                       // 3: inside sh, not a block
		"```",                          // 4
		"```lua",                       // 5
		"print(1)",                     // 6
		"```",                          // 7
		"<!-- not run: a fragment -->", // 8
		"```lua",                       // 9
		"x()",                          // 10
		"```",                          // 11
		"1. item",                      // 12
		"   ```lua",                    // 13
		"   for i = 1, 2 do",           // 14
		"     print(i)",                // 15
		"   end",                       // 16
		"   ```",                       // 17
		"````go",                       // 18
		"```lua",                       // 19
		"````",                         // 20
	}, "\n")
	bs, err := luaBlocks("f.md", md)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	assert.Equal(t, docBlock{file: "f.md", line: 5, code: "print(1)"}, bs[0])
	assert.Equal(t, docBlock{file: "f.md", line: 9, code: "x()", notRun: "a fragment"}, bs[1])
	assert.Equal(t, docBlock{file: "f.md", line: 13, code: "for i = 1, 2 do\n  print(i)\nend"}, bs[2])

	_, err = luaBlocks("f.md", "text\n```lua\nprint(1)\n")
	assert.ErrorContains(t, err, "f.md:2")
}

// README's library table has a row for every library, linking to its
// section of docs/API.md, and every link into docs/API.md reaches a section.
func TestREADMELinksEveryLibrary(t *testing.T) {
	api, err := os.ReadFile(filepath.Join("..", "docs", "API.md"))
	require.NoError(t, err)
	anchors := map[string]string{} // section key -> anchor, from API.md's contents list
	for _, m := range regexp.MustCompile(`(?m)^- \[([^\]]+)\]\(#([^)]+)\)$`).FindAllStringSubmatch(string(api), -1) {
		anchors[m[1]] = m[2]
	}
	require.NotEmpty(t, anchors, "docs/API.md has no contents list")
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	valid := map[string]bool{}
	for _, a := range anchors {
		valid[a] = true
	}
	for _, m := range regexp.MustCompile(`docs/API\.md#([\w-]+)`).FindAllStringSubmatch(string(readme), -1) {
		assert.True(t, valid[m[1]], "README.md links to docs/API.md#%s, which is no section", m[1])
	}
	sections, err := luabind.Docs()
	require.NoError(t, err)
	for _, s := range sections {
		if !s.IsLibrary() {
			continue
		}
		row := fmt.Sprintf("\n| [`%s`](docs/API.md#%s) |", s.Key, anchors[s.Key])
		assert.Contains(t, string(readme), row, "README.md's library table has no row for %s", s.Key)
	}
}
