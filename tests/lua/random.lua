-- Random tensors from the seeded generator: the same seed draws the same
-- values; ranges, permutations and sampling rules hold.
tensor.manual_seed(1)
local a = tensor.randint(3, 7, {1000})
tensor.manual_seed(1)
local b = tensor.randint(3, 7, {1000})
assert(a:eq(b):all():item() == 1, "same seed, same draws")
local seen = {}
for _, v in ipairs(a:totable()) do
  assert(v >= 3 and v < 7 and v == math.floor(v), "randint in [3, 7): " .. v)
  seen[v] = true
end
assert(seen[3] and seen[6], "both ends drawn")
assert(table.concat(tensor.randint(5, {2, 3}):shape(), "x") == "2x3")

local p = tensor.randperm(50):totable()
table.sort(p)
for i = 1, 50 do assert(p[i] == i, "randperm is a permutation of 1..n") end

local draws = tensor.multinomial(tensor{0, 1, 0, 3}, 2):totable()
assert((draws[1] == 2 and draws[2] == 4) or (draws[1] == 4 and draws[2] == 2), "without replacement, only weighted categories")
local many = tensor.multinomial(tensor{1, 0, 1}, 200, true):totable()
local counts = {0, 0, 0}
for _, c in ipairs(many) do counts[c] = counts[c] + 1 end
assert(counts[2] == 0 and counts[1] > 60 and counts[3] > 60, "with replacement, about half each")
assert(table.concat(tensor.multinomial(tensor{{1, 1}, {1, 0}}, 1):shape(), "x") == "2x1")

local bern = tensor.bernoulli(tensor.full({1000}, 0.25)):sum():item()
assert(bern > 180 and bern < 320, "bernoulli(0.25) " .. bern)
assert(tensor.bernoulli(tensor{0, 1}):totable()[2] == 1)

local x = tensor.zeros(2000)
x:normal_(3, 2)
local m = x:mean():item()
assert(math.abs(m - 3) < 0.2 and math.abs(x:std():item() - 2) < 0.2, "normal_(3, 2)")
x:uniform_(-1, 1)
assert(x:min():item() >= -1 and x:max():item() < 1, "uniform_ range")

assert(tensor.zeros_like(x):sum():item() == 0 and tensor.ones_like(x):sum():item() == 2000)
assert(tensor.full_like(tensor.zeros(2, 2), 7):totable()[2][2] == 7)
assert(table.concat(tensor.randn_like(tensor.zeros(3, 4)):shape(), "x") == "3x4")

for _, bad in ipairs({
  function() return tensor.randint(5, 5, {2}) end, function() return tensor.randint(0, 2^30, {2}) end,
  function() return tensor.randperm(-1) end, function() return tensor.multinomial(tensor{1, 0}, 2) end,
  function() return tensor.multinomial(tensor{-1, 2}, 1) end, function() return tensor.bernoulli(tensor{1.5}) end,
  function() return tensor.zeros(2):normal_(0, -1) end, function() return tensor.zeros(2):uniform_(1, 0) end,
}) do
  local ok, err = pcall(bad)
  assert(not ok and type(err) == "string", tostring(err))
end
