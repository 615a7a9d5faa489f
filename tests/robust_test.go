package tests

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/runtime"
)

// TestEveryFunctionSurvivesBadArguments calls every tensor method and
// library function with wrong arguments. Each call must end in a value or a
// Lua error that names the function; nothing may crash the process, and the
// runtime must still train afterwards.
func TestEveryFunctionSurvivesBadArguments(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoString(context.Background(), `
local x = tensor{{1, 2, 3}, {4, 5, 6}}
local bad = {
  {}, {nil}, {"str"}, {{}}, {{1, 2}}, {-1}, {0}, {1e12}, {0/0}, {true},
  {x}, {x, "str"}, {x, -7}, {x, 99}, {x, 1e12}, {x, {}}, {x, tensor{1, 2}}, {x, x},
  {x, 1, 99}, {x, 2, 0, 5}, {x, {1, 2, 99}}, {x, {scope = 3}}, {x, {dtype = "q4"}},
  {tensor{1}, tensor{{1}}}, {tensor{5}, 0}, {function() end},
}
local libs = {tensor = tensor, nn = nn, optim = optim, residency = residency, data = data, device = device}
local calls, errors = 0, 0
for libname, lib in pairs(libs) do
  for name, f in pairs(lib) do
    if type(f) == "function" and name ~= "manual_seed" and name ~= "use" and name ~= "reset" and name ~= "limit" then
      for _, args in ipairs(bad) do
        calls = calls + 1
        local ok, err = pcall(f, unpack(args))
        if not ok then
          errors = errors + 1
          assert(type(err) == "string" and #err > 0, libname .. "." .. name .. " raised a non-string error")
          assert(not err:find("runtime error") and not err:find("nil pointer") and not err:find("goroutine"),
            libname .. "." .. name .. " crashed inside: " .. err)
        end
      end
    end
  end
end
for _, g in ipairs{"to_gpu", "to_cpu", "backward", "with_grad_tape", "no_grad", "progress"} do
  for _, args in ipairs(bad) do
    local ok, err = pcall(_G[g], unpack(args))
    assert(ok or not err:find("runtime error"), g .. ": " .. tostring(err))
  end
end
assert(calls > 500 and errors > 300)

-- Still usable: a small model trains. (x itself may have been moved or
-- reset by the calls above, which is their right: use a fresh input.)
x = tensor{{1, 2, 3}, {4, 5, 6}}
local m = nn.Linear(3, 1)
local opt = optim.sgd(m:parameters(), {lr = 0.01})
for _ = 1, 5 do
  opt:zero_grad()
  local loss = with_grad_tape(function() return nn.mse_loss(m(x), tensor{{1}, {2}}) end)
  backward(loss)
  opt:step()
end
`)
	require.NoError(t, err)
}

func TestOperatorsRefuseNonTensors(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Threads: 1, Sandbox: true, Stdout: io.Discard})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.DoString(context.Background(), `
local x = tensor{1, 2}
for _, v in ipairs{"a", {}, true, function() end} do
  for _, f in ipairs{
    function() return x + v end, function() return v - x end, function() return x * v end,
    function() return x / v end, function() return x ^ v end, function() return v ^ x end,
  } do
    local ok, err = pcall(f)
    assert(not ok and not err:find("runtime error"), tostring(err))
  end
end
local p = (x ^ x):totable() -- tensor ^ tensor, as PyTorch
assert(p[1] == 1 and p[2] == 4, "tensor ^ tensor")
`)
	require.NoError(t, err)
}
