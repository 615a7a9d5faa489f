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

// fuzzPrelude declares the program's variables (each statement kind finds
// one of the kind it uses: a module, an optimizer, a scheduler, a loader, a
// coroutine, a loss) and three helpers: same(a, b) (equal shapes and values,
// NaN equal to NaN); check(ok, what), which records a broken invariant in
// FUZZ_BROKEN, where the harness looks after the run (inside pcall an
// assert would be swallowed); and stmt(f), which runs one statement in
// pcall and records an error that is a Go panic in disguise (the bindings'
// guard turns one into "internal error in gglua", pcall's into Go's
// "runtime error: ..." text), which pcall would swallow too.
const fuzzPrelude = `local v1, v2, v3, v4 = tensor{1}, tensor{{1, 2}}, tensor{0.5, -1}, tensor.randn(2, 2)
local m = nn.Sequential{nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 2)}
local opt = optim.sgd(m:parameters(), {lr = 0.1})
local sched = optim.lr_scheduler.step(opt, {step_size = 2})
local ld = data.loader(tensor.randn(5, 2), tensor.randn(5, 2), {batch = 2})
local co = coroutine.wrap(function(a) while true do a = coroutine.yield(a) end end)
local loss = with_grad_tape(function() return m(v4):sum() end)
local function same(a, b)
  local function walk(x, y)
    if type(x) ~= type(y) then return false end
    if type(x) ~= "table" then return x == y or (x ~= x and y ~= y) end
    if #x ~= #y then return false end
    for i = 1, #x do if not walk(x[i], y[i]) then return false end end
    return true
  end
  return walk(a:shape(), b:shape()) and walk(a:totable(), b:totable())
end
local function check(ok, what) if not ok then FUZZ_BROKEN = FUZZ_BROKEN or what end end
local function stmt(f)
  local ok, err = pcall(f)
  local msg = tostring(err)
  if not ok and (msg:find("internal error in gglua", 1, true) or msg:find("runtime error", 1, true)
      or msg:find("interface conversion", 1, true) or msg:find("goroutine ", 1, true)) then
    FUZZ_BROKEN = FUZZ_BROKEN or ("a Go panic: " .. msg)
  end
end
`

