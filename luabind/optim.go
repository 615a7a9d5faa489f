package luabind

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/gglua/gglua/core"
)

// The optim library: optimizers (core/optim.go), gradient clipping
// (core/clip.go) and, in lr_scheduler.go, the learning-rate schedulers.

func (env *Env) optimFunctions() map[string]lua.LGFunction {
	fs := map[string]lua.LGFunction{
		"adam":            env.adam("optim.adam", false, 0),
		"adamw":           env.adam("optim.adamw", true, 0.01),
		"clip_grad_norm":  env.clipGradNorm,
		"clip_grad_value": env.clipGradValue,
		"sgd":             env.sgd,
	}
	for _, r := range core.Rules { // adadelta, adagrad, adamax, nadam, radam, rmsprop
		fs[r.Name] = env.ruleOptimizer(r)
	}
	return fs
}

func openOptim(L *lua.LState, env *Env) {
	lib := L.SetFuncs(L.NewTable(), functions("optim.", env.optimFunctions()))
	L.SetField(lib, "lr_scheduler", L.SetFuncs(L.NewTable(), functions("optim.lr_scheduler.", env.schedulerFunctions())))
	L.SetGlobal("optim", lib)
}

// Optimizers take a list of parameters, or a list of parameter groups as
// torch's: optim.sgd({{params = {w1, w2}, weight_decay = 1e-4},
// {params = {b1, b2}, weight_decay = 0, lr = 0.1}}, {lr = 0.01,
// momentum = 0.9}). A group's own settings override the defaults given as
// the second argument. opt.param_groups is the list of the groups: each
// holds its params and reads its settings live (lr, initial_lr, momentum,
// ...); assigning one (group.lr = 0.01, as torch users write manual
// schedules) sets it, checked as the constructor checks it. Lua 5.1 has no
// __pairs, so pairs(group) shows only params: opt:state_dict().param_groups
// is a copy of every setting. opt:set_lr(lr [, group]) sets one group's
// rate, or every group's; opt:get_lr([group]) reads one (the first by
// default). Schedulers drive every group's rate, each from its own
// initial_lr.

// luaGroup is one parameter group as given: its parameters and its own
// settings (nil: the defaults).
type luaGroup struct {
	params []*core.Tensor
	opts   *lua.LTable
}

// groupsArg reads argument 1: a list of parameters (one group) or a list
// of groups {params = {...}, setting = value, ...}.
func groupsArg(L *lua.LState, fn string) []luaGroup {
	tbl, ok := L.Get(1).(*lua.LTable)
	if !ok || tbl.Len() == 0 || toTensor(tbl.RawGetInt(1)) != nil {
		return []luaGroup{{params: paramsArg(L, fn)}}
	}
	if _, isTable := tbl.RawGetInt(1).(*lua.LTable); !isTable {
		return []luaGroup{{params: paramsArg(L, fn)}}
	}
	var groups []luaGroup
	for i := 1; i <= tbl.Len(); i++ {
		g, ok := tbl.RawGetInt(i).(*lua.LTable)
		if !ok || toTensor(g) != nil {
			argError(L, fn, "parameter group %d is a %s, expected a table {params = {...}, ...} (a list of parameters and a list of groups cannot be mixed)", i, luaTypeName(tbl.RawGetInt(i)))
		}
		var ps []*core.Tensor
		switch v := g.RawGetString("params").(type) {
		case *lua.LNilType:
			argError(L, fn, "parameter group %d has no params (expected {params = {...}, ...})", i)
		case *lua.LTable:
			for j := 1; j <= v.Len(); j++ {
				t := toTensor(v.RawGetInt(j))
				if t == nil {
					argError(L, fn, "parameter group %d: parameter %d is a %s, expected a tensor", i, j, luaTypeName(v.RawGetInt(j)))
				}
				ps = append(ps, t)
			}
		default:
			t := toTensor(v)
			if t == nil {
				argError(L, fn, "parameter group %d: params is a %s, expected a table of tensors", i, luaTypeName(v))
			}
			ps = []*core.Tensor{t}
		}
		groups = append(groups, luaGroup{params: ps, opts: g})
	}
	return groups
}

