-- What used to reach the user as Go panic text (issue [11] #5) is a Lua
-- error naming the function.
local p = tensor.param(tensor{1, 2})
local cases = {
  {function() return optim.adam({p}, {betas = 0.9}) end, "betas"},
  {function() return optim.sgd({p}, {betas = {0.9, 0.99}}) end, "unknown option betas"},
  {function() return optim.adam({p}, {betas = {0.9}}) end, "betas"},
  {function() return optim.adam({p}, {lr = "x"}) end, "lr"},
}
for i, c in ipairs(cases) do
  local ok, err = pcall(c[1])
  assert(not ok, "case " .. i .. " did not fail")
  assert(err:find(c[2], 1, true) and not err:find("runtime error"), "case " .. i .. ": " .. err)
end

-- coroutine.yield inside with_grad_tape, no_grad or autocast is an error (Lua 5.1
-- refuses a yield across a C call), and the runtime goes on working.
for _, wrap in ipairs{with_grad_tape, no_grad, autocast} do
  local co = coroutine.create(function()
    return wrap(function() coroutine.yield(1); return 2 end)
  end)
  local ok, err = coroutine.resume(co)
  assert(not ok and tostring(err):find("yield"), tostring(err))
  assert(coroutine.status(co) == "dead")
end
local l = with_grad_tape(function() return (p * p):sum() end)
assert(backward(l)[p]:totable()[2] == 4, "the tape still works")
-- An error inside the tape keeps the caller's locals (gopher-lua #448).
local n = 0
local function inc(f) pcall(with_grad_tape, f); n = n + 1 end
inc(function() end) inc(function() error("x") end) inc(function() end)
assert(n == 3, "n is " .. n)