// scriptFromBytes turns fuzz input into a script: a sequence of at most 64
// statements over variables v1..v4 (and a module, an optimizer, a
// scheduler, a loader, a coroutine), each run by stmt (in pcall) so that one
// error does not end the program. Every byte picks a statement or an
// argument; arguments include edge values (0, -1, huge, NaN, inf). Every
// statement is bounded: loops run a few times, pcall nests at most 250 deep.
//
// files reports whether the program saves or loads checkpoints: the
// sandbox refuses tensor.save/load, so such a program runs unsandboxed
// (under the same memory and host limits), with CK_DIR a fresh temporary
// folder (see FuzzScript). No statement touches io, os or the file system
// otherwise, so only the checkpoint statements use what the sandbox takes
// away; every other program keeps the sandbox.
func scriptFromBytes(data []byte) (code string, files bool) {
	pos := 0
	next := func() int {
		if pos >= len(data) {
			return 0
		}
		pos++
		return int(data[pos-1])
	}
	pick := func(choices ...string) string { return choices[next()%len(choices)] }
	v := func() string { return fmt.Sprintf("v%d", next()%4+1) }
	num := func() string {
		return pick("1", "2", "3", "4", "0", "-1", "1e9", "0.5", "-2", "7", "0/0", "1/0", "2^63", "-3")
	}
	dim := func() string { return pick("1", "2", "3", "-1", "0", "-2") }
	bool_ := func() string { return pick("true", "false") }
	vOrNum := func() string {
		if next()%2 == 0 {
			return v()
		}
		return num()
	}
	// an in-place op with its argument
	inPlace := func() string {
		switch next() % 7 {
		case 0:
			return "fill_(" + num() + ")"
		case 1:
			return "zero_()"
		case 2:
			return "copy_(" + v() + ")"
		case 3:
			return "add_(" + vOrNum() + ")"
		case 4:
			return "mul_(" + vOrNum() + ")"
		case 5:
			return "sub_(" + vOrNum() + ")"
		}
		return "div_(" + vOrNum() + ")"
	}
	// a view of a variable
	view := func() string {
		x := v()
		switch next() % 8 {
		case 0:
			return fmt.Sprintf("%s:narrow(%s, %s, %s)", x, dim(), num(), num())
		case 1:
			return fmt.Sprintf("%s:view(%s)", x, pick("-1", "4", "2, 2", "1, -1", "-1, 1", "0"))
		case 2:
			return fmt.Sprintf("%s:t()", x)
		case 3:
			return fmt.Sprintf("%s:transpose(%s, %s)", x, dim(), dim())
		case 4:
			return fmt.Sprintf("%s:permute(%s)", x, pick("2, 1", "1, 2", "1", "3, 1, 2", "1, 1", "2, 1, 3"))
		case 5:
			return fmt.Sprintf("%s:detach()", x)
		case 6:
			return fmt.Sprintf("%s:reshape(%s)", x, pick("-1", "2, -1", "1, 1, -1"))
		}
		return fmt.Sprintf("%s:narrow(1, 1, 1):t()", x)
	}
	logits := func() string {
		return pick("v1", "v2", "v3", "v4", "tensor.randn(2, 3)", "tensor.param(tensor.randn(2, 3))", "tensor{{0, -1/0, 1}, {1/0, 0, 0}}")
	}
	label := func() string { return pick("1", "2", "3", num()) }
	stmts := []func() string{
		// creation and residency
		func() string { return fmt.Sprintf("%s = tensor.randn(%s, %s)", v(), num(), num()) },
		func() string { return fmt.Sprintf("%s = tensor{{%s, %s}, {%s, %s}}", v(), num(), num(), num(), num()) },
		func() string { return fmt.Sprintf("%s = tensor.ones(%s)", v(), num()) },
		func() string { return fmt.Sprintf("%s = tensor.randn(2, 3, 2)", v()) },
		func() string {
			return fmt.Sprintf("%s = to_gpu(%s, %q)", v(), v(), pick("pass", "persistent", "bogus"))
		},
		func() string {
			return fmt.Sprintf("%s = to_gpu(%s, {dtype = %q, scope = %q})", v(), v(), pick("f16", "bf16", "f32"), pick("pass", "persistent"))
		},
		func() string { return fmt.Sprintf("%s = to_cpu(%s)", v(), v()) },
		func() string { return fmt.Sprintf("%s = tensor.param(%s)", v(), v()) },
		// arithmetic, including pow with negative bases and tensor exponents
		func() string {
			return fmt.Sprintf("%s = %s %s %s", v(), v(), pick("+", "-", "*", "/", "^"), vOrNum())
		},
		func() string { return fmt.Sprintf("%s = %s ^ %s", v(), num(), v()) },
		func() string { return fmt.Sprintf("%s = (%s - %s):pow(%s)", v(), v(), num(), vOrNum()) },
		func() string {
			return fmt.Sprintf("%s = tensor{-2, -0.5, 0, 3}:pow(%s)", v(), pick("2", "0.5", "-1", "0", "tensor{2, 0.5, 0, -1}", "v1", "v3"))
		},
		func() string { return fmt.Sprintf("%s = %s:matmul(%s)", v(), v(), v()) },
		func() string { return fmt.Sprintf("%s = %s:sum(%s)", v(), v(), num()) },
		func() string {
			return fmt.Sprintf("%s = %s:%s()", v(), v(), pick("exp", "log", "sqrt", "relu", "tanh", "sigmoid", "gelu", "silu", "abs", "softmax", "log_softmax", "mean", "max", "min", "argmax", "neg"))
		},
		func() string {
			return fmt.Sprintf("%s = %s:gelu(%s)", v(), v(), pick(`"tanh"`, `"none"`, `"bogus"`, `{approximate = "tanh"}`, `{approximate = 1}`, "7"))
		},
		// max/min/argmax along a dim
		func() string {
			a, b := v(), v()
			return fmt.Sprintf("%s, %s = %s:%s(%s, %s)", a, b, v(), pick("max", "min"), dim(), bool_())
		},
		func() string { return fmt.Sprintf("%s = %s:argmax(%s)", v(), v(), dim()) },
		func() string {
			return fmt.Sprintf("%s = %s:index_select(1, {%s, %s})", v(), pick(v(), "tensor.randn(3, 2)"), pick("1", "2", "3", num()), num())
		},
		func() string { return fmt.Sprintf("%s = tensor.cat({%s, %s}, %s)", v(), v(), v(), num()) },
		func() string { return fmt.Sprintf("%s = %s:clamp(%s, %s)", v(), v(), num(), num()) },
		func() string { return fmt.Sprintf("%s = %s:layer_norm()", v(), v()) },
		func() string { return fmt.Sprintf("%s = %s:dropout(0.5)", v(), v()) },
		// views, and copies that must equal their source
		func() string { return fmt.Sprintf("%s = %s", v(), view()) },
		func() string { return fmt.Sprintf("%s = %s:reshape(%s, %s)", v(), v(), num(), num()) },
		func() string {
			x := v()
			return fmt.Sprintf("local c = %s:%s() check(same(c, %s), %q)", x, pick("clone", "contiguous", "detach"), x, "a copy differs from its source")
		},
		func() string {
			x := v()
			return fmt.Sprintf("local c = %s:t():t() check(same(c, %s), %q)", x, x, "t():t() differs from its source")
		},
		// in-place ops, directly and through views
		func() string { return fmt.Sprintf("%s:%s", v(), inPlace()) },
		func() string { return fmt.Sprintf("%s:%s", view(), inPlace()) },
		func() string { return fmt.Sprintf("no_grad(function() %s:%s end)", view(), inPlace()) },
		func() string {
			x := v()
			return fmt.Sprintf("local c = %s:contiguous() %s:view(-1):copy_(c:view(-1)) check(same(c, %s), %q)", x, x, x, "copy_ of its own values changed a tensor")
		},
		// residency
		func() string { return fmt.Sprintf("residency.reset(%q)", pick("pass", "persistent", "all")) },
		func() string { return fmt.Sprintf("residency.limit(math.min(%s * 65536, 128 * 2^20))", num()) },
		// autograd, and the version counter
		func() string { return fmt.Sprintf("loss = with_grad_tape(function() return %s:sum() end)", v()) },
		func() string {
			return fmt.Sprintf("loss = with_grad_tape(function() return (%s * %s):sum() end)", view(), v())
		},
		func() string {
			return fmt.Sprintf("loss = with_grad_tape(function() %s:%s return %s:sum() end)", view(), inPlace(), v())
		},
		func() string {
			a := v()
			return fmt.Sprintf("loss = with_grad_tape(function() return (%s * %s):sum() end) %s:%s backward(loss)", a, a, view(), inPlace())
		},
		func() string {
			// the version counter: a change after the tape is caught at backward
			a := v()
			return fmt.Sprintf("%s = tensor.param(%s) loss = with_grad_tape(function() return (%s * %s):%s() end) %s%s:%s local ok = pcall(backward, loss) check(not ok, %q)",
				a, pick(a, "tensor.randn(2, 2)"), a, a, pick("sum", "mean"), a, pick("", ":narrow(1, 1, 1)", ":view(-1)", ":detach()", ":t()"), pick("add_(1)", "fill_(2)", "zero_()", "mul_(3)", "copy_("+a+":clone())"),
				"backward after an in-place change succeeded")
		},
		func() string { return "backward(loss)" },
		func() string { return fmt.Sprintf("%s = %s.grad", v(), v()) },
		func() string { return fmt.Sprintf("local _ = %s:totable()", v()) },
		func() string { return fmt.Sprintf("local _ = %s:item()", v()) },
		func() string { return fmt.Sprintf("local _ = tostring(%s)", v()) },
		// optimizers, dtype moves of their parameters, schedulers
		func() string {
			return fmt.Sprintf("opt = optim.%s({%s}, {lr = 0.1})", pick("sgd", "adam", "adamw"), v())
		},
		func() string { return "opt:zero_grad(); opt:step()" },
		func() string { return "opt:step()" },
		func() string {
			p := v()
			return fmt.Sprintf("%s = tensor.param(tensor.randn(2, 2)) opt = optim.%s({%s}, {lr = 0.1}) backward(with_grad_tape(function() return (%s * %s):sum() end)) %s = to_gpu(%s, {dtype = %q, scope = %q}) opt:step() local _ = %s:sum():item()",
				p, pick("sgd", "adam", "adamw"), p, p, p, v(), p, pick("f16", "bf16", "f32"), pick("persistent", "pass"), p)
		},
		func() string {
			switch next() % 4 {
			case 0:
				return fmt.Sprintf("sched = optim.lr_scheduler.step(opt, {step_size = %s, gamma = %s})", num(), num())
			case 1:
				return fmt.Sprintf("sched = optim.lr_scheduler.cosine(opt, {t_max = %s, eta_min = %s})", num(), num())
			case 2:
				return fmt.Sprintf("sched = optim.lr_scheduler.one_cycle(opt, {max_lr = %s, total = %s})", num(), num())
			}
			return fmt.Sprintf("sched = optim.lr_scheduler.warmup_cosine(opt, {warmup = %s, total = %s})", num(), num())
		},
		func() string {
			return fmt.Sprintf("for i = 1, %s do sched:step() end local _ = sched:get_lr()", pick("1", "3", "10"))
		},
		func() string {
			return "sched:load_state_dict(sched:state_dict()); opt:load_state_dict(opt:state_dict())"
		},
		func() string { return "sync()" },
		// losses
		func() string {
			return fmt.Sprintf("%s = nn.cross_entropy(%s, {%s, %s})", v(), logits(), label(), label())
		},
		func() string {
			return fmt.Sprintf("loss = with_grad_tape(function() return nn.cross_entropy(%s, {%s, %s}, {label_smoothing = %s}) end) backward(loss)", logits(), label(), label(), pick("0", "0.2", "1"))
		},
		func() string {
			return fmt.Sprintf("%s = nn.cross_entropy(%s, {%s, %s}, {reduction = %q, label_smoothing = %s, ignore_index = %s})",
				v(), logits(), label(), label(), pick("mean", "sum", "none", "bogus"), pick("0", "0.1", "1", "-1", "0/0"), label())
		},
		func() string {
			return fmt.Sprintf("%s = nn.cross_entropy(%s, {1, 2}, {weight = %s})", v(), logits(), pick(v(), "tensor{1, 0, 2}", "tensor{-1, 1, 1}", "tensor{0, 0, 0}"))
		},
		func() string {
			return fmt.Sprintf("%s = nn.cross_entropy(%s, %s:softmax(-1))", v(), logits(), logits())
		},
		// coroutines: a coroutine resumed across statements (and inside a
		// tape), and yields across with_grad_tape, no_grad and pcall,
		// which must be errors (resume fails; under pcall, pcall returns
		// false)
		func() string {
			return fmt.Sprintf("co = coroutine.wrap(function(a) for i = 1, %s do a = coroutine.yield(a %s %s) end return a end)", pick("1", "2", "5"), pick("+", "*", "-"), vOrNum())
		},
		func() string { return fmt.Sprintf("%s = co(%s)", v(), v()) },
		func() string { return fmt.Sprintf("loss = with_grad_tape(function() return co(%s):sum() end)", v()) },
		func() string {
			return fmt.Sprintf("local c = coroutine.create(function() return %s(function() coroutine.yield(%s) return %s:sum() end) end) local ok, r = coroutine.resume(c) check(not ok or r == false, %q) coroutine.resume(c)",
				pick("with_grad_tape", "no_grad", "pcall"), v(), v(), "a yield across a C-call boundary was allowed")
		},
		func() string {
			return fmt.Sprintf("local c = coroutine.create(function(x) while true do x = coroutine.yield(x:sum()) end end) for i = 1, 3 do coroutine.resume(c, %s) end", v())
		},
		// pcall/xpcall nesting (past the 200 limit), error objects
		func() string {
			return fmt.Sprintf("local function f(n) if n == 0 then return %s:sum() end return select(2, pcall(f, n - 1)) end %s = f(%s)", v(), v(), pick("1", "5", "199", "250"))
		},
		func() string {
			return fmt.Sprintf("xpcall(function() error(%s) end, function(e) return select(2, pcall(error, e)) end)", v())
		},
		func() string { return fmt.Sprintf("pcall(pcall, pcall, error, %s)", v()) },
		func() string {
			return fmt.Sprintf("xpcall(function() return with_grad_tape(function() error(%s) end) end, function(e) return %s:sum() end)", vOrNum(), v())
		},
		// data loaders (never a generic for whose body starts with break:
		// gopher-lua v1.1.2 can hang on that pattern, a known upstream bug)
		func() string {
			return fmt.Sprintf("ld = data.loader(%s, %s, {batch = %s, shuffle = %s, drop_last = %s})",
				pick("v1", "v2", "v3", "v4", "tensor.randn(7, 2)", "{1, 2, 3}"), pick("nil", "v1", "v4", "tensor.randn(7)", "{1, 2, 3, 4, 5, 6, 7}"), num(), bool_(), bool_())
		},
		func() string {
			return fmt.Sprintf("local n = 0 for xb, yb in ld do n = n + 1 %s = xb if n >= %s then break end end", v(), pick("1", "2", "100"))
		},
		func() string { return fmt.Sprintf("local _ = #ld %s = ld()", v()) },
		func() string {
			return fmt.Sprintf("local n = 0 for xb in progress(ld) do n = n + 1 %s = xb:sum() if n >= %s then break end end", v(), pick("1", "3"))
		},
		// a loader loop suspended by yields, resumed from later statements
		func() string {
			return "co = coroutine.wrap(function() local n = 0 for xb in ld do n = n + 1 coroutine.yield(xb) if n > 50 then break end end end)"
		},
		// modules, and a whole training step through them
		func() string {
			return fmt.Sprintf("m = nn.Sequential{nn.Linear(2, 3), nn.%s, nn.Linear(3, 2)}%s opt = optim.adam(m:parameters(), {lr = 0.01})",
				pick("ReLU()", "GELU(\"tanh\")", "Tanh()", "Dropout(0.5)", "LayerNorm(3)"), pick("", ":to_gpu(\"persistent\")"))
		},
		func() string {
			return fmt.Sprintf("opt:zero_grad() loss = with_grad_tape(function() return nn.%s end) backward(loss) opt:step() local _ = loss:item()",
				pick("mse_loss(m(tensor.randn(4, 2)), tensor.randn(4, 2))", "cross_entropy(m(tensor.randn(4, 2)), {1, 2, 2, 1})", fmt.Sprintf("mse_loss(m(%s), %s)", v(), v())))
		},
		func() string { return fmt.Sprintf("%s = m(%s)", v(), v()) },
		func() string { return fmt.Sprintf("m:%s()", pick("train", "eval")) },
		func() string { return "m:load_state_dict(m:state_dict())" },
		func() string { return fmt.Sprintf("tensor.manual_seed(%s)", num()) },
		func() string { return "ld:reset()" },
		// checkpoints (unsandboxed runtime, CK_DIR): a round trip keeps
		// every value, nesting and dtype
		func() string {
			files = true
			a, b := v(), v()
			return fmt.Sprintf("local p = CK_DIR .. \"/%d.gguf\" tensor.save(p, {a = %s, nest = {b = %s, n = 2.5, s = \"x\", f = true}}) local back = tensor.load(p) check(same(back.a, %s) and same(back.nest.b, %s) and back.nest.n == 2.5 and back.nest.s == \"x\" and back.nest.f == true and back.a:dtype() == %s:dtype(), %q)",
				next()%3, a, b, a, b, a, "a checkpoint round trip changed a value")
		},
		func() string {
			files = true
			return fmt.Sprintf("%s = tensor.load(CK_DIR .. \"/%d.gguf\").%s", v(), next()%3, pick("a", "nest.b"))
		},
		func() string {
			files = true
			return fmt.Sprintf("tensor.save(CK_DIR .. \"/%d.gguf\", {a = %s})", next()%3, view())
		},
		func() string {
			files = true
			return fmt.Sprintf("opt:load_state_dict(tensor.load(CK_DIR .. \"/opt.gguf\")) local _ = tensor.save(CK_DIR .. \"/opt.gguf\", opt:state_dict())")
		},
	}
	var b strings.Builder
	b.WriteString(fuzzPrelude)
	for i := 0; pos < len(data) && i < 64; i++ {
		fmt.Fprintf(&b, "stmt(function() %s end)\n", stmts[next()%len(stmts)]())
	}
	b.WriteString("residency.limit(128 * 2^20)\n")
	return b.String(), files
}

