-- scripts/train.lua - the gglua demo.
--
-- Until the autograd engine lands (issue [2]) this demo runs the residency
-- loop that a training script is built on: weights uploaded once into the
-- persistent pool, a fresh batch made and uploaded every step into the pass
-- pool, the pass pool reset at the start of each step. It checks what makes
-- resident training cheap: the persistent pool never grows, the pass pool is
-- freed every step, and the only host->device traffic of a step is its batch.

local steps = tonumber(arg and arg[1]) or 200
local batch, n_in, n_hidden = 64, 16, 32

math.randomseed(42)

-- Synthetic data: points in n_in dims, labelled by the sign of their sum.
local function make_batch()
  local x = {}
  for i = 1, batch do
    local row = {}
    for j = 1, n_in do row[j] = math.random() * 2 - 1 end
    x[i] = row
  end
  return tensor(x)
end

local function rand_matrix(r, c, scale)
  local m = {}
  for i = 1, r do
    m[i] = {}
    for j = 1, c do m[i][j] = (math.random() * 2 - 1) * scale end
  end
  return tensor(m)
end

local w1 = to_gpu(rand_matrix(n_in, n_hidden, 1 / math.sqrt(n_in)), "persistent")
local w2 = to_gpu(rand_matrix(n_hidden, 1, 1 / math.sqrt(n_hidden)), "persistent")
local start = residency.stats()
print(string.format("weights resident on %s: %d bytes in %d persistent buffer(s)",
  device.current(), start.p_buffer_bytes, start.p_n_buffers))

local batch_bytes = batch * n_in * 4
local last = start
for step = 1, steps do
  residency.reset("pass")           -- what with_grad_tape does once per step
  local x = to_gpu(make_batch())    -- the batch: the step's only upload
  local s = residency.stats()
  assert(s.p_buffer_bytes == start.p_buffer_bytes, "the persistent pool grew")
  assert(s.h2d_bytes - last.h2d_bytes == batch_bytes, "a step uploaded more than its batch")
  assert(x:scope() == "pass" and w1:scope() == "persistent")
  if step % 50 == 0 or step == steps then
    print(string.format("step %4d  pass pool %7d B  persistent %7d B  h2d/step %d B  pass gen %d",
      step, s.buffer_bytes, s.p_buffer_bytes, s.h2d_bytes - last.h2d_bytes, s.pass_gen))
  end
  last = s
end

-- The weights are still readable after every pass reset.
local w = w2:totable()
print(string.format("after %d steps: w2[1][1] = %.4f, persistent pool flat at %d bytes", steps, w[1][1], last.p_buffer_bytes))
