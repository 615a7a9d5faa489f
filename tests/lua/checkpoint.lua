-- GGUF checkpoints (run without the sandbox: they write files).
local dir = os.getenv("GGLUA_TEST_TMP") or "/tmp"
local path = dir .. "/ckpt.gguf"

local net = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
local sd = net:state_dict()
sd.epoch = 7
sd.note = "hello"
sd.half = tensor({{1.5, -2}}, {dtype = "f16"})
tensor.save(path, sd)

local back = tensor.load(path)
assert(back.epoch == 7 and back.note == "hello")
assert(back.half:dtype() == "f16" and back.half:totable()[1][2] == -2)
for name, t in pairs(net:state_dict()) do
  local a, b = t:totable(), back[name]:totable()
  assert(#a == #b, name)
  assert(table.concat(t:shape(), "x") == table.concat(back[name]:shape(), "x"), name)
end
assert(back["0.bias"]:dim() == 1, "exact shapes, including 1-d")

local other = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
back.epoch, back.note, back.half = nil, nil, nil
other:load_state_dict(back)
local x = tensor{{1, 2, 3}}
assert(net(x):totable()[1][2] == other(x):totable()[1][2], "exact round trip")

-- A truncated file is an error, not a crash.
local f = io.open(path, "rb")
local bytes = f:read("*a")
f:close()
f = io.open(path, "wb")
f:write(bytes:sub(1, #bytes - 40))
f:close()
local ok, err = pcall(tensor.load, path)
assert(not ok and err:find("tensor.load"), err)
ok, err = pcall(tensor.save, path, {x = function() end})
assert(not ok and err:find("only tensors"), err)

-- Nested tables round-trip: a state_dict under a key comes back as a table.
local p2 = dir .. "/nested.gguf"
tensor.save(p2, {model = net:state_dict(), step = 3, opt = {lr = 0.1, inner = {deep = tensor{1, 2}}}})
local ck = tensor.load(p2)
assert(type(ck.model) == "table", "ck.model is a table")
assert(ck.step == 3 and ck.opt.lr == 0.1 and ck.opt.inner.deep:totable()[2] == 2)
assert(ck["model.1.weight"] == nil, "no flat copies")
local fresh = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
fresh:load_state_dict(ck.model)
assert(net(x):totable()[1][2] == fresh(x):totable()[1][2], "nested state_dict loads into a model")

-- A state_dict saved alone comes back flat, dotted keys and all.
tensor.save(p2, net:state_dict())
fresh = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
fresh:load_state_dict(tensor.load(p2))
assert(net(x):totable()[1][1] == fresh(x):totable()[1][1])

-- Number keys stay numbers, string keys strings; empty tables come back.
tensor.save(p2, {[1] = tensor{5}, ["1"] = {a = 1}, list = {10, 20, 30}, empty = {}, [2.5] = "x"})
ck = tensor.load(p2)
assert(ck[1]:totable()[1] == 5 and ck["1"].a == 1 and ck[2.5] == "x")
assert(#ck.list == 3 and ck.list[3] == 30, "a list stays a list")
assert(type(ck.empty) == "table" and next(ck.empty) == nil)

-- Numbers, strings and booleans come back exactly.
local nums = {0.1, 1e300, -0.0, 2^62, -(2^53) - 2, 5e-324, 1 / 0, -1 / 0, 1 / 3}
tensor.save(p2, {nums = nums, s = "bytes \255\1 \"q\" . dots", yes = true, no = false, nan = 0 / 0})
ck = tensor.load(p2)
for i, v in ipairs(nums) do
  assert(ck.nums[i] == v, string.format("number %d: %.17g vs %.17g", i, ck.nums[i], v))
end
assert(1 / ck.nums[3] == -1 / 0, "-0 keeps its sign")
assert(ck.s == "bytes \255\1 \"q\" . dots" and ck.yes == true and ck.no == false)
assert(ck.nan ~= ck.nan, "nan comes back as nan")

-- i32 tensors come back as i32, exactly: past 2^24 (where an f32 rounds
-- 16777217 to 16777216) and at int32's ends; a device tensor is read back
-- and saved too.
local big = 16777217
local labels = tensor({{big, 2147483647}, {-2147483648, -5}}, {dtype = "i32"})
local dev = to_gpu(tensor({big + 2, 3}, {dtype = "i32"}))
assert(dev:device() ~= "host")
tensor.save(p2, {labels = labels, split = {train = {ids = dev}}, w = tensor{0.5}})
ck = tensor.load(p2)
assert(ck.labels:dtype() == "i32" and ck.split.train.ids:dtype() == "i32", ck.labels:dtype())
local lv = ck.labels:totable()
assert(lv[1][1] == big and lv[1][2] == 2147483647 and lv[2][1] == -2147483648 and lv[2][2] == -5, lv[1][1])
assert(ck.split.train.ids:totable()[1] == big + 2 and ck.split.train.ids:totable()[2] == 3)
assert(ck.w:dtype() == "f32" and ck.w:totable()[1] == 0.5)

-- Names that collide, and NUL bytes, are errors, not a coin toss or a crash.
ok, err = pcall(tensor.save, p2, {["1.weight"] = tensor{1}, ["1"] = {weight = tensor{2}}})
assert(not ok and err:find('"1.weight"', 1, true), err)
ok, err = pcall(tensor.save, p2, {a = tensor{1}, ["a\0x"] = tensor{2}})
assert(not ok and err:find("NUL"), err)
ok, err = pcall(tensor.save, p2, {s = "a\0b"})
assert(not ok and err:find("NUL"), err)
ok, err = pcall(tensor.save, p2, {[true] = 1})
assert(not ok and err:find("key of type boolean"), err)

-- Resume: model, optimizer and scheduler saved mid-training carry on
-- exactly as if training had never stopped.
local function train(model, opt, sched, n)
  local xs, ys = tensor{{1, 2, 3}, {-1, 0, 2}}, tensor{{1, 0}, {0, 1}}
  for _ = 1, n do
    opt:zero_grad()
    local loss = with_grad_tape(function() return nn.mse_loss(model(xs), ys) end)
    backward(loss)
    opt:step()
    sched:step()
  end
end
local function make()
  local m = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
  m:load_state_dict(net:state_dict())
  local o = optim.adam(m:parameters(), {lr = 0.01})
  return m, o, optim.lr_scheduler.cosine(o, {t_max = 5, eta_min = 0.001})
end
local m1, o1, s1 = make()
train(m1, o1, s1, 3)
local p3 = dir .. "/resume.gguf"
tensor.save(p3, {model = m1:state_dict(), opt = o1:state_dict(), sched = s1:state_dict(), epoch = 3})
train(m1, o1, s1, 4)

ck = tensor.load(p3)
local m2 = nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)}
m2:load_state_dict(ck.model)
local o2 = optim.adam(m2:parameters(), {lr = 0.01})
o2:load_state_dict(ck.opt)
local s2 = optim.lr_scheduler.cosine(o2, {t_max = 5, eta_min = 0.001})
s2:load_state_dict(ck.sched)
assert(ck.epoch == 3 and s2:last_epoch() == 3)
train(m2, o2, s2, 4)
assert(o1:get_lr() == o2:get_lr(), "same rate: " .. o1:get_lr() .. " vs " .. o2:get_lr())
for name, t in pairs(m1:state_dict()) do
  local a, b = t:totable(), m2:state_dict()[name]:totable()
  for i = 1, #a do
    if type(a[i]) == "table" then
      for j = 1, #a[i] do assert(a[i][j] == b[i][j], name) end
    else
      assert(a[i] == b[i], name)
    end
  end
end

-- An empty tensor round-trips through safetensors, as PyTorch's; GGUF (ggml's) refuses it.
local pe = dir .. "/empty.safetensors"
tensor.save(pe, {a = tensor.zeros(0, 3), b = tensor{1}})
local back = tensor.load(pe)
assert(table.concat(back.a:size(), "x") == "0x3" and back.b:item() == 1)
local ok, err = pcall(tensor.save, dir .. "/empty.gguf", {a = tensor.zeros(0, 3)})
assert(not ok and tostring(err):find("has size 0", 1, true), tostring(err))
