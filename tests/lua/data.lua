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
batches = 0
for xb, yb in data.loader(x, {batch = 2, drop_last = true}) do -- no targets: options second
  assert(yb == nil and xb:shape()[1] == 2)
  batches = batches + 1
end
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

-- A loader is re-iterable: each for loop over it is one epoch.
local ld = data.loader(x, labels, {batch = 2})
assert(#ld == 3, #ld)
for epoch = 1, 3 do
  local n, rows = 0, 0
  for xb, yb in ld do
    n, rows = n + 1, rows + #yb
    assert(xb:size(1) == #yb)
  end
  assert(n == 3 and rows == 5, "epoch " .. epoch .. ": " .. n .. " batches, " .. rows .. " rows")
end
assert(#data.loader(x, nil, {batch = 2, drop_last = true}) == 2)
assert(#data.loader(x, nil, {batch = 5, drop_last = true}) == 1)
assert(#data.loader(x, nil, {batch = 6, drop_last = true}) == 0)
assert(#data.loader(x, nil, {batch = 6}) == 1)
assert(#data.loader(labels, nil, {batch = 4}) == 2, "a table source")
-- A loop that stops early leaves the rest of the epoch to the next loop;
-- reset() drops it. (The loops below do not start with a bare break:
-- gopher-lua mis-jumps a generic for whose body is only `break`.)
n = 0
for _ in ld do n = n + 1 if n == 1 then break end end
n = 0
for _ in ld do n = n + 1 end
assert(n == 2, n)
n = 0
for _ in ld do n = n + 1 if n == 2 then break end end
ld:reset()
n = 0
for _ in ld do n = n + 1 end
assert(n == 3, n)
-- Called directly, it goes through the epoch, returns nothing at its end,
-- then starts again.
local m = data.loader(x, nil, {batch = 2})
local b1, b2, b3, b4 = m(), m(), m(), m()
assert(b1 and b2 and b3 and b4 == nil)
assert(b3:size(1) == 1 and m():totable()[1][1] == 1)
assert(tostring(ld):find("3 batches per epoch"), tostring(ld))

-- Shuffled: every epoch is a new permutation, the same under the same seed.
local rows = {}
for i = 1, 20 do rows[i] = {i} end
local big = tensor(rows)
local function epochs(seed)
  tensor.manual_seed(seed)
  local s = data.loader(big, nil, {batch = 3, shuffle = true})
  local out = {}
  for e = 1, 3 do
    local perm, seen = {}, {}
    for xb in s do
      for _, r in ipairs(xb:totable()) do
        assert(not seen[r[1]], "a row twice in one epoch")
        seen[r[1]] = true
        perm[#perm + 1] = r[1]
      end
    end
    assert(#perm == 20, #perm)
    out[e] = table.concat(perm, ",")
  end
  return out
end
local e1, e2 = epochs(3), epochs(3)
for e = 1, 3 do assert(e1[e] == e2[e], "epoch " .. e .. " reproducible under manual_seed") end
assert(e1[1] ~= e1[2] and e1[2] ~= e1[3] and e1[1] ~= e1[3], "reshuffled every epoch")

-- progress over a loader: one epoch each time, its total #loader.
for epoch = 1, 2 do
  n = 0
  for xb, yb in progress(ld) do n = n + #yb end
  assert(n == 5, n)
end

-- progress counts must be whole numbers, at least 0.
n = 0
for _ in progress(0) do n = n + 1 end
assert(n == 0)
for _, bad in ipairs{0 / 0, 2.5, -1, 1 / 0, -1 / 0} do
  ok, err = pcall(progress, bad)
  assert(not ok and err:find("progress: argument 1"), tostring(bad) .. ": " .. tostring(err))
end
ok, err = pcall(progress, function() end, 0 / 0)
assert(not ok and err:find("progress: argument 2"), err)
ok, err = pcall(progress, ld, -2)
assert(not ok and err:find("at least 0"), err)
ok, err = pcall(progress, "x")
assert(not ok and err:find("expected a count, a data.loader or an iterator function"), err)

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