// groupReader reads group g's own settings (params aside) over the
// defaults: every getter asked of it falls back to them.
func groupReader(L *lua.LState, fn string, g int, gr luaGroup) *optReader {
	r := &optReader{L: L, fn: fmt.Sprintf("%s: parameter group %d", fn, g+1), tbl: gr.opts}
	r.get("params")
	return r
}

// readSettings reads an optimizer's settings but lr, torch's names, each
// defaulting to cur's: SGD's momentum, dampening, weight_decay, nesterov;
// Adam's betas, eps, weight_decay.
func readSettings(r *optReader, cur any) any {
	switch c := cur.(type) {
	case core.SGDOptions:
		c.Momentum = float32(r.number("momentum", float64(c.Momentum)))
		c.Dampening = float32(r.number("dampening", float64(c.Dampening)))
		c.WeightDecay = float32(r.number("weight_decay", float64(c.WeightDecay)))
		c.Nesterov = r.boolean("nesterov", c.Nesterov)
		return c
	case core.AdamOptions:
		b1, b2 := r.pair("betas", float64(c.Beta1), float64(c.Beta2))
		c.Beta1, c.Beta2 = float32(b1), float32(b2)
		c.Eps = float32(r.number("eps", float64(c.Eps)))
		c.WeightDecay = float32(r.number("weight_decay", float64(c.WeightDecay)))
		return c
	case core.Settings:
		for _, st := range c.Rule.Settings {
			v := c.Get(st.Name)
			switch {
			case st.Flag:
				on := r.boolean(st.Name, v[0] != 0)
				v[0] = 0
				if on {
					v[0] = 1
				}
			case len(v) == 2:
				v[0], v[1] = r.pair(st.Name, v[0], v[1])
			default:
				v[0] = r.number(st.Name, v[0])
			}
			c = c.With(st.Name, v...)
		}
		return c
	}
	panic(fmt.Sprintf("settings of type %T", cur))
}

// checkWhole refuses a group's own value of a setting that is the
// optimizer's (Adagrad's initial_accumulator_value: torch reads only the
// default, so a group's would be ignored).
func checkWhole(L *lua.LState, fn string, opts, defaults any) {
	s, ok := opts.(core.Settings)
	if !ok {
		return
	}
	def := defaults.(core.Settings)
	for _, st := range s.Rule.Settings {
		if v, d := s.Get(st.Name)[0], def.Get(st.Name)[0]; st.Whole && v != d {
			argError(L, fn, "%s is %g, the optimizer's is %g: it is one for every group, set it beside lr in the defaults (torch reads only the default)", st.Name, v, d)
		}
	}
}

// settingsTable sets opts's settings but lr into tbl, by torch's names.
func settingsTable(L *lua.LState, opts any, tbl *lua.LTable) {
	switch o := opts.(type) {
	case core.SGDOptions:
		tbl.RawSetString("momentum", lua.LNumber(o.Momentum))
		tbl.RawSetString("dampening", lua.LNumber(o.Dampening))
		tbl.RawSetString("weight_decay", lua.LNumber(o.WeightDecay))
		tbl.RawSetString("nesterov", lua.LBool(o.Nesterov))
	case core.AdamOptions:
		tbl.RawSetString("betas", L.NewTable())
		b := tbl.RawGetString("betas").(*lua.LTable)
		b.Append(lua.LNumber(o.Beta1))
		b.Append(lua.LNumber(o.Beta2))
		tbl.RawSetString("eps", lua.LNumber(o.Eps))
		tbl.RawSetString("weight_decay", lua.LNumber(o.WeightDecay))
	case core.Settings:
		for _, st := range o.Rule.Settings {
			v := o.Get(st.Name)
			switch {
			case st.Flag:
				tbl.RawSetString(st.Name, lua.LBool(v[0] != 0))
			case len(v) == 2:
				pair := L.NewTable()
				pair.Append(lua.LNumber(v[0]))
				pair.Append(lua.LNumber(v[1]))
				tbl.RawSetString(st.Name, pair)
			default:
				tbl.RawSetString(st.Name, lua.LNumber(v[0]))
			}
		}
	}
}

