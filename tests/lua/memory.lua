-- Work outside a tape does not grow memory without bound (issue [10] #16),
-- and what a script still holds stays readable when the pass pool is
-- compacted.

tensor.manual_seed(1)
local a, b = tensor.randn(64, 64), tensor.randn(64, 64)
local kept = no_grad(function() return a:matmul(b) end)      -- held across the loop
local want = kept:sum():item()
local w = tensor.param(tensor.randn(64, 8))
local act = with_grad_tape(function() return a:matmul(w) end) -- last step's activation
local peak = 0
for i = 1, 12000 do                                           -- 12000 x 16 KiB = 192 MiB of results
  local y = no_grad(function() return a:matmul(b) end)
  if i % 50 == 0 then sync() end                              -- evaluation reads its results
  if i % 500 == 0 then peak = math.max(peak, residency.stats().buffer_bytes) end
end
assert(peak < 100 * 2^20, "pass pool peaked at " .. peak .. " bytes")
assert(math.abs(kept:sum():item() - want) < 1e-3 * math.abs(want), "a held value survives")
assert(act:shape()[2] == 8 and act:sum():item() == act:sum():item(), "an activation the script holds survives")
