//go:build !system_ggml

package ggmlcgo

// ggml's base library and CPU backend are compiled from the pinned ollama
// module when its cgo package is imported. This file is the only place that
// names it: a build that links a system libggml swaps this file for one with
// `#cgo LDFLAGS: -lggml-base -lggml-cpu` behind the system_ggml tag.

// #cgo linux LDFLAGS: -lrt -lpthread -ldl -lstdc++ -lm
import "C"

import _ "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
