module github.com/gglua/gglua

go 1.26.0

require (
	github.com/chzyer/readline v1.5.1
	github.com/creack/pty v1.1.24
	github.com/ollama/ollama v0.24.0
	github.com/stretchr/testify v1.12.1
	github.com/yuin/gopher-lua v1.1.2
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.37.0 // indirect
)
