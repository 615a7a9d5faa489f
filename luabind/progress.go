package luabind

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// progress(n), progress(loader [, n]) or progress(iter [, n]) is an
// iterator that draws a progress bar with rate and ETA: redrawn in place on
// a terminal, a plain line every tenth (or every 100 steps when the total is
// unknown) otherwise. Over a data.loader it is one epoch, and its total is
// #loader. bar:set{loss=...} adds values to the bar, feeds them to the
// open run log (log.go) and, on a terminal, draws a sparkline of one of them.
type progressBar struct {
	out     io.Writer
	tty     bool
	total   int
	done    int
	start   time.Time
	lastOut time.Time
	extra   map[string]string
	feed    barFeed // where set{} values go in the run log

	// sparkKey is the value the sparkline follows: "loss" if set{} gives
	// one, else the first numeric key (sorted) of the first set{} with any;
	// spark holds its latest values.
	sparkKey string
	spark    []float64
}

// sparkLength is how many recent values the sparkline shows.
const sparkLength = 20

// sparkBars are the sparkline's eight heights.
var sparkBars = []rune("▁▂▃▄▅▆▇█")

// sparkline draws vs scaled from their minimum (▁) to their maximum (█);
// equal values sit in the middle, and NaN or an infinity, which has no
// height, is drawn as "×" and left out of the scale.
func sparkline(vs []float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	var b strings.Builder
	for _, v := range vs {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			b.WriteRune('×')
		case hi == lo:
			b.WriteRune(sparkBars[len(sparkBars)/2])
		default:
			b.WriteRune(sparkBars[int(math.Round((v-lo)/(hi-lo)*float64(len(sparkBars)-1)))])
		}
	}
	return b.String()
}

// set adds a set{} table's values to the bar and returns its numeric ones.
func (p *progressBar) set(L *lua.LState, tbl *lua.LTable) map[string]float64 {
	nums := map[string]float64{}
	tbl.ForEach(func(k, v lua.LValue) {
		if n, ok := v.(lua.LNumber); ok {
			p.extra[k.String()] = fmt.Sprintf("%.4g", float64(n))
			nums[k.String()] = float64(n)
		} else {
			p.extra[k.String()] = L.ToStringMeta(v).String()
		}
	})
	if _, ok := nums["loss"]; ok && p.sparkKey != "loss" {
		p.sparkKey, p.spark = "loss", nil
	}
	if p.sparkKey == "" {
		for k := range nums {
			if p.sparkKey == "" || k < p.sparkKey {
				p.sparkKey = k
			}
		}
	}
	if v, ok := nums[p.sparkKey]; ok {
		p.spark = append(p.spark, v)
		if len(p.spark) > sparkLength {
			p.spark = p.spark[len(p.spark)-sparkLength:]
		}
	}
	return nums
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progressBar) line() string {
	el := time.Since(p.start).Seconds()
	rate := float64(p.done) / max(el, 1e-9)
	var b strings.Builder
	if p.total > 0 {
		frac := float64(p.done) / float64(p.total)
		width := 24
		filled := int(frac * float64(width))
		fmt.Fprintf(&b, "%3.0f%% [%s%s] %d/%d", 100*frac, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), p.done, p.total)
		if rate > 0 && p.done < p.total {
			fmt.Fprintf(&b, " eta %.1fs", float64(p.total-p.done)/rate)
		}
	} else {
		fmt.Fprintf(&b, "%d", p.done)
	}
	fmt.Fprintf(&b, " %.1f it/s", rate)
	keys := make([]string, 0, len(p.extra))
	for k := range p.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, p.extra[k])
		if p.tty && k == p.sparkKey && len(p.spark) > 0 { // plain lines (logs) stay ASCII
			b.WriteString(" " + sparkline(p.spark))
		}
	}
	return b.String()
}

func (p *progressBar) tick() {
	p.done++
	finished := p.total > 0 && p.done >= p.total
	switch {
	case p.tty:
		if finished || time.Since(p.lastOut) > 50*time.Millisecond {
			fmt.Fprintf(p.out, "\r\x1b[K%s", p.line())
			p.lastOut = time.Now()
		}
		if finished {
			fmt.Fprintln(p.out)
		}
	case p.total > 0:
		step := max(p.total/10, 1)
		if p.done%step == 0 || finished {
			fmt.Fprintln(p.out, p.line())
		}
	case p.done%100 == 0:
		fmt.Fprintln(p.out, p.line())
	}
}

func openProgress(L *lua.LState, env *Env) {
	out := env.stdout()
	L.SetGlobal("progress", L.NewFunction(func(L *lua.LState) int {
		p := &progressBar{out: out, tty: isTTY(out), start: time.Now(), extra: map[string]string{}}
		var inner *lua.LFunction
		var loader *dataLoader
		switch v := L.Get(1).(type) {
		case lua.LNumber:
			p.total = progressCount(L, 1, "count")
		case *lua.LFunction:
			inner = v
			if L.Get(2) != lua.LNil {
				p.total = progressCount(L, 2, "total")
			}
		default:
			if loader = toLoader(v); loader == nil {
				argError(L, "progress", "expected a count, a data.loader or an iterator function, got %s", luaTypeName(v))
			}
			p.total = loader.batches()
			if L.Get(2) != lua.LNil {
				p.total = progressCount(L, 2, "total")
			}
		}
		bar := L.NewTable()
		L.SetField(bar, "set", newFunction(L, "bar:set", func(L *lua.LState) int {
			feedBar(L, &p.feed, p.done, p.set(L, L.CheckTable(2)))
			return 0
		}))
		started := false
		mt := L.NewTable()
		L.SetField(mt, "__call", L.NewFunction(func(L *lua.LState) int {
			if inner == nil && loader == nil {
				if p.done >= p.total {
					return 0
				}
				p.tick()
				L.Push(lua.LNumber(p.done))
				return 1
			}
			top := L.GetTop() // the generic for passes (bar, state, control)
			var n int
			if loader != nil {
				if !started {
					loader.start(L) // a bar over a loader is one epoch
				}
				n = loader.next(L)
			} else {
				L.Push(inner)
				L.Call(0, lua.MultRet)
				n = L.GetTop() - top
			}
			started = true
			if n <= 0 || L.Get(top+1) == lua.LNil {
				if p.tty && p.done > 0 {
					fmt.Fprintln(p.out)
				}
				return 0
			}
			p.tick()
			return n
		}))
		L.SetMetatable(bar, mt)
		L.Push(bar)
		return 1
	}))
}

// progressCount reads argument n of progress, a count of steps: a whole number,
// at least 0.
func progressCount(L *lua.LState, n int, what string) int {
	c := checkInteger(L, "progress", n)
	if c < 0 {
		argError(L, "progress", "argument %d: the %s must be at least 0, got %d", n, what, c)
	}
	return c
}
