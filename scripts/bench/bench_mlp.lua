-- scripts/bench/bench_mlp.lua - the benchmark MLP of gpu_mlp.lua,
-- gpu_residency.lua and autocast_curve.lua (as torch_gpu_common.py's
-- mlp): Linear layers of sizes with ReLU between them, in an
-- nn.Sequential. Loaded with dofile from the script's own folder.
return function(sizes)
  local layers = {}
  for i = 1, #sizes - 1 do
    layers[#layers + 1] = nn.Linear(sizes[i], sizes[i + 1])
    if i < #sizes - 1 then layers[#layers + 1] = nn.ReLU() end
  end
  return nn.Sequential(layers)
end
