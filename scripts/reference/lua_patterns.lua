-- Reference answers of Lua 5.1's own string.find, match, gmatch and gsub,
-- for runtime/internal/luapattern's tests. Run with the reference
-- interpreter (apt-get install lua5.1):
--
--   lua5.1 scripts/reference/lua_patterns.lua > runtime/testdata/lua51_patterns.json
--
-- runtime's TestStdlibAsLua51 runs this same script in gglua's runtime and
-- compares the two outputs; the random cases come from a generator of the
-- script's own (Park-Miller), so that both draw the same ones.
--
-- Each case is a subject, a pattern and a start position, with what each
-- function returned (a list of values) or "error" when it raised one. The
-- random patterns are well formed by construction; the malformed ones are
-- written by hand where Lua 5.1 meets the error (it checks lazily).

local function json(v)
  local t = type(v)
  if t == "nil" then return "null" end
  if t == "number" then return string.format("%.17g", v) end
  if t == "boolean" then return tostring(v) end
  if t == "string" then
    return '"' .. v:gsub('[%c"\\\128-\255]', function(c)
      return string.format("\\u%04x", c:byte())
    end) .. '"'
  end
  local parts = {}
  if #v > 0 or next(v) == nil then
    for i = 1, #v do parts[i] = json(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do parts[#parts + 1] = json(k) .. ":" .. json(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- results runs f and returns its values as a list, or "error".
local function results(f, ...)
  local out = { pcall(f, ...) }
  if not out[1] then return "error" end
  local n = select("#", pcall(f, ...)) - 1
  local list = {}
  for i = 1, n do list[i] = out[i + 1] == nil and "<nil>" or out[i + 1] end
  return list
end

