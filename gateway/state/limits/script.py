"""The one Lua script that checks and spends every limit of a call in ONE round trip, and its
read-only twin `PEEK` (the same decision, no write) that `Check` runs (ADR 0035).

KEYS: two per limit, in the call's order: the limit's state key, then its approval marker key
(used only when the limit is forced past on an approval). Every key of every call carries the
same hash tag, so one EVAL never spans Redis Cluster slots (docs/limits.md, ADR 0022).

ARGV: 1 `now` in milliseconds (the gateway's injected clock, never Redis `TIME`), then five
per limit: kind (`r` rate, `b` budget), a, b, c, force:

- rate (GCRA): a = emission interval in ms (window / limit), b = burst, c unused. The state is
  the theoretical arrival time (TAT); a call passes when TAT' - now <= burst * interval, where
  TAT' = max(TAT, now) + interval. TTL = TAT' - now, at most the window (burst <= limit).
- budget: a = amount, b = max, c = window in ms. The state (a hash) is the amount spent in
  the window that started at the key's first spend and when that window ends (`reset_at`, on
  the gateway's clock; the key's TTL is the time left to it, at most the window). A call
  passes when spent + amount <= max. force = 1 (an approved call) lets it past once: the
  marker key (expiring with the window; its value is the window's end) records that this
  approval's amount was counted in this window, so a repeated or concurrent Resume of the
  same approval never counts it twice: it passes, spends nothing, and reports the window as
  spent from (the amount is in `spent` already).

All or nothing: the script first decides every limit, and writes only when every one passed.
Reply: four strings per limit (Lua numbers would be truncated to integers): passed ('1' or
'0'), remaining (after this call when it passed), retry_after_ms ('-1' when waiting never
helps: an amount above the budget's max), and for a budget this call spent from, the end of
its window (`reset_at`, what `GIVE_BACK` checks), else '0'.
"""

from __future__ import annotations

from typing import Final

# Reads every limit and decides it: the part of the script CHECK_AND_SPEND and PEEK share,
# so a peek decides exactly as a spend would.
_DECIDE: Final = """
local now = tonumber(ARGV[1])
local n = math.floor((#ARGV - 1) / 5)
local out, plans, all_pass = {}, {}, true
local function num(x) return string.format('%.17g', x) end
local function put(passed, remaining, wait, window)
  out[#out + 1] = passed
  out[#out + 1] = num(remaining)
  out[#out + 1] = num(wait)
  out[#out + 1] = num(window)
end
for i = 1, n do
  local at = 1 + (i - 1) * 5
  local kind, a, b, c = ARGV[at + 1], tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]),
    tonumber(ARGV[at + 4])
  local force = ARGV[at + 5] == '1'
  local key, marker = KEYS[2 * i - 1], KEYS[2 * i]
  if kind == 'r' then
    local tat = tonumber(redis.call('GET', key) or '0') or 0
    if tat < now then tat = now end
    local new_tat = tat + a
    local tolerance = a * b
    if new_tat - now <= tolerance then
      plans[i] = {'r', key, new_tat}
      put('1', math.floor((tolerance - (new_tat - now)) / a + 1e-9), 0, 0)
    else
      all_pass = false
      put('0', 0, new_tat - tolerance - now, 0)
    end
  else
    local state = redis.call('HMGET', key, 'spent', 'reset_at')
    local spent, reset_at = tonumber(state[1] or '0') or 0, tonumber(state[2] or '0') or 0
    if reset_at <= now then spent, reset_at = 0, now + c end
    if force and redis.call('GET', marker) == num(reset_at) then
      -- this approval's amount was counted already in this window: reported as spent (the
      -- window), so a give-back by the execution that consumed the approval credits it
      put('1', b - spent, 0, reset_at)
    elseif force or spent + a <= b then
      plans[i] = {'b', key, spent + a, reset_at, force and marker or false}
      put('1', b - spent - a, 0, reset_at)
    else
      all_pass = false
      put('0', b - spent, a > b and -1 or reset_at - now, 0)
    end
  end
end
"""