// groupOptions and setGroupOptions reach a core optimizer's group settings.
func groupOptions(o stepper, g int) any {
	switch x := o.(type) {
	case *core.SGD:
		return x.GroupOptions(g)
	case *core.Adam:
		return x.GroupOptions(g)
	case *core.RuleOptimizer:
		return x.GroupOptions(g)
	}
	panic(fmt.Sprintf("optimizer of type %T", o))
}

func setGroupOptions(o stepper, g int, opts any) error {
	switch x := o.(type) {
	case *core.SGD:
		return x.SetGroupOptions(g, opts.(core.SGDOptions))
	case *core.Adam:
		return x.SetGroupOptions(g, opts.(core.AdamOptions))
	case *core.RuleOptimizer:
		return x.SetGroupOptions(g, opts.(core.Settings))
	}
	panic(fmt.Sprintf("optimizer of type %T", o))
}

// makeOptimizer reads the groups and the defaults (lr defaulting to defLR,
// the other settings to def), merges each group's own settings over them
// and makes the optimizer; every group's rate is then set in float64, as
// given, for the schedulers.
func (env *Env) makeOptimizer(L *lua.LState, fn string, defLR float64, def any, build func(opts []any, params [][]*core.Tensor) (stepper, error)) int {
	groups := groupsArg(L, fn)
	r := readOpts(L, fn, 2)
	lr := r.number("lr", defLR)
	defaults := readSettings(r, def)
	r.done()
	lrs := make([]float64, len(groups))
	opts := make([]any, len(groups))
	params := make([][]*core.Tensor, len(groups))
	for g, gr := range groups {
		lrs[g], opts[g], params[g] = lr, defaults, gr.params
		if gr.opts != nil {
			gr := groupReader(L, fn, g, gr)
			lrs[g] = gr.number("lr", lr)
			opts[g] = readSettings(gr, defaults)
			gr.done()
			checkWhole(L, gr.fn, opts[g], defaults)
		}
	}
	opt, err := build(opts, params)
	raise(L, err)
	for g, rate := range opt.Rates() {
		raise(L, rate.SetLR(lrs[g])) // the rate as given, in float64, for the schedulers
	}
	return env.pushOptimizer(L, opt, lr, defaults)
}

// addParamGroup is opt:add_param_group{params = {...}, setting = value,
// ...}, as torch's: the settings the group leaves out are the optimizer's
// defaults (those given when it was made, not another group's), its
// parameters must be in no other group, and opt.param_groups gains it.
// A scheduler made before it refuses to step (see core.Scheduler.Step).
func (env *Env) addParamGroup(o optimizer) lua.LGFunction {
	return func(L *lua.LState) int {
		const fn = "optimizer:add_param_group"
		self := L.CheckTable(1)
		g, ok := L.Get(2).(*lua.LTable)
		if !ok || toTensor(g) != nil {
			argError(L, fn, "argument 1: expected a table {params = {...}, ...}, got %s", luaTypeName(L.Get(2)))
		}
		list := L.NewTable() // groupsArg reads argument 1: a list of groups
		list.Append(g)
		L.Replace(1, list)
		gr := groupsArg(L, fn)[0]
		r := groupReader(L, fn, o.o.NumGroups(), gr)
		r.fn = fn
		lr := r.number("lr", o.defLR)
		opts := readSettings(r, o.defaults)
		r.done()
		checkWhole(L, fn, opts, o.defaults)
		var err error
		switch x := o.o.(type) {
		case *core.SGD:
			so := opts.(core.SGDOptions)
			so.LR = float32(lr)
			err = x.AddGroup(core.SGDGroup{Params: gr.params, Opts: so})
		case *core.Adam:
			ao := opts.(core.AdamOptions)
			ao.LR = float32(lr)
			err = x.AddGroup(core.AdamGroup{Params: gr.params, Opts: ao})
		case *core.RuleOptimizer:
			err = x.AddGroup(core.RuleGroup{Params: gr.params, LR: float32(lr), Opts: opts.(core.Settings)})
		default:
			panic(fmt.Sprintf("optimizer of type %T", o.o))
		}
		raise(L, err)
		n := o.o.NumGroups() - 1
		raise(L, o.o.Rates()[n].SetLR(lr)) // in float64, as given, as makeOptimizer sets it
		if groups, ok := self.RawGetString("param_groups").(*lua.LTable); ok {
			groups.Append(env.paramGroup(L, o.o, n))
		}
		return 0
	}
}

