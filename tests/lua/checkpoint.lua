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
assert(back["1.bias"]:dim() == 1, "exact shapes, including 1-d")

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