CHECK_AND_SPEND: Final = (
    _DECIDE
    + """-- A check that arrives after its execution already gave up on it (its reply was lost, the
-- receipt's give-back ran first and left 'void'): it spends nothing.
if all_pass and #KEYS > 2 * n and redis.call('GET', KEYS[2 * n + 1]) == 'void' then
  all_pass = false
end
if all_pass then
  for i = 1, n do
    local p = plans[i]
    if p and p[1] == 'r' then
      redis.call('SET', p[2], num(p[3]), 'PX', math.max(1, math.ceil(p[3] - now)))
    elseif p then
      local ttl = math.max(1, math.ceil(p[4] - now))
      redis.call('HSET', p[2], 'spent', num(p[3]), 'reset_at', num(p[4]))
      redis.call('PEXPIRE', p[2], ttl)
      if p[5] then redis.call('SET', p[5], num(p[4]), 'PX', ttl) end
    end
  end
  -- The receipt (issue 25): which budget was spent in which window, by this execution, so a
  -- call whose reply was lost can still give back exactly what this script spent, once.
  if #KEYS > 2 * n then
    local spent = {}
    for i = 1, n do
      local p = plans[i]
      if p and p[1] == 'b' and not p[5] then spent[#spent + 1] = i .. '=' .. num(p[4]) end
    end
    if #spent > 0 then
      redis.call('SET', KEYS[2 * n + 1], table.concat(spent, ','), 'PX', ARGV[#ARGV])
    end
  end
end
return out
"""
)

# The same KEYS, ARGV and reply as CHECK_AND_SPEND (force always '0'), with no write: what
# `Check` asks (ADR 0035). A script that writes nothing is not propagated, so it waits for no
# fsync either.
PEEK: Final = _DECIDE + "return out\n"

# KEYS: two per limit of the call, as for CHECK_AND_SPEND, then its receipt key; ARGV: per limit
# the amount, then the TTL in ms of a 'void' mark. The budgets the receipt names are credited in
# the window it names (a window that ended since has nothing of it), never below zero, and the
# receipt is deleted in the same script: at most one give-back. No receipt yet: the spend has
# not run (or never will); the receipt is marked 'void', so a check arriving late spends
# nothing. Forced spends are never on a receipt: they stay counted for their approval (ADR 0022).
GIVE_BACK_RECEIPT: Final = """
local receipt = KEYS[#KEYS]
local text = redis.call('GET', receipt)
if not text then
  -- Nothing spent yet: the check may still arrive (queued, retransmitted). 'void' makes it
  -- spend nothing when it does.
  redis.call('SET', receipt, 'void', 'PX', ARGV[#ARGV])
  return 0
end
if text == 'void' then return 0 end
redis.call('DEL', receipt)
for item in string.gmatch(text, '[^,]+') do
  local i, window = string.match(item, '^(%d+)=(.+)$')
  i = tonumber(i)
  local key = KEYS[2 * i - 1]
  local f = redis.call('HMGET', key, 'spent', 'reset_at')
  if f[1] and f[2] == window then
    local left = tonumber(f[1]) - tonumber(ARGV[i])
    if left < 0 then left = 0 end
    redis.call('HSET', key, 'spent', string.format('%.17g', left))
  end
end
return 1
"""

# KEYS: two per budget given back: its state key, then the approval marker key of a forced
# spend (a placeholder of the same hash tag otherwise). ARGV: per budget the amount, the window
# end (`reset_at`) it was spent in, and whether it was forced ('1'). Only that same window is
# credited (a window that ended since has nothing of it), never below zero. A forced spend is
# credited only by deleting its marker (still of that window), in this same script: at most
# one give-back per counted approval, and the next Resume spends the amount again.
GIVE_BACK: Final = """
local n = #KEYS / 2
for i = 1, n do
  local key, marker = KEYS[2 * i - 1], KEYS[2 * i]
  local amount, window, forced = tonumber(ARGV[3 * i - 2]), ARGV[3 * i - 1], ARGV[3 * i] == '1'
  local credit = true
  if forced then
    credit = redis.call('GET', marker) == window
    if credit then redis.call('DEL', marker) end
  end
  local f = redis.call('HMGET', key, 'spent', 'reset_at')
  if credit and f[1] and f[2] == window then
    local left = tonumber(f[1]) - amount
    if left < 0 then left = 0 end
    redis.call('HSET', key, 'spent', string.format('%.17g', left))
  end
end
return n
"""