// sgd(params or groups, {lr=0.01, momentum=0, dampening=0, weight_decay=0, nesterov=false}).
func (env *Env) sgd(L *lua.LState) int {
	return env.makeOptimizer(L, "optim.sgd", 0.01, core.SGDOptions{}, func(opts []any, params [][]*core.Tensor) (stepper, error) {
		gs := make([]core.SGDGroup, len(opts))
		for g := range gs {
			gs[g] = core.SGDGroup{Params: params[g], Opts: opts[g].(core.SGDOptions)}
		}
		return core.NewSGDGroups(env.Engine, gs)
	})
}

// adam and adamw(params or groups, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=}).
func (env *Env) adam(name string, decoupled bool, wd float64) lua.LGFunction {
	return func(L *lua.LState) int {
		def := core.AdamOptions{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: float32(wd)}
		return env.makeOptimizer(L, name, 1e-3, def, func(opts []any, params [][]*core.Tensor) (stepper, error) {
			gs := make([]core.AdamGroup, len(opts))
			for g := range gs {
				gs[g] = core.AdamGroup{Params: params[g], Opts: opts[g].(core.AdamOptions)}
			}
			return core.NewAdamGroups(env.Engine, gs, decoupled)
		})
	}
}

// ruleOptimizer is optim.rmsprop, optim.adagrad, ... (params or groups,
// {lr=, and the rule's settings by torch's names}), torch's defaults.
func (env *Env) ruleOptimizer(rule *core.Rule) lua.LGFunction {
	return func(L *lua.LState) int {
		return env.makeOptimizer(L, "optim."+rule.Name, rule.LR, rule.Defaults(), func(opts []any, params [][]*core.Tensor) (stepper, error) {
			gs := make([]core.RuleGroup, len(opts))
			for g := range gs {
				gs[g] = core.RuleGroup{Params: params[g], LR: float32(rule.LR), Opts: opts[g].(core.Settings)}
			}
			return core.NewRuleOptimizer(env.Engine, rule, gs)
		})
	}
}

// clip_grad_norm(params, max_norm [, norm_type=2 | {norm_type=,
// error_if_nonfinite=false}]), as torch.nn.utils.clip_grad_norm_.
func (env *Env) clipGradNorm(L *lua.LState) int {
	const fn = "optim.clip_grad_norm"
	params, maxNorm := paramsArg(L, fn), float32(L.CheckNumber(2))
	if L.GetTop() > 3 {
		argError(L, fn, "takes params, max_norm and norm_type (or an options table), got %d arguments", L.GetTop())
	}
	p := 2.0
	if v, ok := L.Get(3).(lua.LNumber); ok {
		p = float64(v)
	} else {
		o := readOpts(L, fn, 3)
		p = o.number("norm_type", 2)
		if o.boolean("error_if_nonfinite", false) {
			argError(L, fn, "error_if_nonfinite=true is not supported (it would wait for the device every step); check the returned norm with isfinite")
		}
		o.done()
	}
	n, err := env.Engine.ClipGradNormType(params, maxNorm, p)
	return env.pushResult(L, n, err)
}

func (env *Env) clipGradValue(L *lua.LState) int {
	raise(L, env.Engine.ClipGradValue(paramsArg(L, "optim.clip_grad_value"), float32(L.CheckNumber(2))))
	return 0
}

// stepper is what every core optimizer does.
type stepper interface {
	Step() error
	ZeroGrad()
	Params() []*core.Tensor
	NumGroups() int
	GroupParams(g int) []*core.Tensor
	State() (core.OptimizerState, error)
	LoadState(core.OptimizerState) error
	Rates() []*core.Rate
}

