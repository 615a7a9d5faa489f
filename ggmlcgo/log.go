package ggmlcgo

// #include "gglua_ggml.h"
// extern void ggluaLogSink(enum ggml_log_level level, char * text, void * user_data);
// static void gglua_install_log(void) { ggml_log_set((ggml_log_callback)ggluaLogSink, NULL); }
import "C"

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// ggml writes its log in pieces (GGML_LOG_LEVEL_CONT continues a line), from
// any thread. The sink joins the pieces into lines and hands each complete
// line to the Go logger set with SetLogger: by default slog's, where ggml's
// debug chatter stays below the default level.

var logState struct {
	sync.Mutex
	logger  *slog.Logger
	pending strings.Builder
	level   slog.Level
}

func init() {
	logState.logger = slog.Default()
	C.gglua_install_log()
}

// SetLogger routes ggml's log to l (nil: slog.Default()).
func SetLogger(l *slog.Logger) {
	logState.Lock()
	defer logState.Unlock()
	if l == nil {
		l = slog.Default()
	}
	logState.logger = l
}

func slogLevel(level C.enum_ggml_log_level) slog.Level {
	switch level {
	case C.GGML_LOG_LEVEL_DEBUG:
		return slog.LevelDebug
	case C.GGML_LOG_LEVEL_WARN:
		return slog.LevelWarn
	case C.GGML_LOG_LEVEL_ERROR:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

//export ggluaLogSink
func ggluaLogSink(level C.enum_ggml_log_level, text *C.char, _ *C.void) {
	s := C.GoString(text)
	logState.Lock()
	defer logState.Unlock()
	if level != C.GGML_LOG_LEVEL_CONT {
		logState.level = slogLevel(level)
	}
	logState.pending.WriteString(s)
	buf := logState.pending.String()
	for {
		i := strings.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(buf[:i]); line != "" {
			logState.logger.Log(context.Background(), logState.level, "ggml: "+line)
		}
		buf = buf[i+1:]
	}
	logState.pending.Reset()
	logState.pending.WriteString(buf)
}
