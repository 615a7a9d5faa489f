-- The tensor userdata: construction, shape queries, printing, dtypes.

local x = tensor{{1, 2, 3}, {4, 5, 6}}
assert(x:dim() == 2 and x:numel() == 6)
assert(x:size(1) == 2 and x:size(2) == 3, "sizes are 1-based dims")
local sh = x:shape()
assert(#sh == 2 and sh[1] == 2 and sh[2] == 3)
assert(tensor.numel(x) == 6, "methods are also tensor.fn(x)")
assert(x:dtype() == "f32")

local ok, err = pcall(x.size, x, 3)
assert(not ok and err:find("dim 3 out of range"), err)
ok, err = pcall(tensor, {{1, 2}, {3}})
assert(not ok and err:find("ragged"), err)
ok, err = pcall(tensor, {{1, "a"}})
assert(not ok and err:find("expected a number"), err)
ok, err = pcall(tensor, {{}, {1}})
assert(not ok and err:find("ragged"), err)

local s = tostring(to_gpu(x))
assert(s:find("[tensor f32 2x3 " .. device.current() .. " pass]", 1, true), s)
assert(s:find("4, 5, 6"), s)

local big = tostring(tensor.zeros(40, 40))
assert(big:find("%.%.%."), "more than 1000 elements are summarised")

for _, dt in ipairs{"f16", "bf16"} do
  local h = to_gpu(x, {dtype = dt, scope = "persistent"})
  assert(h:dtype() == dt)
  local back = to_cpu(h):totable()
  assert(back[2][3] == 6, dt)
end
ok, err = pcall(to_gpu, x, {dtype = "f64"})
assert(not ok and err:find("unknown dtype"), err)
assert(tensor(2.5):item() == 2.5)