// optimizer is what a Lua optimizer table stands for: the core optimizer
// and the defaults it was made with (its lr and other settings), which
// add_param_group fills a new group from.
type optimizer struct {
	o        stepper
	defLR    float64
	defaults any
}

// optimizerField is the metatable field of an optimizer table that holds
// the optimizer (in a userdata). Nothing but the table refers to the
// optimizer, so it and its state go when the script drops the table.
const optimizerField = "__optimizer"

// objectTable is a new table whose metatable, named name, holds value in
// a userdata at field: the Lua face of a Go object (an optimizer, a
// scheduler). Nothing but the table keeps the object alive.
func objectTable(L *lua.LState, name, field string, value any) *lua.LTable {
	ud := L.NewUserData()
	ud.Value = value
	mt := L.NewTable()
	mt.RawSetString("__name", lua.LString(name))
	mt.RawSetString(field, ud)
	tbl := L.NewTable()
	tbl.Metatable = mt
	return tbl
}

// objectOf is the value objectTable stored at field, or nil.
func objectOf(v lua.LValue, field string) any {
	if tbl, ok := v.(*lua.LTable); ok {
		if mt, ok := tbl.Metatable.(*lua.LTable); ok {
			if ud, ok := mt.RawGetString(field).(*lua.LUserData); ok {
				return ud.Value
			}
		}
	}
	return nil
}

// pushOptimizer pushes the Lua face of o: a table of methods and
// param_groups.
func (env *Env) pushOptimizer(L *lua.LState, o stepper, defLR float64, defaults any) int {
	opt := optimizer{o: o, defLR: defLR, defaults: defaults}
	tbl := objectTable(L, "optimizer", optimizerField, opt)
	L.SetFuncs(tbl, functions("optimizer:", map[string]lua.LGFunction{
		"add_param_group": env.addParamGroup(opt),
		"get_lr":          opt.getLR,
		"load_state_dict": opt.loadStateDict,
		"parameters":      env.optimParameters(o),
		"set_lr":          opt.setLR,
		"state_dict":      env.optimStateDict(o),
		"step":            opt.step,
		"zero_grad":       opt.zeroGrad,
	}))
	groups := L.NewTable()
	for g := 0; g < o.NumGroups(); g++ {
		groups.Append(env.paramGroup(L, o, g))
	}
	tbl.RawSetString("param_groups", groups)
	L.Push(tbl)
	return 1
}

// paramGroup is the Lua face of group g: a table holding params whose
// settings are read and written through its metatable, so they are always
// the optimizer's own.
func (env *Env) paramGroup(L *lua.LState, o stepper, g int) *lua.LTable {
	tbl := L.NewTable()
	ps := L.NewTable()
	for _, p := range o.GroupParams(g) {
		ps.Append(env.push(L, p))
	}
	tbl.RawSetString("params", ps)
	rate := o.Rates()[g]
	fn := fmt.Sprintf("param_groups[%d]", g+1)
	mt := L.NewTable()
	mt.RawSetString("__name", lua.LString("param_group"))
	mt.RawSetString("__index", newFunction(L, fn, func(L *lua.LState) int {
		switch key := L.Get(2); key {
		case lua.LString("lr"):
			L.Push(lua.LNumber(rate.LR()))
		case lua.LString("initial_lr"):
			v, ok := rate.InitialLR()
			if !ok {
				L.Push(lua.LNil)
				return 1
			}
			L.Push(lua.LNumber(v))
		default:
			s := L.NewTable()
			settingsTable(L, groupOptions(o, g), s)
			L.Push(s.RawGet(key))
		}
		return 1
	}))
	mt.RawSetString("__newindex", newFunction(L, fn, func(L *lua.LState) int {
		key, v := L.Get(2), L.Get(3)
		switch key {
		case lua.LString("lr"), lua.LString("initial_lr"):
			n, ok := v.(lua.LNumber)
			if !ok {
				argError(L, fn, "%s must be a number, got %s", key.String(), luaTypeName(v))
			}
			if key == lua.LString("lr") {
				raise(L, rate.SetLR(float64(n)))
			} else {
				raise(L, rate.SetInitialLR(float64(n)))
			}
			return 0
		}
		one := L.NewTable()
		one.RawSet(key, v)
		r := &optReader{L: L, fn: fn, tbl: one, asked: []string{"lr", "initial_lr"}}
		opts := readSettings(r, groupOptions(o, g))
		r.done()
		raise(L, setGroupOptions(o, g, opts))
		return 0
	}))
	tbl.Metatable = mt
	return tbl
}

