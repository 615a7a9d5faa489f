-- Functional forms and modules of torch.nn that reshape or mask rather
-- than compute: nn.pad (F.pad), nn.dropout2d / nn.Dropout2d and
-- nn.Upsample (nn.interpolate is in nn_conv.go).
local nn = nn

-- check raises an error at the line of the script that called the
-- function calling check.
local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 4) end
end

-- nn.dropout2d(x [, p=0.5 [, training=true]]) zeroes whole channels (dim 2
-- of an [N, C, H, W] x) with probability p and scales the rest by
-- 1/(1-p), as F.dropout2d; nn.Dropout2d([p=0.5]) is its module (off in
-- eval()). A 3-d input is refused: PyTorch 1.13 reads it as (N, C, L)
-- and warns that later versions read it as (C, H, W).
function nn.dropout2d(x, p, training)
  local fn = "nn.dropout2d"
  p = p == nil and 0.5 or p
  check(type(x) == "userdata", fn, "expected a tensor, got %s", type(x))
  check(type(p) == "number" and p >= 0 and p <= 1, fn, "p must be in [0, 1], got %s", tostring(p))
  check(x:dim() == 4, fn, "expected an [N, C, H, W] input, got %d dims (a 3-d input means (N, C, L) in PyTorch 1.13 and (C, H, W) later: reshape it)", x:dim())
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local keep = tensor.rand(x:size(1), x:size(2), 1, 1):ge(p)
  return x * keep * (1 / (1 - p))
end

nn.Dropout2d = nn.Module:extend("Dropout2d")
function nn.Dropout2d:init(p)
  p = p == nil and 0.5 or p
  check(type(p) == "number" and p >= 0 and p <= 1, "nn.Dropout2d", "p must be in [0, 1], got %s", tostring(p))
  self.p = p
end
function nn.Dropout2d:forward(x) return nn.dropout2d(x, self.p, self.training) end
function nn.Dropout2d:describe() return string.format("Dropout2d(p=%g)", self.p) end

-- nn.pad(x, pad [, mode="constant" [, value=0]]) is F.pad: pad lists
-- {before, after} amounts for the last dim, then the one before it, ...
-- (PyTorch's order). "constant" fills with value (a negative amount crops);
-- "reflect" mirrors without repeating the edge, "replicate" repeats the
-- edge, "circular" wraps around. Built from narrow, flip and cat, so the
-- gradient flows back to the elements each padded one copies.
function nn.pad(x, pad, mode, value)
  local fn = "nn.pad"
  if type(mode) == "table" and getmetatable(mode) == nil then
    local o = mode
    for k in pairs(o) do check(k == "mode" or k == "value", fn, "unknown option %s (expected mode, value)", tostring(k)) end
    mode, value = o.mode, o.value
  end
  mode, value = mode or "constant", value or 0
  check(type(x) == "userdata", fn, "expected a tensor, got %s", type(x))
  check(type(pad) == "table" and #pad % 2 == 0 and #pad / 2 <= x:dim(), fn,
    "pad must list {before, after} pairs for at most %d dims, got %s", x:dim(), type(pad) == "table" and #pad .. " numbers" or type(pad))
  check(mode == "constant" or mode == "reflect" or mode == "replicate" or mode == "circular", fn,
    "mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got %s", tostring(mode))
  check(type(value) == "number", fn, "value must be a number, got %s", type(value))
  check(mode == "constant" or value == 0, fn, "value is only for mode \"constant\"")
  local y = x
  for i = 1, #pad / 2 do
    local d = x:dim() - i + 1
    local before, after = pad[2 * i - 1], pad[2 * i]
    check(before % 1 == 0 and after % 1 == 0, fn, "pad amounts must be integers")
    local n = y:size(d)
    if mode ~= "constant" then
      check(before >= 0 and after >= 0, fn, "negative padding is only for mode \"constant\"")
      local limit = mode == "reflect" and n - 1 or mode == "circular" and n or math.huge
      check(before <= limit and after <= limit, fn, "%s padding of %d and %d along dim %d of size %d: at most %d",
        mode, before, after, d, n, limit)
    end
    -- Crops first (a constant mode's negative amounts).
    if before < 0 or after < 0 then
      local b, a = math.max(-before, 0), math.max(-after, 0)
      check(b + a < n, fn, "cropping %d and %d along dim %d leaves nothing of %d", b, a, d, n)
      y = y:narrow(d, b + 1, n - b - a)
      before, after, n = math.max(before, 0), math.max(after, 0), n - b - a
    end
    local parts = {}
    local function side(k, at_start)
      if k == 0 then return end
      local piece
      if mode == "constant" then
        local shape = y:size()
        shape[d] = k
        piece = tensor.full(shape, value)
      elseif mode == "replicate" then
        local edge = y:narrow(d, at_start and 1 or n, 1)
        local shape = y:size()
        shape[d] = k
        piece = edge:expand(unpack(shape))
      elseif mode == "reflect" then
        piece = (at_start and y:narrow(d, 2, k) or y:narrow(d, n - k, k)):flip(d)
      else -- circular
        piece = at_start and y:narrow(d, n - k + 1, k) or y:narrow(d, 1, k)
      end
      parts[#parts + 1] = piece
    end
    side(before, true)
    parts[#parts + 1] = y
    side(after, false)
    if #parts > 1 then y = tensor.cat(parts, d) end
  end
  return y
end

-- nn.Upsample{size=, scale_factor=, mode="nearest", align_corners=false}
-- is nn.interpolate's module (luabind/nn_conv.go), which checks them.
nn.Upsample = nn.Module:extend("Upsample")
local upsample_options = {size = true, scale_factor = true, mode = true, align_corners = true, recompute_scale_factor = true}
function nn.Upsample:init(opts)
  opts = opts or {}
  check(type(opts) == "table", "nn.Upsample", "expected an options table {size=, scale_factor=, mode=, align_corners=}, got %s", type(opts))
  self.opts = {}
  for k, v in pairs(opts) do
    check(upsample_options[k], "nn.Upsample", "unknown option %s (expected size, scale_factor, mode, align_corners, recompute_scale_factor)", tostring(k))
    self.opts[k] = v
  end
  self.opts.mode = self.opts.mode or "nearest"
  self.size, self.scale_factor, self.mode = opts.size, opts.scale_factor, self.opts.mode
end
function nn.Upsample:forward(x) return nn.interpolate(x, self.opts) end
function nn.Upsample:describe()
  local function show(v) return type(v) == "table" and "(" .. table.concat(v, ", ") .. ")" or tostring(v) end
  return string.format("Upsample(%s, mode=%s)", self.size and "size=" .. show(self.size) or "scale_factor=" .. show(self.scale_factor), self.mode)
end
