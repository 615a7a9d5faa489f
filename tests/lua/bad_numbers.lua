-- Sizes and counts that are not whole numbers, NaN or infinite are errors
-- naming the function, never truncated (issue [10], item 15).

local function fails(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern), tostring(err))
end

fails("tensor.eye: argument 1: expected an integer, got 2.5", tensor.eye, 2.5)
fails("tensor.eye: argument 2: expected an integer, got 2.5", tensor.eye, 2, 2.5)
fails("tensor.eye: argument 1: expected an integer, got NaN", tensor.eye, 0 / 0)
fails("tensor.eye: argument 1: expected an integer, got %+Inf", tensor.eye, 1 / 0)
assert(tensor.eye(2, 3):size(2) == 3)

fails("tensor.zeros: size 1 must be an integer", tensor.zeros, 2.5)
fails("tensor.full: size 1 must be an integer", tensor.full, {2.5}, 1)
fails("tensor.ones: size 2 must be an integer", tensor.ones, 2, 1.5)

fails("tensor.arange: start, stop and step must be finite", tensor.arange, 0 / 0)
fails("tensor.arange: start, stop and step must be finite", tensor.arange, 1 / 0)
fails("tensor.arange: start, stop and step must be finite", tensor.arange, -1 / 0, 3)
fails("tensor.arange: start, stop and step must be finite", tensor.arange, 0, 5, 1 / 0)
fails("tensor.arange: start, stop and step must be finite", tensor.arange, 0, 5, 0 / 0)
assert(#tensor.arange(0, 5, 2):totable() == 3)
