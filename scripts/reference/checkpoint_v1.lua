-- Writes core/testdata/checkpoint_v1.gguf, a checkpoint in gglua's first
-- format (gglua-checkpoint-1: nested tables flattened to dotted names, no
-- stored paths), for core/checkpoint_test.go, which checks that such files
-- still load as they always did (flat). It must be run by a gglua built
-- from a commit before the format changed (6b064b6 or earlier):
--   gglua scripts/reference/checkpoint_v1.lua core/testdata/checkpoint_v1.gguf
local path = arg and arg[1] or "core/testdata/checkpoint_v1.gguf"
tensor.save(path, {
  model = {weight = tensor{{1, 2}, {3, 4}}, ["1.bias"] = tensor{0.5, -0.25}},
  step = 3,
  lr = 0.1,
  note = "hello",
  flag = true,
  half = tensor({1.5, -2}, {dtype = "f16"}),
})
