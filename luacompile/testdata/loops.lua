-- Loops whose body begins with a jump. gopher-lua's jump-to-jump pass sent
-- the back edge elsewhere (the chunk's start: it ran again, forever).
-- Output made by lua5.1.
for i = 1, 2 do end
for _ in pairs({1}) do break end
print("generic for, break first")
for _, v in ipairs({1, 2, 3}) do if true then break end print("never", v) end
print("generic for, if true break")
local n = 0
for _, v in ipairs({1, 2, 3}) do
  if false then local x = 1 end
  n = n + v
end
print("generic for, if false local", n)
local w = 0
while true do break end
print("while true, break first")
while w < 3 do w = w + 1 end
print("while counted", w)
repeat break until false
print("repeat, break first")
local r = 0
repeat if false then local y = 2 end r = r + 1 until r >= 4
print("repeat, if false local", r)
local fns = {}
for i, v in ipairs({10, 20, 30}) do
  fns[#fns + 1] = function() return v end
  if i == 2 then break end
end
print("closures with break", #fns, fns[1](), fns[2]())
local out = {}
for _, a in ipairs({1, 2}) do
  for _, b in ipairs({1, 2, 3}) do
    if b == 2 then break end
    out[#out + 1] = a .. b
  end
end
print("nested", table.concat(out, ","))
local total = 0
for k, v in pairs({a = 1}) do
  while true do break end
  total = total + v
end
print("while inside for", total)
local count = 0
for _ in pairs({1, 2, 3}) do
  count = count + 1
  if count == 2 then break end
end
print("break later", count)
print("end")
