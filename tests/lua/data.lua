-- data.loader and progress (data.csv is tested where files may be read).

local x = tensor{{1}, {2}, {3}, {4}, {5}}
local labels = {10, 20, 30, 40, 50}
local seen, batches = 0, 0
for xb, yb in data.loader(x, labels, {batch = 2}) do
  batches = batches + 1
  assert(xb:size(1) == #yb)
  for i = 1, #yb do assert(xb:totable()[i][1] * 10 == yb[i], "rows stay paired") end
  seen = seen + #yb
end
assert(seen == 5 and batches == 3)
batches = 0
for _ in data.loader(x, nil, {batch = 2, drop_last = true}) do batches = batches + 1 end
assert(batches == 2)

local function order(seed)
  tensor.manual_seed(seed)
  local out = {}
  for xb in data.loader(x, nil, {batch = 5, shuffle = true}) do
    for _, r in ipairs(xb:totable()) do out[#out + 1] = r[1] end
  end
  return table.concat(out, ",")
end
assert(order(1) == order(1), "deterministic under manual_seed")
local ok, err = pcall(data.loader, x, {1, 2}, {batch = 2})
assert(not ok and err:find("5 rows but y has 2"), err)
ok, err = pcall(data.loader, x, nil, {bacth = 2})
assert(not ok and err:find("unknown option bacth"), err)

local n = 0
local bar = progress(20)
for i in bar do
  n = n + 1
  bar:set{loss = 1 / i}
end
assert(n == 20)
n = 0
for xb, yb in progress(data.loader(x, labels, {batch = 2}), 3) do n = n + #yb end
assert(n == 5)
ok, err = pcall(data.csv, "/definitely/missing.csv")
assert(not ok and err:find("data.csv"), err)

-- data.csv (this file runs without the sandbox).
local path = (os.getenv("GGLUA_TEST_TMP") or "/tmp") .. "/d.csv"
local f = io.open(path, "w")
f:write("a,b,label\n1,2,0\n3.5,-4,1\n")
f:close()
local t = data.csv(path, {header = true})
assert(t:size(1) == 2 and t:size(2) == 3 and t:totable()[2][2] == -4)
f = io.open(path, "w")
f:write("1,2\n3,x\n")
f:close()
ok, err = pcall(data.csv, path)
assert(not ok and err:find("d.csv:2: field 2"), err)
f = io.open(path, "w")
f:write("1,2\n3\n")
f:close()
ok, err = pcall(data.csv, path)
assert(not ok and err:find("1 fields, expected 2"), err)