// statementKinds is how many kinds of statement scriptFromBytes picks from:
// the program of the one byte k is that of byte 0 again first when k is
// their number (k mod the number picks the kind, missing arguments are 0).
func statementKinds() int {
	first, _ := scriptFromBytes([]byte{0})
	for k := 1; k < 256; k++ {
		if p, _ := scriptFromBytes([]byte{byte(k)}); p == first {
			return k
		}
	}
	return 256
}

// FuzzScript runs random tensor programs through the public Lua API in a
// sandboxed runtime (unsandboxed, with a temporary folder, when the program
// saves or loads checkpoints). Every outcome must be a value or a Lua error:
// a ggml abort, an escaped Go panic or a hang fails it, and so does a broken
// invariant the program checks (FUZZ_BROKEN). Afterwards the ledger must be
// sane and the runtime must still compute.
func FuzzScript(f *testing.F) {
	for _, seed := range []string{
		"\x00\x01\x02\x03\x04\x05", "\x06\x07\x08\x09\x0a\x0b\x0c", "\x12\x00\x13\x01\x14\x15\x16",
		"\x03\x01\x01\x12\x00\x17\x01", "\x05\x02\x14\x15\x1c\x1d\x1d", "\x10\x0a\x11\x19\x1e\x1f",
	} {
		f.Add([]byte(seed))
	}
	// one seed per statement kind, so that replaying the corpus runs each
	for k := 0; k < statementKinds(); k++ {
		f.Add([]byte{byte(k), 1, 2, 0, 3, 1, 0, 2, 1, 4})
	}
	f.Fuzz(runFuzzProgram)
}

