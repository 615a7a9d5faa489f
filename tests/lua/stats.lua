-- var, std, logsumexp, norm, prod, cumsum, sort, argsort, topk, gather
-- from Lua (values and gradients are checked against PyTorch in core's
-- TestStatsAsTorch).
local function near(a, b, msg) assert(math.abs(a - b) < 1e-4 * (1 + math.abs(b)), msg .. ": " .. a .. " vs " .. b) end
local x = tensor{{1, 2, 3}, {4, -5, 6}}
near(x:var():item(), 70.833333 / 5, "var of all, unbiased")
near(x:var(2):totable()[1], 1, "var along dim 2")
near(x:var(2, false):totable()[1], 2 / 3, "biased")
near(x:var(2, {correction = 0, keepdim = true}):totable()[1][1], 2 / 3, "options")
near(x:std(2):totable()[2], math.sqrt(34.333333), "std")
near(tensor{{1000, 1000}}:logsumexp(2):item(), 1000 + math.log(2), "logsumexp is stable")
near(x:norm():item(), math.sqrt(91), "2-norm of all")
near(x:norm(1, 2):totable()[2], 15, "1-norm along dim 2")
near(x:norm(math.huge, 2):totable()[2], 6, "inf-norm")
near(x:prod():item(), -720, "prod of all")
near(x:prod(1):totable()[2], -10, "prod along dim 1")
local c = x:cumsum(2):totable()
assert(c[1][3] == 6 and c[2][2] == -1, "cumsum")
local v, i = tensor{3, 1, 2, 1}:sort()
assert(table.concat(v:totable(), ",") == "1,1,2,3" and table.concat(i:totable(), ",") == "2,4,3,1", "stable sort, 1-based indices")
v, i = tensor{3, 1, 2, 1}:sort(1, true)
assert(table.concat(i:totable(), ",") == "1,3,2,4", "descending")
assert(table.concat(tensor{0 / 0, 1, -1}:argsort():totable(), ",") == "3,2,1", "NaN sorts last")
v, i = tensor{{3, 1, 2, 5}}:topk(2)
assert(table.concat(v:totable()[1], ",") == "5,3" and table.concat(i:totable()[1], ",") == "4,1", "topk")
v = tensor{{3, 1, 2, 5}}:topk(2, 2, false)
assert(table.concat(v:totable()[1], ",") == "1,2", "smallest")
local g = x:gather(2, {{3, 1}, {2, 2}}):totable()
assert(g[1][1] == 3 and g[1][2] == 1 and g[2][1] == -5, "gather")

-- Gradients flow through sort and gather.
local w = tensor.param(tensor{3, 1, 2})
with_grad_tape(function()
  local s = w:sort()
  local loss = (s * tensor{1, 10, 100}):sum()
  loss:backward()
end)
assert(table.concat(w.grad:totable(), ",") == "100,1,10", "sort's gradient goes back to each value's place")

for _, bad in ipairs({
  function() return x:norm(0) end, function() return x:norm("nuc") end, function() return x:topk(4) end,
  function() return x:gather(2, {{4}}) end, function() return x:var(3) end, function() return x:cumsum() end,
}) do
  local ok, err = pcall(bad)
  assert(not ok and type(err) == "string", tostring(err))
end

-- index_add's alpha scales the source, as PyTorch's; an unknown option is an error.
local scaled = tensor{{1, 2}, {3, 4}}:index_add(1, {2}, tensor{{10, 20}}, {alpha = 0.5}):totable()
assert(scaled[2][1] == 8 and scaled[2][2] == 14 and scaled[1][1] == 1, "alpha")
local ok2, err2 = pcall(function() return tensor{{1, 2}}:index_add(1, {1}, tensor{{1, 1}}, {beta = 2}) end)
assert(not ok2 and err2:find("beta"), tostring(err2))
