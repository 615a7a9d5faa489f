package runtime_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gglua/gglua/runtime"
)

// scriptFromBytes turns fuzz input into a script: a sequence of tensor
// statements over variables v1..v4, each wrapped in pcall so that one error
// does not end the program. Every byte picks a statement or an argument;
// arguments include edge values (0, -1, huge).
func scriptFromBytes(data []byte) string {
	pos := 0
	next := func() int {
		if pos >= len(data) {
			return 0
		}
		pos++
		return int(data[pos-1])
	}
	v := func() string { return fmt.Sprintf("v%d", next()%4+1) }
	num := func() string {
		return []string{"1", "2", "3", "4", "0", "-1", "1e9", "0.5", "-2", "7"}[next()%10]
	}
	stmts := []func() string{
		func() string { return fmt.Sprintf("%s = tensor.randn(%s, %s)", v(), num(), num()) },
		func() string { return fmt.Sprintf("%s = tensor{{%s, %s}, {%s, %s}}", v(), num(), num(), num(), num()) },
		func() string { return fmt.Sprintf("%s = tensor.ones(%s)", v(), num()) },
		func() string {
			return fmt.Sprintf("%s = to_gpu(%s, %q)", v(), v(), []string{"pass", "persistent", "bogus"}[next()%3])
		},
		func() string {
			return fmt.Sprintf("%s = to_gpu(%s, {dtype = %q})", v(), v(), []string{"f16", "bf16", "f32"}[next()%3])
		},
		func() string { return fmt.Sprintf("%s = tensor.param(%s)", v(), v()) },
		func() string {
			return fmt.Sprintf("%s = %s %s %s", v(), v(), []string{"+", "-", "*", "/", "^"}[next()%5], []string{v(), num()}[next()%2])
		},
		func() string { return fmt.Sprintf("%s = %s:matmul(%s)", v(), v(), v()) },
		func() string { return fmt.Sprintf("%s = %s:sum(%s)", v(), v(), num()) },
		func() string { return fmt.Sprintf("%s = %s:reshape(%s, %s)", v(), v(), num(), num()) },
		func() string { return fmt.Sprintf("%s = %s:t()", v(), v()) },
		func() string {
			return fmt.Sprintf("%s = %s:%s()", v(), v(), []string{"exp", "log", "sqrt", "relu", "tanh", "sigmoid", "gelu", "silu", "abs", "softmax", "log_softmax", "mean", "max", "argmax"}[next()%14])
		},
		func() string { return fmt.Sprintf("%s = %s:narrow(%s, %s, %s)", v(), v(), num(), num(), num()) },
		func() string { return fmt.Sprintf("%s = %s:index_select(1, {%s, %s})", v(), v(), num(), num()) },
		func() string { return fmt.Sprintf("%s = tensor.cat({%s, %s}, %s)", v(), v(), v(), num()) },
		func() string { return fmt.Sprintf("%s = %s:clamp(%s, %s)", v(), v(), num(), num()) },
		func() string { return fmt.Sprintf("%s = %s:layer_norm()", v(), v()) },
		func() string { return fmt.Sprintf("%s = %s:dropout(0.5)", v(), v()) },
		func() string {
			return fmt.Sprintf("residency.reset(%q)", []string{"pass", "persistent", "all"}[next()%3])
		},
		func() string { return fmt.Sprintf("residency.limit(math.min(%s * 65536, 128 * 2^20))", num()) },
		func() string { return fmt.Sprintf("loss = with_grad_tape(function() return %s:sum() end)", v()) },
		func() string { return "backward(loss)" },
		func() string { return fmt.Sprintf("%s = %s.grad", v(), v()) },
		func() string { return fmt.Sprintf("local _ = %s:totable()", v()) },
		func() string { return fmt.Sprintf("local _ = %s:item()", v()) },
		func() string { return fmt.Sprintf("local _ = tostring(%s)", v()) },
		func() string { return fmt.Sprintf("%s:%s(%s)", v(), []string{"add_", "mul_", "copy_"}[next()%3], v()) },
		func() string { return fmt.Sprintf("%s:%s()", v(), []string{"zero_", "fill_"}[next()%2]) },
		func() string {
			return fmt.Sprintf("opt = optim.%s({%s}, {lr = 0.1})", []string{"sgd", "adam"}[next()%2], v())
		},
		func() string { return "opt:zero_grad(); opt:step()" },
		func() string { return "sync()" },
		func() string { return fmt.Sprintf("%s = nn.cross_entropy(%s, {%s, %s})", v(), v(), num(), num()) },
	}
	var b strings.Builder
	b.WriteString("local v1, v2, v3, v4 = tensor{1}, tensor{{1, 2}}, tensor{0.5, -1}, tensor.randn(2, 2)\nlocal loss, opt\n")
	for i := 0; pos < len(data) && i < 64; i++ {
		fmt.Fprintf(&b, "pcall(function() %s end)\n", stmts[next()%len(stmts)]())
	}
	b.WriteString("residency.limit(128 * 2^20)\n")
	return b.String()
}

// FuzzScript runs random tensor programs through the public Lua API in a
// sandboxed runtime. Every outcome must be a value or a Lua error: a ggml
// abort, an escaped Go panic or a hang fails it. Afterwards the ledger must
// be sane and the runtime must still compute.
func FuzzScript(f *testing.F) {
	for _, seed := range []string{
		"\x00\x01\x02\x03\x04\x05", "\x06\x07\x08\x09\x0a\x0b\x0c", "\x12\x00\x13\x01\x14\x15\x16",
		"\x03\x01\x01\x12\x00\x17\x01", "\x05\x02\x14\x15\x1c\x1d\x1d", "\x10\x0a\x11\x19\x1e\x1f",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		code := scriptFromBytes(data)
		// A fresh runtime per program: nothing one program leaves behind
		// (resident tensors, limits) weighs on the next.
		rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, MemLimit: 128 << 20, HostLimit: 128 << 20, Stdout: io.Discard, Stderr: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := rt.DoString(ctx, code)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				t.Fatalf("the script itself failed (every statement is in pcall): %v\n%s", err, code)
			}
		case <-time.After(6 * time.Second):
			t.Fatalf("the script ran 3 s past its cancellation:\n%s", code)
		}
		l := rt.Engine().Residency().Ledger()
		if l.BufferBytes < 0 || l.PBufferBytes < 0 || l.TotalBufferBytes != l.BufferBytes+l.PBufferBytes+l.CachedBytes {
			t.Fatalf("inconsistent ledger %+v after\n%s", l, code)
		}
		vals, err := rt.DoString(context.Background(), `return (tensor{1, 2} * 3):sum():item()`)
		if err != nil || vals[0] != 9.0 {
			t.Fatalf("the runtime no longer computes (%v, %v) after\n%s", vals, err, code)
		}
	})
}
