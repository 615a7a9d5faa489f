-- Run by tests/dist_test.go under mpirun -np 2: dist's collectives give the
-- values torch.distributed's would. Every rank prints "ok <what>" lines;
-- an assertion failure is a Lua error (exit status 1).
dist.init()
local r, w = dist.rank(), dist.world_size()
assert(w == 2, "world size " .. w)
assert(dist.backend() == "mpi", tostring(dist.backend()))

local function same(t, want, what)
  local got = t:totable()
  assert(#got == #want, what .. ": length")
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) < 1e-6, string.format("%s: [%d] = %g, want %g", what, i, got[i], want[i]))
  end
  print("ok " .. what)
end

-- rank 0 holds {1, 2, 3}, rank 1 {10, 20, 30}
local function mine() return tensor{1, 2, 3} * (r == 0 and 1 or 10) end
same(dist.all_reduce(mine()), {11, 22, 33}, "sum")
same(dist.all_reduce(mine(), "avg"), {5.5, 11, 16.5}, "avg")
same(dist.all_reduce(mine(), "max"), {10, 20, 30}, "max")
same(dist.all_reduce(mine(), "min"), {1, 2, 3}, "min")
-- in place, on a device tensor of the CPU backend too
local d = to_gpu(mine(), "persistent")
dist.all_reduce(d)
same(d, {11, 22, 33}, "in place on the device")
same(dist.broadcast(mine(), 1), {10, 20, 30}, "broadcast from 1")
same(dist.broadcast(mine()), {1, 2, 3}, "broadcast from 0")
local g = dist.all_gather(tensor{{r, r + 0.5}})
assert(#g == 2)
same(g[1]:reshape(2), {0, 0.5}, "all_gather rank 0")
same(g[2]:reshape(2), {1, 1.5}, "all_gather rank 1")
assert(g[2]:shape()[1] == 1 and g[2]:shape()[2] == 2, "all_gather keeps the shape")
dist.barrier()
local ok, err = pcall(dist.broadcast, mine(), 2)
assert(not ok and tostring(err):find("src 2 is not a rank"), tostring(err))
ok, err = pcall(dist.all_reduce, mine(), "prod")
assert(not ok and tostring(err):find("unknown reduction"), tostring(err))
-- a result the tape recorded may be read by its gradient (relu's reads its
-- result): reducing it in place is refused, a copy is reduced
local x = tensor.param(tensor{-1, 2} * (r == 0 and 1 or -1))
local y
local loss = with_grad_tape(function() y = x:relu(); return y:sum() end)
ok, err = pcall(dist.all_reduce, y)
assert(not ok and tostring(err):find("the tape needs"), tostring(err))
backward(loss)
same(x.grad, r == 0 and {0, 1} or {1, 0}, "relu's gradient after a refused all_reduce")
same(dist.all_reduce(y:detach():clone()), {1, 2}, "a copy of it reduced")
print("ok errors")
