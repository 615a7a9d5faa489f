-- The loss modules of torch.nn: each holds its options, PyTorch's names,
-- and calls its functional (nn.cross_entropy, ...) with them:
--   local crit = nn.CrossEntropyLoss{label_smoothing = 0.1, ignore_index = 1}
--   local loss = crit(logits, labels)
-- A class weight (and BCEWithLogitsLoss's pos_weight) is a buffer, in the
-- state_dict as PyTorch's. PyTorch's deprecated positional arguments
-- (size_average, reduce) are not taken: options come as a table.
local nn = nn

local function check(cond, fn, fmt, ...)
  if not cond then error(fn .. ": " .. string.format(fmt, ...), 4) end
end

-- Each module: its functional and the options it holds (buffers marked).
local losses = {
  MSELoss = {"mse_loss", {"reduction"}},
  L1Loss = {"l1_loss", {"reduction"}},
  SmoothL1Loss = {"smooth_l1_loss", {"reduction", "beta"}},
  HuberLoss = {"huber_loss", {"reduction", "delta"}},
  BCELoss = {"bce_loss", {"reduction", "weight"}},
  BCEWithLogitsLoss = {"binary_cross_entropy_with_logits", {"reduction", "weight", "pos_weight"}},
  CrossEntropyLoss = {"cross_entropy", {"reduction", "weight", "ignore_index", "label_smoothing"}},
  NLLLoss = {"nll_loss", {"reduction", "weight", "ignore_index"}},
  KLDivLoss = {"kl_div", {"reduction", "log_target"}},
}
local buffers = {weight = true, pos_weight = true}

for name, spec in pairs(losses) do
  local functional, names = spec[1], spec[2]
  local fn = "nn." .. name
  local c = nn.Module:extend(name)
  nn[name] = c
  function c:init(opts, ...)
    check(select("#", ...) == 0 and (opts == nil or type(opts) == "table" and getmetatable(opts) == nil), fn,
      "takes an options table ({%s=...}), not PyTorch's deprecated positional arguments", table.concat(names, "=..., "))
    opts = opts or {}
    for k in pairs(opts) do
      local ok = false
      for _, n in ipairs(names) do ok = ok or k == n end
      check(ok, fn, "unknown option %s (expected %s)", tostring(k), table.concat(names, ", "))
    end
    self.reduction = opts.reduction or "mean"
    check(self.reduction == "mean" or self.reduction == "sum" or self.reduction == "none" or
      (self.reduction == "batchmean" and name == "KLDivLoss"), fn, "reduction must be \"mean\", \"sum\" or \"none\", got %s",
      tostring(self.reduction))
    self._options = {}
    for _, n in ipairs(names) do
      if n ~= "reduction" and opts[n] ~= nil then
        if buffers[n] then
          check(type(opts[n]) == "userdata", fn, "%s must be a tensor, got %s", n, type(opts[n]))
          self:register_buffer(n, opts[n])
        else
          self[n] = opts[n]
        end
        self._options[#self._options + 1] = n
      end
    end
  end
  function c:forward(input, target)
    local o = {reduction = self.reduction}
    for _, n in ipairs(self._options) do o[n] = self[n] end
    return nn[functional](input, target, o)
  end
  function c:describe() return name .. "()" end
end

-- nn.one_hot(labels [, num_classes]) is F.one_hot of 1-based labels (an
-- i32 tensor or a table): an i32 tensor of labels' shape and one more dim
-- of num_classes (default: the largest label), 1 at each label's class.
function nn.one_hot(labels, num_classes)
  local fn = "nn.one_hot"
  if type(labels) == "table" and getmetatable(labels) == nil then labels = tensor(labels) end
  check(type(labels) == "userdata", fn, "expected labels (an i32 tensor or a table of integers), got %s", type(labels))
  local f = labels:dtype() == "i32" and labels:float() or labels
  local lo, hi -- the labels' range; none for no labels
  if f:numel() == 0 then -- as PyTorch, only with num_classes given
    check(num_classes ~= nil and num_classes ~= -1, fn, "cannot infer num_classes from no labels; give it")
  else
    check((f - f:round()):abs():max():item() == 0, fn, "labels must be integers")
    lo, hi = f:min():item(), f:max():item()
    if num_classes == nil or num_classes == -1 then num_classes = hi end
  end
  check(type(num_classes) == "number" and num_classes >= 1 and num_classes % 1 == 0, fn,
    "num_classes must be a positive integer, got %s", tostring(num_classes))
  check(lo == nil or (lo >= 1 and hi <= num_classes), fn, "labels must be in 1..%d (1-based), got %g..%g", num_classes, lo, hi)
  return f:unsqueeze(-1):eq(tensor.arange(1, num_classes + 1)):int()
end
