-- scripts/bench/bench_steps.lua - the timed loop of gpu_mlp.lua and
-- gpt_bench.lua: steps calls of step() (which returns the loss), with each
-- step's wall time, time in graph computes and time in gradient
-- collectives (residency.stats()) kept, so that a data-parallel run can
-- show each rank's spread (a rank that computes slower makes the other
-- wait in the all-reduce). Loaded with dofile from the script's folder:
--   local timed = dofile(dir .. "bench_steps.lua")
--   local t = timed(step, steps)  -- t.seconds, t.loss, t.computes, t.collectives, t.spread
return function(step, steps)
  local wall, comp, coll = {}, {}, {}
  local first = residency.stats()
  local t0 = device.clock()
  local before, tb = first, t0
  local loss
  for i = 1, steps do
    loss = step()
    local s, t = residency.stats(), device.clock()
    wall[i], comp[i], coll[i] = t - tb, s.compute_seconds - before.compute_seconds, s.grad_reduce_seconds - before.grad_reduce_seconds
    before, tb = s, t
  end
  local last = residency.stats()
  local seconds = device.clock() - t0
  -- p50 / p90 / max of v in ms.
  local function spread(v)
    local s = {}
    for i, x in ipairs(v) do s[i] = x end
    table.sort(s)
    local function at(q) return 1000 * s[math.max(1, math.ceil(q * #s))] end
    return string.format("%.2f/%.2f/%.2f", at(0.5), at(0.9), at(1))
  end
  -- the slowest step's number: a one-off cost (a late capture, a pause)
  -- shows as one step, a rank's slow device as many
  local slowest = 1
  for i = 2, steps do if wall[i] > wall[slowest] then slowest = i end end
  return {
    seconds = seconds, loss = loss, stats = last,
    computes = (last.compute_seconds - first.compute_seconds) / steps,
    collectives = (last.grad_reduce_seconds - first.grad_reduce_seconds) / steps,
    spread = string.format("ms a step p50/p90/max: wall %s, computes %s, collectives %s; slowest step %d of %d",
      spread(wall), spread(comp), spread(coll), slowest, steps),
  }
end
