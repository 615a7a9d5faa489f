-- float(), half(), bfloat16(), to(dtype): a copy rounded to the dtype
-- (values from PyTorch 1.13: torch.tensor([1/3, 2/3, 1e-8, 70000.]).half()
-- etc.), computed on in f32, the gradient passed back unchanged.
local x = tensor{1 / 3, 2 / 3, 1e-8, 70000}
local h, b = x:half(), x:bfloat16()
assert(h:dtype() == "f16" and b:dtype() == "bf16" and x:to("f16"):dtype() == "f16")
local hv, bv = h:totable(), b:totable()
assert(hv[1] == 0.333251953125 and hv[2] == 0.66650390625, hv[1])
assert(hv[3] == 0, "1e-8 underflows in f16, as in PyTorch: " .. hv[3])
assert(hv[4] == 1 / 0, "70000 overflows f16 to inf, as in PyTorch")
assert(bv[1] == 0.333984375 and bv[4] == 70144, bv[4])
assert(h:float():dtype() == "f32" and h:float():totable()[1] == 0.333251953125)
assert((h * 2):totable()[1] == 0.66650390625, "ops compute on the rounded values")
assert(x:to("f32"):dtype() == "f32")

local p = tensor.param(tensor{1, 2})
with_grad_tape(function() (p:half() * tensor{3, 4}):sum():backward() end)
assert(p.grad:totable()[1] == 3 and p.grad:totable()[2] == 4, "the gradient passes through")

for _, bad in ipairs({"q4", "double"}) do
  local ok, err = pcall(function() return x:to(bad) end)
  assert(not ok and err:find("dtype"), tostring(err))
end
