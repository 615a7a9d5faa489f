-- autocast: products from bf16-rounded operands, as torch.autocast does;
-- everything else, and the weights, stay f32.

tensor.manual_seed(7)
local x, w = tensor.randn(6, 16), tensor.randn(5, 16)
local function rounded(t) return t:to("bf16"):to("f32") end
local function maxdiff(a, b) return (a - b):abs():max():item() end

-- The product is the f32 product of the rounded operands, which differs
-- from the f32 product; results come back as fn returns them.
local y, again = autocast(function() return x:matmul(w:t()), 42 end)
assert(again == 42, "autocast returns fn's results")
assert(y:dtype() == "f32", "a product's result is f32 (docs/PYTORCH.md)")
-- (On CUDA the product itself comes out of cuBLAS rounded to bf16 too.)
local ref = rounded(x):matmul(rounded(w):t())
assert(((y - ref):abs() - ref:abs() * 2^-8 - 1e-5):max():item() <= 0, "the operands are rounded to bf16")
assert(maxdiff(y, x:matmul(w:t())) > 1e-3, "and that is not the f32 product")
assert(maxdiff(autocast("bf16", function() return x:matmul(w:t()) end), y) == 0, "bf16 is the default")

-- "f32" turns it off inside; the outer setting comes back, also after an error.
autocast(function()
  local off = autocast("f32", function() return x:matmul(w:t()) end)
  assert(not pcall(autocast, "f32", function() error("boom") end))
  assert(maxdiff(x:matmul(w:t()), y) == 0, "inside autocast (also after an error in a nested one) the product is rounded")
  assert(maxdiff(off, y) > 1e-3, "f32 turns autocast off inside")
end)
assert(maxdiff(x:matmul(w:t()), y) > 1e-3, "off again outside")

-- device.use inside autocast: the new engine carries on under it, and is
-- back to f32 once the block ends (or fails).
-- (Results of the old engine do not move: the reference is made afresh.)
local function rounds() return maxdiff(x:matmul(w:t()), rounded(x):matmul(rounded(w):t())) == 0 end
autocast(function()
  assert(rounds())
  device.use(device.current())
  assert(rounds(), "device.use inside autocast keeps it")
end)
assert(not rounds(), "off after the block")
assert(not pcall(autocast, function() device.use(device.current()); error("boom") end))
assert(not rounds(), "off after a failed block")

-- dot is not on autocast's list (torch.dot), matmul of two vectors is.
local u, v = tensor.randn(16), tensor.randn(16)
local d32 = u:dot(v):item()
assert(autocast(function() return u:dot(v) end):item() == d32, "dot stays f32 under autocast")
assert(autocast(function() return u:matmul(v) end):item() ~= d32, "matmul of vectors rounds")

-- Errors name autocast and what it takes.
local ok, err = pcall(autocast, "f16", function() end)
assert(not ok and err:find("autocast") and err:find("f16"), err)
ok, err = pcall(autocast, "bf16")
assert(not ok and err:find("autocast"), err)

-- Training under autocast: the loss follows f32's within bf16's noise, the
-- weights and their gradients stay f32.
local function train(cast)
  tensor.manual_seed(3)
  local model = nn.Sequential{nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)}
  local opt = optim.adam(model:parameters(), {lr = 1e-2})
  local data = tensor.randn(64, 16)
  local labels = {}
  for i = 1, 64 do labels[i] = (i % 4) + 1 end
  local losses = {}
  for step = 1, 20 do
    opt:zero_grad()
    local loss = with_grad_tape(function()
      local function f() return nn.cross_entropy(model(data), labels) end
      return cast and autocast(f) or f()
    end)
    backward(loss)
    opt:step()
    losses[step] = loss:item()
  end
  for _, p in ipairs(model:parameters()) do
    assert(p:dtype() == "f32" and p.grad:dtype() == "f32", "weights and gradients stay f32")
  end
  return losses
end
local f32, bf16 = train(false), train(true)
local same = true
for i = 1, #f32 do
  assert(math.abs(f32[i] - bf16[i]) < 0.03 * f32[i], string.format("step %d: loss %g under autocast, %g in f32", i, bf16[i], f32[i]))
  same = same and f32[i] == bf16[i]
end
assert(not same, "autocast changed nothing")
assert(bf16[#bf16] < 0.7 * bf16[1], "the loss falls under autocast")
print("autocast ok")