func (o optimizer) step(L *lua.LState) int { raise(L, o.o.Step()); return 0 }
func (o optimizer) zeroGrad(L *lua.LState) int {
	zeroGrads(L, "optimizer:zero_grad", o.o.Params(), 2)
	return 0
}

// zeroGrads is zero_grad with its argument n, set_to_none (true by
// default, as in torch 2): a boolean or {set_to_none = ...}. true: the
// gradients go (the next backward sets them); false: each gradient that
// exists becomes zeros in place.
func zeroGrads(L *lua.LState, fn string, params []*core.Tensor, n int) {
	none := true
	switch v := L.Get(n).(type) {
	case lua.LBool:
		none = bool(v)
	default:
		o := readOpts(L, fn, n)
		none = o.boolean("set_to_none", true)
		o.done()
	}
	if none {
		core.ZeroGrad(params)
		return
	}
	raise(L, core.ZeroGradToZeros(params))
}

// groupArg reads an optional 1-based group number at n (def when absent).
func (o optimizer) groupArg(L *lua.LState, fn string, n, def int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	g, ok := L.Get(n).(lua.LNumber)
	if !ok || float64(g) != math.Trunc(float64(g)) || g < 1 || int(g) > o.o.NumGroups() {
		argError(L, fn, "group must be an integer from 1 to %d, got %s", o.o.NumGroups(), L.Get(n).String())
	}
	return int(g) - 1
}

// getLR is opt:get_lr([group]): a group's rate, the first's by default.
func (o optimizer) getLR(L *lua.LState) int {
	g := o.groupArg(L, "get_lr", 2, 0)
	L.Push(lua.LNumber(o.o.Rates()[g].LR()))
	return 1
}

// setLR is opt:set_lr(lr [, group]): one group's rate, or every group's.
func (o optimizer) setLR(L *lua.LState) int {
	lr := float64(L.CheckNumber(2))
	g := o.groupArg(L, "set_lr", 3, -1)
	if g >= 0 {
		raise(L, o.o.Rates()[g].SetLR(lr))
		return 0
	}
	for _, r := range o.o.Rates() { // each refuses the same rates: all or none
		raise(L, r.SetLR(lr))
	}
	return 0
}

// loadStateDict is opt:load_state_dict(sd): what state_dict returned (or
// its older flat form, for an optimizer of one group).
func (o optimizer) loadStateDict(L *lua.LState) int {
	const fn = "load_state_dict"
	st := core.OptimizerState{Tensors: map[string]*core.Tensor{}, Nums: map[string]float64{}}
	var groups *lua.LTable
	L.CheckTable(2).ForEach(func(k, v lua.LValue) {
		if k == lua.LString("param_groups") {
			t, ok := v.(*lua.LTable)
			if !ok {
				argError(L, fn, "param_groups is a %s, expected a list of tables", luaTypeName(v))
			}
			groups = t
			return
		}
		if n, ok := v.(lua.LNumber); ok {
			st.Nums[k.String()] = float64(n)
			return
		}
		t := toTensor(v)
		if t == nil {
			argError(L, fn, "%s is a %s, expected a tensor or a number", k.String(), luaTypeName(v))
		}
		st.Tensors[k.String()] = t
	})
	if groups != nil {
		st.Groups = []core.GroupState{}
		for i := 1; i <= groups.Len(); i++ {
			st.Groups = append(st.Groups, o.groupState(L, fn, i, groups.RawGetInt(i)))
		}
		if n := stateEntries(groups); n != groups.Len() {
			argError(L, fn, "param_groups must be a list (it has %d entries, %d of them in sequence)", n, groups.Len())
		}
	}
	raise(L, o.o.LoadState(st))
	return 0
}

