// Command gendocs writes docs/API.md from luabind/docs.txt, the one source
// of the Lua API's documentation (help() prints the same text): a table of
// each section's names, then its example as a ```lua block, which
// tests/docs_examples_test.go runs.
//
//	go run ./scripts/gendocs          (from the repository root)
//	go generate ./luabind
//
// luabind's TestAPIMarkdownIsUpToDate fails when docs/API.md is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gglua/gglua/luabind"
)

func main() {
	md, err := luabind.APIMarkdown()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	out := "docs/API.md"
	if _, err := os.Stat("docs"); err != nil { // go generate runs in luabind/
		out = filepath.Join("..", "docs", "API.md")
	}
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