local function gmatchAll(s, p)
  local all = {}
  for a, b, c in string.gmatch(s, p) do
    all[#all + 1] = { a, b, c }
    if #all > 50 then break end
  end
  return all
end

local cases = {}
local function case(s, p, init)
  local c = { s = s, p = p, init = init }
  c.find = results(string.find, s, p, init)
  c.match = results(string.match, s, p, init)
  c.gsub = results(string.gsub, s, p, "<%0>")
  c.gsub1 = results(string.gsub, s, p, "[%1]", 1)
  local ok, all = pcall(gmatchAll, s, p)
  c.gmatch = ok and all or "error"
  cases[#cases + 1] = c
end

-- Written by hand: classes, sets, anchors, captures, balance, frontier,
-- back references, empty matches and the errors Lua 5.1 reaches.
local hand = {
  { "hello world", "o w" }, { "hello world", "l+" }, { "hello world", "l*" },
  { "hello world", "l-o" }, { "hello world", "^h" }, { "hello world", "^w" },
  { "hello world", "d$" }, { "hello world", "o$" }, { "a$b", "a$b" },
  { "x^y", "x^y" }, { "^a", "^a" }, { "a.b", "%." }, { "a.b", "." },
  { "abc123 \t\n!?", "%a+" }, { "abc123 \t\n!?", "%d+" }, { "abc123 \t\n!?", "%s+" },
  { "abc123 \t\n!?", "%p+" }, { "abc123 \t\n!?", "%w+" }, { "abc123 \t\n!?", "%c+" },
  { "ABCdef", "%u+" }, { "ABCdef", "%l+" }, { "0x1F zz", "%x+" }, { "abc123", "%A+" },
  { "abc123", "%D+" }, { "a b", "%S+" }, { "key = value", "(%w+)%s*=%s*(%w+)" },
  { "]]x", "[]]+" }, { "a-b", "[a-]+" }, { "a-b", "[-a]+" }, { "a^b", "[b^]+" },
  { "abc", "[^a]+" }, { "a]c", "[^]]+" }, { "az09", "[a-z0-9]+" }, { "a%b", "[%%]" },
  { "a.b", "[%.]" }, { "f(a(b)c)d", "%b()" }, { "f(a(b)c", "%b()" }, { "xaaax", "%bxx" },
  { "THE (quick) fox", "%f[%a]%a+" }, { "THE (quick) fox", "%f[%A]" }, { "hello", "%f[%l]" },
  { "abcabc", "(abc)%1" }, { "abab", "(a)(b)%1%2" }, { "aaa", "(a*)%1" },
  { "hello", "()ll()" }, { "hello", "()" }, { "", "" }, { "", "a*" }, { "abc", "" },
  { "abc", "x*" }, { "abc", ".-" }, { "abc", ".-$" }, { "abc", "(.-)c" },
  { "abc", "a?b?c?d?" }, { "ac", "ab?c" }, { "ab", "((a)(b))" }, { "abc", "(a)(b)(c)" },
  { "one two  three", "%a+" }, { "x=1, y=2", "(%w+)=(%w+)" }, { "aaa", "a-" }, { "aaa", "^a-$" },
  { "a\0b", "%z" }, { "a\0b", "[%z]" }, { "a\0b", "%Z+" },
  { "abc", "%" }, { "abc", "[a" }, { "abc", "[^a" }, { "abc", "(a" }, { "abc", "a)" },
  { "abc", "%1" }, { "abc", "(a)%2" }, { "abc", "%0" }, { "abc", "%b" }, { "abc", "%ba" },
  { "abc", "%f" }, { "abc", "%fa" }, { "abc", "(()" },
}
for _, h in ipairs(hand) do case(h[1], h[2]) end
for _, init in ipairs { -10, -3, -1, 0, 1, 2, 3, 4, 5, 10 } do
  case("abcabc", "b", init)
  case("abcabc", "b.", init)
  case("abcabc", "^b", init)
  case("abcabc", "", init)
  case("abcabc", "x*", init)
end

-- Random well-formed patterns over a small alphabet, so that they match.
local seed = 20261130
local function random(m, n) -- as math.random(m, n), or [0, 1) with no argument
  seed = (seed * 16807) % 2147483647
  local u = seed / 2147483647
  if not m then return u end
  if not n then m, n = 1, m end
  return m + math.floor(u * (n - m + 1))
end
local atoms = { "a", "b", "c", "1", " ", ".", "%a", "%d", "%s", "%w", "%A", "%p",
  "[ab]", "[^a]", "[a-c]", "[%d.]", "[]a]", "%.", "%(" }
local quants = { "", "", "", "*", "+", "-", "?" }
local function randomPattern()
  local parts, open, closed = {}, 0, 0
  if random() < 0.2 then parts[1] = "^" end
  for _ = 1, random(1, 5) do
    local r = random()
    if r < 0.12 and open + closed < 4 then
      parts[#parts + 1] = "("
      open = open + 1
    elseif r < 0.24 and open > 0 then
      parts[#parts + 1] = ")"
      open, closed = open - 1, closed + 1
    elseif r < 0.28 then
      parts[#parts + 1] = "()"
    elseif r < 0.32 then
      parts[#parts + 1] = "%b()"
    elseif r < 0.36 then
      parts[#parts + 1] = "%f[%w]"
    elseif r < 0.40 and closed > 0 then
      parts[#parts + 1] = "%1"
    else
      parts[#parts + 1] = atoms[random(#atoms)] .. quants[random(#quants)]
    end
  end
  for _ = 1, open do parts[#parts + 1] = ")" end
  if random() < 0.15 then parts[#parts + 1] = "$" end
  return table.concat(parts)
end
local letters = { "a", "b", "c", "1", "2", " ", ".", "(", ")", "x", "]" }
local function randomSubject()
  local s = {}
  for i = 1, random(0, 12) do s[i] = letters[random(#letters)] end
  return table.concat(s)
end
for _ = 1, 1500 do case(randomSubject(), randomPattern()) end

-- Expressions over the other functions the runtime replaces or wraps
-- (runtime/stdlib.go, strpattern.go), each with its values or "error".
local exprs = {
  [==[("hello world"):find("o w")]==],
  [==[("hello world"):find("l+")]==],
  [==[("hello world"):find("(l)(l)")]==],
  [==[("hello world"):find("()ll()")]==],
  [==[("hello world"):find("x")]==],
  [==[("hello world"):find("", 3)]==],
  [==[("hello world"):find("o", -3)]==],
  [==[("hello world"):find("o", 100)]==],
  [==[("a1b22c333"):find("%d+", 4)]==],
  [==[("hello"):find("[a-")]==],
  [==[("a.b"):find(".", 1, true)]==],
  [==[("a.b"):find(".", 3, true)]==],
  [==[("a.b"):find("b", 0, true)]==],
  [==[("hello"):find("^h")]==],
  [==[("hello"):find("^e")]==],
  [==[("hello"):find("o$")]==],
  [==[("x(y)z"):find("%b()")]==],
  [==[("abcabc"):find("(b)(c)%1", 1)]==],
  [==[("aaa"):find("a-", 2)]==],
  [==[("hello"):find("l", -100)]==],
  [==[string.find()]==],
  [==[string.find("x")]==],
  [==[("key=val"):match("(%w+)=(%w+)")]==],
  [==[("key=val"):match("^(%w+)")]==],
  [==[("key=val"):match("()=()")]==],
  [==[select("#", ("key=val"):match("x"))]==],
  [==[("key=val"):match("=.*")]==],
  [==[("  trim  "):match("^%s*(.-)%s*$")]==],
  [==[("key=val"):match("%w+", 5)]==],
  [==[("key=val"):match("%w+", -3)]==],
  [==[("key=val"):match("%w+", 100)]==],
  [==[("2024-01-02"):match("(%d+)-(%d+)-(%d+)")]==],
  [==[("x"):match("(")]==],
  [==[("x"):match("%")]==],
  [==[(function() local r = {} for w in ("one two  three"):gmatch("%a+") do r[#r + 1] = w end return table.concat(r, ";") end)()]==],
  [==[(function() local r = {} for k, v in ("a=1, b=2"):gmatch("(%w+)=(%w+)") do r[#r + 1] = k .. v end return table.concat(r, ";") end)()]==],
  [==[(function() local r = {} for p in ("abc"):gmatch("()") do r[#r + 1] = p end return table.concat(r, ";") end)()]==],
  [==[(function() local r = {} for w in ("hello"):gmatch("^.") do r[#r + 1] = w end return table.concat(r, ";") end)()]==],
  [==[(function() local r = {} for w in ("aXbXc"):gmatch("[^X]*") do r[#r + 1] = "<" .. w .. ">" end return table.concat(r) end)()]==],
  [==[(function() local n = 0 for w in (""):gmatch(".") do n = n + 1 end return n end)()]==],
  [==[("hello world"):gsub("o", "0")]==],
  [==[("hello world"):gsub("(o)", "%1%1")]==],
  [==[("hello world"):gsub("o", "%%")]==],
  [==[("hello world"):gsub("o", "%x")]==],
  [==[("hello world"):gsub("l", "L", 2)]==],
  [==[("hello world"):gsub("l", "L", 0)]==],
  [==[("hello world"):gsub("x", "L", 0)]==],
  [==[("hello world"):gsub("l", "L", -1)]==],
  [==[("hello world"):gsub("(%w+)", {hello = "HI"})]==],
  [==[("hello world"):gsub("%w+", function(w) return w:upper() end)]==],
  [==[("hello world"):gsub("%w+", function() return nil end)]==],
  [==[("hello world"):gsub("%w+", function() return false end)]==],
  [==[("hello world"):gsub("(%w)(%w)", function(a, b) return b .. a end)]==],
  [==[("abc"):gsub("", "-")]==],
  [==[("hello"):gsub("^h", "H")]==],
  [==[("hello"):gsub("x*", "-")]==],
  [==[("hello"):gsub("()", "%1")]==],
  [==[("hello"):gsub("(l)", "%2")]==],
  [==[("hello"):gsub("l", "%0%0")]==],
  [==[("hello"):gsub("l", "%1")]==],
  [==[("hello"):gsub("o", false)]==],
  [==[("hello"):gsub("(h)(e)", {h = 1})]==],
  [==[("hello"):gsub("()l", {[3] = "X"})]==],
  [==[("hello"):gsub("l", {l = {}})]==],
  [==[("a b"):gsub("%s", "%%%0")]==],
  [==[("x"):gsub("x", "%%%%%1")]==],
  [==[string.gsub(123, "2", "x")]==],
  [==[string.gsub(123, "9", "x")]==],
  [==[("hello"):gsub("l+", function(s) return #s end)]==],
  [==[("abc"):gsub(".", {a = 1, b = true})]==],
  [==[("abc"):gsub("[", "x")]==],
  [==[string.gsub("abc")]==],
  [==[string.gsub("abc", "b")]==],
  [==[table.concat({1, 2, 3}, ", ")]==],
  [==[table.concat({"a", "b", "c"}, "-", 2)]==],
  [==[table.concat({}, "x")]==],
  [==[table.concat({1, {}, 3})]==],
  [==[table.concat({"a", "b", "c"}, "", 2, 3)]==],
  [==[table.concat({"a", "b", "c"}, "", 3)]==],
  [==[table.concat({"a", "b", "c"}, "", 0)]==],
  [==[table.concat({"a", "b", "c"}, "", 4)]==],
  [==[table.concat({"a", "b", "c"}, "+", 3, 2)]==],
  [==[table.concat({"a", "b", "c"}, "+", 2, 10)]==],
  [==[table.concat({"a", "b"}, 3)]==],
  [==[table.concat({"a", "b", "c"}, "", -1, 2)]==],
  [==[table.concat()]==],
  [==[table.concat({"a", nil, "c"})]==],
  [==[("abc"):byte()]==],
  [==[("abc"):byte(1, -1)]==],
  [==[("abc"):byte(2)]==],
  [==[("abc"):byte(-1)]==],
  [==[("abc"):byte(10)]==],
  [==[("abc"):byte(3, 1)]==],
  [==[unpack({1, 2, 3})]==],
  [==[unpack({1, 2, 3}, 2)]==],
  [==[unpack({1, 2, 3}, 2, 5)]==],
  [==[select("#", unpack({}, 1, 0))]==],
  [==[string.format("%5.2f|%s|%q|%d|%x|%-4s|", 3.14159, "x", "a\nb", 42, 255, "ab")]==],
  [==[string.format("%%")]==],
  [==[string.format("%d")]==],
  [==[string.format("%5.1f|%g|%g|%g", "3", 1/3, 1e20, 2^53)]==],
  [==[string.format("%5s|%-5s|%.2s|%5.2s|", "ab", "cd", "xyz", "abc")]==],
  [==[string.format("%c%c", 72, 105)]==],
  [==[string.format("%x %X %o %#x %#o", 255, 255, 8, 255, 8)]==],
  [==[string.format("%+d|% d|%05d|%-5d|%.3d", 5, 5, 5, 5, 5)]==],
  [==[string.format("%e|%.3e|%E|%10.4f|", 12345.678, 0, 1e-10, math.pi)]==],
  [==[string.format("%q", "a\0b\r\"\\\n")]==],
  [==[string.format("%d|%i|%u|%d", "12", -3.9, 42, 3.9)]==],
  [==[string.format("%g %g %g %g %G", 100000, 1e6, 0.0001, 1e-5, 1e-5)]==],
  [==[string.format("%.14g|%s|%s|%s", 0.1, 1, 2.5, 1e100)]==],
  [==[string.format("%f|%f|%5.1f|%e", 1/0, -1/0, 1/0, -1/0)]==],
  [==[string.format("%d", {})]==],
  [==[string.format("%y", 1)]==],
  [==[string.format("%123d", 1)]==],
  [==[string.format("%.123f", 1)]==],
  [==[string.format("%5")]==],
  [==[string.format("%s %s", 1)]==],
  [==[string.format("no directives")]==],
  [==[("abc"):byte(-5, 10)]==],
  [==[("abc"):byte(0)]==],
  [==[("abc"):byte(2, -1)]==],
  [==[("abc"):byte(-2)]==],
  [==[(""):byte()]==],
  [==[math.huge == 1/0]==],
  [==[-math.huge == -1/0]==],
  [==[math.huge > 1e308]==],
  [==[("ab"):rep(3)]==],
  [==[("ab"):rep(3, ",")]==],
  [==[("ab"):rep(0)]==],
  [==[("ab"):rep(-1)]==],
  [==[(function() local t = {5, 2, 8, 1} table.sort(t) return table.concat(t, ",") end)()]==],
  [==[(function() local t = {5, 2, 8, 1} table.sort(t, function(a, b) return a > b end) return table.concat(t, ",") end)()]==],
  [==[(function() local t = {} for i = 1, 20000 do t[i] = (i * 7919) % 10007 end table.sort(t) for i = 2, #t do if t[i - 1] > t[i] then return "unsorted" end end return t[1], t[20000] end)()]==],
  [==[(function() local t = {} for i = 1, 20000 do t[i] = tostring(i) end t[500] = 1 table.sort(t) end)()]==],
  [==[(function() local co = coroutine.wrap(function() local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end coroutine.yield(f(150)) return "done" end) return co(), co() end)()]==],
  [==[(function() local co = coroutine.create(function(a, b) local c = coroutine.yield(a + b) return c * 2 end) local _, x = coroutine.resume(co, 1, 2) local _, y = coroutine.resume(co, 10) return x, y, coroutine.status(co) end)()]==],
  -- "..": a sandbox's is a call of its own (runtime/stdlib.go's concatOp)
  [==["a" .. "b" .. "c"]==],
  [==[1 .. 2, 1.5 .. "", -0.25 .. "x", 1e100 .. ""]==],
  [==[(function() local s = "" for i = 1, 5 do s = s .. i .. "," end return s end)()]==],
  [==[(function() local mt = {__concat = function(a, b) return "[" .. type(a) .. "|" .. type(b) .. "]" end} local t = setmetatable({}, mt) return t .. "x", "x" .. t, "a" .. "b" .. t, t .. "a" .. "b", 1 .. t end)()]==],
  [==[(function() local mt = {__concat = function(a, b) return 7 end} local t = setmetatable({}, mt) return type(t .. "x"), ("a" .. t) + 1 end)()]==],
  [==[(function() local mt = {__concat = function(a, b) return setmetatable({}, getmetatable(type(a) == "table" and a or b)) end} local t = setmetatable({}, mt) return type("a" .. t .. "b") end)()]==],
  [==[(function() return "a" .. nil end)()]==],
  [==[(function() return {} .. "a" end)()]==],
  [==[(function() return "a" .. true .. "b" end)()]==],
  [==[#("x"):rep(1000) .. ("y"):rep(1000)]==],
  [==[(function() local t = {} t["k" .. 1] = "v" .. 2 return t.k1 end)()]==],
  [==[(function(...) return select("#", ...) end)("a" .. "b")]==],
}
local evaluated = {}
for _, e in ipairs(loadstring and exprs or {}) do -- a sandbox has no loadstring
  evaluated[#evaluated + 1] = { expr = e, values = results(assert(loadstring("return " .. e))) }
end

local out = json({ patterns = cases, exprs = evaluated })
if REFERENCE_RETURN then return out end
io.write(out, "\n")