func stateEntries(t *lua.LTable) int {
	n := 0
	t.ForEach(func(lua.LValue, lua.LValue) { n++ })
	return n
}

// groupState reads the state's param_groups[i]: params (positions), lr,
// initial_lr and the settings, which default to the optimizer's own.
func (o optimizer) groupState(L *lua.LState, fn string, i int, v lua.LValue) core.GroupState {
	tbl, ok := v.(*lua.LTable)
	if !ok {
		argError(L, fn, "param_groups[%d] is a %s, expected a table", i, luaTypeName(v))
	}
	g := min(i, o.o.NumGroups()) - 1 // a state of more groups is refused by core
	r := &optReader{L: L, fn: fmt.Sprintf("%s: param_groups[%d]", fn, i), tbl: tbl}
	var gs core.GroupState
	ps, ok := r.get("params").(*lua.LTable)
	if !ok {
		argError(L, r.fn, "params must be a list of parameter positions, got %s", luaTypeName(tbl.RawGetString("params")))
	}
	for j := 1; j <= ps.Len(); j++ {
		n, ok := ps.RawGetInt(j).(lua.LNumber)
		if !ok || float64(n) != math.Trunc(float64(n)) || math.Abs(float64(n)) > 1<<40 {
			argError(L, r.fn, "params[%d] must be an integer position, got %s", j, ps.RawGetInt(j).String())
		}
		gs.Params = append(gs.Params, int(n))
	}
	gs.LR = r.number("lr", o.o.Rates()[g].LR())
	if r.has("initial_lr") {
		gs.InitialLR, gs.HasInitialLR = r.number("initial_lr", 0), true
	} else {
		r.get("initial_lr")
	}
	gs.Options = readSettings(r, groupOptions(o.o, g))
	r.done()
	return gs
}

// optimStateDict is opt:state_dict(): torch's names ("state.1.exp_avg",
// step, and lr and initial_lr, the first group's) and param_groups, a list
// of every group's params (1-based positions) and settings, taken after any
// queued step has run, as host copies that later steps leave alone (torch
// hands out the live state).
func (env *Env) optimStateDict(o stepper) lua.LGFunction {
	return func(L *lua.LState) int {
		st, err := o.State()
		raise(L, err)
		out := L.NewTable()
		for k, t := range st.Tensors {
			out.RawSetString(k, env.push(L, t))
		}
		for k, v := range st.Nums {
			out.RawSetString(k, lua.LNumber(v))
		}
		groups := L.NewTable()
		for _, gs := range st.Groups {
			g := L.NewTable()
			ps := L.NewTable()
			for _, id := range gs.Params {
				ps.Append(lua.LNumber(id))
			}
			g.RawSetString("params", ps)
			g.RawSetString("lr", lua.LNumber(gs.LR))
			if gs.HasInitialLR {
				g.RawSetString("initial_lr", lua.LNumber(gs.InitialLR))
			}
			settingsTable(L, gs.Options, g)
			groups.Append(g)
		}
		out.RawSetString("param_groups", groups)
		L.Push(out)
		return 1
	}
}

func (env *Env) optimParameters(o stepper) lua.LGFunction {
	return func(L *lua.LState) int {
		out := L.NewTable()
		for _, p := range o.Params() {
			out.Append(env.push(L, p))
		}
		L.Push(out)
		return 1
	}
}

// checkOptimizer finds the optimizer behind a Lua optimizer table.
func (env *Env) checkOptimizer(L *lua.LState, fn string, n int) optimizer {
	o, found := objectOf(L.Get(n), optimizerField).(optimizer)
	if !found {
		argError(L, fn, "argument %d: expected an optimizer (optim.sgd, optim.adam, ...), got %s", n, luaTypeName(L.Get(n)))
	}
	return o
}