// runFuzzProgram runs the program data stands for and checks its outcome.
func runFuzzProgram(t *testing.T, data []byte) {
	code, files := scriptFromBytes(data)
	// A fresh runtime per program: nothing one program leaves behind
	// (resident tensors, limits) weighs on the next.
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: !files, MemLimit: 128 << 20, HostLimit: 128 << 20, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	hung := false
	defer func() {
		if !hung { // a hung script still runs on rt
			rt.Close()
		}
	}()
	if files {
		if _, err := rt.DoString(context.Background(), fmt.Sprintf("CK_DIR = %q", t.TempDir())); err != nil {
			t.Fatal(err)
		}
	}
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
		hung = true
		t.Fatalf("the script ran 3 s past its cancellation:\n%s", code)
	}
	// A program cancelled at its deadline (a loaded machine) may not
	// have reached its last line, which lifts the limit it may have set.
	if _, err := rt.DoString(context.Background(), `residency.limit(128 * 2^20)`); err != nil {
		t.Fatalf("residency.limit after the program: %v\n%s", err, code)
	}
	l := rt.Engine().Residency().Ledger()
	if l.BufferBytes < 0 || l.PBufferBytes < 0 || l.TotalBufferBytes != l.BufferBytes+l.PBufferBytes+l.CachedBytes+l.ScratchBytes || l.PeakBytes < l.BufferBytes+l.ScratchBytes {
		t.Fatalf("inconsistent ledger %+v after\n%s", l, code)
	}
	if broken, err := rt.DoString(context.Background(), `return FUZZ_BROKEN`); err != nil || broken[0] != nil {
		t.Fatalf("broken invariant: %v (%v) in\n%s", broken, err, code)
	}
	vals, err := rt.DoString(context.Background(), `return (tensor{1, 2} * 3):sum():item()`)
	if err != nil || vals[0] != 9.0 {
		t.Fatalf("the runtime no longer computes (%v, %v) after\n%s", vals, err, code)
	}
}
