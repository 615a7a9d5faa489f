-- Residency as a script sees it. Run by tests/lua_test.go in a fresh runtime.

local x = tensor{{1, 2}, {3, 4}}
assert(x:scope() == "host", x:scope())

local w = to_gpu(x, "persistent")
local w2 = to_gpu(x, {scope = "persistent"})
local a = to_gpu(x)
assert(w:scope() == "persistent" and w2:scope() == "persistent")
assert(a:scope() == "pass", "to_gpu defaults to the pass pool")
assert(w:device() == device.current())

local s = residency.stats()
for _, k in ipairs{"buffer_bytes", "n_buffers", "p_buffer_bytes", "p_n_buffers", "total_buffer_bytes",
                   "pass_gen", "persistent_gen", "h2d_bytes", "d2h_bytes"} do
  assert(type(s[k]) == "number", "stats() lacks " .. k)
end
assert(s.total_buffer_bytes == s.buffer_bytes + s.p_buffer_bytes)
assert(s.h2d_bytes >= 3 * 16, "three uploads of 16 bytes")

residency.reset("pass")
local s2 = residency.stats()
assert(s2.buffer_bytes == 0 and s2.p_buffer_bytes == s.p_buffer_bytes)
assert(s2.pass_gen == s.pass_gen + 1 and s2.persistent_gen == s.persistent_gen)

-- The weight survived; the activation's buffer is gone and reading it says so.
assert(w:totable()[2][1] == 3)
local ok, err = pcall(function() return a:totable() end)
assert(not ok and err:find("reset of the pass pool"), err)

-- The budget counts both pools and refuses with the figures.
local prev = residency.limit(residency.stats().total_buffer_bytes + 1024)
local sandboxed = io == nil
assert(prev == (sandboxed and 2 ^ 31 or 0), "the default budget: " .. prev)
ok, err = pcall(to_gpu, tensor.zeros(2048, 2048)) -- more than the cached pass buffers hold
assert(not ok and err:find("budget exceeded"), err)
if sandboxed then
  -- A sandboxed script may lower its budget, never lift it past its host's.
  ok, err = pcall(residency.limit, 0)
  assert(not ok and err:find("at most the 2147483648 bytes its host gave"), err)
  ok, err = pcall(residency.limit, 2 ^ 31 + 1)
  assert(not ok and err:find("at most"), err)
end
residency.limit(prev)

-- Bad input is a Lua error naming the function.
ok, err = pcall(to_gpu, x, "global")
assert(not ok and err:find("to_gpu") and err:find("unknown scope"), err)
ok, err = pcall(to_gpu, x, {scop = "pass"})
assert(not ok and err:find("unknown option"), err)
ok, err = pcall(residency.reset, "everything")
assert(not ok and err:find("residency.reset"), err)
ok, err = pcall(to_gpu, 42)
assert(not ok and err:find("expected a tensor, got number"), err)
ok, err = pcall(tensor.zeros, 2, -1)
assert(not ok and err:find("tensor.zeros"), err)

residency.reset()
assert(residency.stats().total_buffer_bytes == 0)
ok, err = pcall(function() return w:totable() end)
assert(not ok and err:find("reset of the persistent pool"), err)

-- Values that outlive their step move, at the pass reset, to a home that
-- survives it: data made before the loop, a metric kept in a table, an RNN
-- state carried on with detach(), last step's loss once read. A step's
-- other activations go with it. The reference is the same recurrence in
-- plain Lua.
local wv = {{0.5, -0.25}, {0.125, 1}}
local wr = to_gpu(tensor.param(tensor(wv)), {scope = "persistent"})
local data = to_gpu(tensor{{1, 2}, {3, 4}}) * 0.5 -- made before the loop
local h = tensor.zeros(2, 2)
local metrics, first_loss, activation = {}, nil, nil
local rh, rlosses = {{0, 0}, {0, 0}}, {}
for step = 1, 3 do
  local loss = with_grad_tape(function()
    local out = (h:matmul(wr) + data):tanh()
    activation = out * 1
    h = out:detach() -- carried into the next step
    return out:sum()
  end)
  backward(loss)
  metrics[step] = loss:detach() * 2 -- outside the tape
  if step == 1 then first_loss = loss; loss:item() end
  local nh, sum = {{}, {}}, 0
  for i = 1, 2 do
    for j = 1, 2 do
      nh[i][j] = math.tanh(rh[i][1] * wv[1][j] + rh[i][2] * wv[2][j] + ({{1, 2}, {3, 4}})[i][j] * 0.5)
      sum = sum + nh[i][j]
    end
  end
  rh, rlosses[step] = nh, sum
end
with_grad_tape(function() end) -- one more pass reset
local function near(a, b) return math.abs(a - b) < 1e-5 * math.max(1, math.abs(b)) end
local got = h:totable()
for i = 1, 2 do
  for j = 1, 2 do assert(near(got[i][j], rh[i][j]), "the carried state " .. got[i][j] .. " vs " .. rh[i][j]) end
end
for step = 1, 3 do
  assert(near(metrics[step]:item(), 2 * rlosses[step]), "metric " .. step)
end
assert(near(first_loss:item(), rlosses[1]), "a loss read stays readable")
assert(data:totable()[2][2] == 2, "data made before the loop")
ok, err = pcall(function() return activation:totable() end)
assert(not ok and err:find("reset of the pass pool"), "an activation goes with its step: " .. tostring(err))

-- A value promoted to the persistent pool outlives a later reset of that
-- pool too (read to the host first), as a host parameter's gradient does,
-- and training goes on after it.
local kept = to_gpu(tensor{1, 2, 3}) * 2
with_grad_tape(function() end) -- promoted
assert(kept:scope() == "persistent", kept:scope())
residency.reset("persistent")
assert(table.concat(kept:totable(), ",") == "2,4,6", "a kept value survives a persistent reset")
local hp = tensor.param(tensor{1, 2, 3})
local function hstep() backward(with_grad_tape(function() return (hp * hp):sum() end)) end
hstep()
residency.reset()
assert(table.concat(hp.grad:totable(), ",") == "2,4,6", "a host parameter's gradient survives a full reset")
hstep()
assert(table.concat(hp.grad:totable(), ",") == "4,8,12", "and accumulates after it")

-- A compaction whose copies the budget refuses reads them to the host.
residency.reset()
local cw = to_gpu(tensor.randn(512, 512) * 0.04, "persistent")
local cprev = residency.limit(70e6)
local cx = to_gpu(tensor.randn(128, 512)) * 1
no_grad(function()
  for _ = 1, 300 do
    cx = cx:matmul(cw):tanh()
    cx:totable()
  end
end)
residency.limit(cprev)
assert(cx:size(1) == 128)
