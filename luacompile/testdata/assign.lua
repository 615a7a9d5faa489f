-- Multiple assignment: every expression is evaluated before anything is
-- assigned (Lua 5.1 manual, 2.4.3). Output made by lua5.1.
local a, b = 0, 0
a, b = a + 1, a + b
print("values first", a, b)
local x, y = 1, 2
x, y = y, x
print("swap", x, y)
local m, n = 3
m, n = 1, m
print("constant then name", m, n)
local f0, f1 = 0, 1
for _ = 1, 10 do f0, f1 = f1, f0 + f1 end
print("fibonacci", f0, f1)
local i, t = 1, {}
i, t[i] = i + 1, 20
print("index read first", i, t[1], t[2])
t = {}
t[i], i = 30, 5
print("index read first, right", i, t[2], t[5])
local k, g = 1, {1, 2, 3}
k, g[k] = k + 1, 10
print("key held", k, g[1], g[2])
gx, gy = 1, 2
gx, gy = gy, gx
print("globals", gx, gy)
local up1, up2 = "a", "b"
local function swapup() up1, up2 = up2, up1 end
swapup()
print("upvalues", up1, up2)
local function three() return 1, 2, 3 end
local p, q, r = 0, 0, 0
p, q, r = three()
print("call fills", p, q, r)
p, q, r = 9, three()
print("call last", p, q, r)
p, q = three(), 7
print("call first truncated", p, q)
p, q, r = 1
print("fewer values", p, q, r)
local calls = {}
local function v(s) calls[#calls + 1] = s return s end
p, q = v("a"), v("b"), v("c")
print("extra evaluated", p, q, table.concat(calls, ","))
local function va(...) local a1, a2 = 0, 0 a1, a2 = ... return a1, a2 end
print("varargs", va(5, 6, 7))
local obj = {n = 1}
obj.n, obj.m = obj.n + 1, obj.n
print("fields", obj.n, obj.m)
local arr = {1, 2}
arr[1], arr[2] = arr[2], arr[1]
print("array swap", arr[1], arr[2])
local s1, s2 = "x", "y"
s1, s2 = s1 .. s2, s1
print("concat", s1, s2)
local c1, c2 = 1, 2
c1, c2 = c2 > c1 and c2 or c1, c1
print("logic", c1, c2)
local outer = {inner = {v = 1}}
local o = outer
o, o.inner.v = 5, 2
print("table expr held", o, outer.inner.v)
local w1, w2, w3 = 1, 2, 3
w1, w2, w3 = w3, w1, w2
print("rotate", w1, w2, w3)
local mt = setmetatable({}, {__newindex = function(tb, key, val) rawset(tb, key, val * 10) end})
mt.a, mt.b = 1, 2
print("newindex", mt.a, mt.b)
