-- scripts/examples/cnn.lua - a small convolutional network that learns to
-- tell apart three kinds of noisy 8x8 pictures:
--
--   class 1: a horizontal bar    class 2: a vertical bar    class 3: a cross
--
-- It shows:
--   * making a dataset as tensors ([N, C, H, W] images, 1-based class labels);
--   * nn.Sequential with Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear;
--   * data.loader for shuffled mini-batches, one `for` loop per epoch;
--   * a training step: zero_grad, a forward pass under with_grad_tape,
--     backward, opt:step();
--   * train() / eval() (BatchNorm uses batch statistics while training and
--     its running statistics when evaluating) and no_grad for evaluation.
--
--   gglua scripts/examples/cnn.lua [epochs] [train_size]
--
-- The script prints the mean training loss of each epoch and ends with a line
-- "test accuracy NN.N% (chance 33.3%)".

local epochs = tonumber(arg and arg[1]) or 8
local n_train = tonumber(arg and arg[2]) or 600
local n_test = 300
local size, noise = 8, 0.4

tensor.manual_seed(1)  -- the seeded generator behind randn, init and shuffling
math.randomseed(1)     -- Lua's own generator, used below to place the bars

-- 1. The data. Each picture is drawn into a Lua table, then the whole set is
-- turned into one tensor and Gaussian noise is added to every pixel.
local function picture(class)
  local img = {}
  for r = 1, size do
    img[r] = {}
    for c = 1, size do img[r][c] = 0 end
  end
  local row, col = math.random(2, size - 1), math.random(2, size - 1)
  local lo, hi = math.random(1, 3), math.random(size - 2, size) -- bars have random lengths
  if class ~= 2 then for c = lo, hi do img[row][c] = 1 end end -- horizontal part
  if class ~= 1 then for r = lo, hi do img[r][col] = 1 end end -- vertical part
  return img
end

local function dataset(n)
  local images, labels = {}, {}
  for i = 1, n do
    labels[i] = (i - 1) % 3 + 1 -- balanced classes: 1, 2, 3, 1, 2, 3, ...
    images[i] = {picture(labels[i])} -- one channel
  end
  local x = tensor(images) + tensor.randn(n, 1, size, size) * noise
  return x, labels
end

local x_train, y_train = dataset(n_train)
local x_test, y_test = dataset(n_test)
print(string.format("%d training and %d test pictures of %dx%d, %d classes",
  n_train, n_test, size, size, 3))

-- 2. The model: two conv blocks halve the picture twice (8 -> 4 -> 2), then
-- a linear layer reads the 16 channels x 2 x 2 features.
local model = nn.Sequential{
  nn.Conv2d(1, 8, 3, {padding = 1}),  -- [N, 1, 8, 8] -> [N, 8, 8, 8]
  nn.BatchNorm2d(8),
  nn.ReLU(),
  nn.MaxPool2d(2),                    -- -> [N, 8, 4, 4]
  nn.Conv2d(8, 16, 3, {padding = 1}), -- -> [N, 16, 4, 4]
  nn.ReLU(),
  nn.MaxPool2d(2),                    -- -> [N, 16, 2, 2]
  nn.Flatten(),                       -- -> [N, 64]
  nn.Linear(16 * 2 * 2, 3),           -- -> [N, 3] logits
}
print(model)

-- Weights, gradients and Adam's moments live in the persistent pool: a step
-- updates them in place and uploads only its batch.
model:to_gpu("persistent")
local opt = optim.adam(model:parameters(), {lr = 0.01})
local loader = data.loader(x_train, y_train, {batch = 32, shuffle = true})

-- 3. Training.
local first_loss, last_loss
for epoch = 1, epochs do
  model:train()
  local total, batches = 0, 0
  for xb, yb in loader do -- one epoch, reshuffled each time
    opt:zero_grad()
    local loss = with_grad_tape(function() return nn.cross_entropy(model(xb), yb) end)
    backward(loss)
    opt:step()
    total, batches = total + loss:item(), batches + 1
  end
  last_loss = total / batches
  first_loss = first_loss or last_loss
  print(string.format("epoch %2d  train loss %.4f", epoch, last_loss))
end

-- 4. Evaluation: eval() switches BatchNorm to its running statistics, and
-- no_grad records nothing for backward.
model:eval()
local function accuracy(x, labels)
  local predicted = no_grad(function() return model(x):argmax(2) end) -- 1-based classes
  return predicted:eq(tensor(labels)):mean():item()
end
print(string.format("train loss %.4f -> %.4f", first_loss, last_loss))
print(string.format("train accuracy %.1f%%", 100 * accuracy(x_train, y_train)))
print(string.format("test accuracy %.1f%% (chance 33.3%%)", 100 * accuracy(x_test, y_test)))
