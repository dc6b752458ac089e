"""Lua scripts of the grant store (docs/approvals.md "Grants", ADR 0038).

A grant's record and its use receipts share the grant's hash tag (`{grt:<id>}`), so a take, a
give-back, a revocation or an expiry is one script on one Redis Cluster slot, and the status is
read inside Redis on every use: a revocation is in force for the next take on every replica.
The indexes share the `{grt-idx}` slot, so admitting a grant (the live cap and every index) is
one script too. `now` is always an argument, never `TIME`, so the clock is injectable.

Replies of the record scripts are `{code, changed, field, value, ...}`, as the approval
scripts' (`scripts.py`): `changed` is "1" when this call made a transition whose event it owes
(exhausted, expired, revoked).
"""

from __future__ import annotations

from typing import Final

from gateway.state.approvals.scripts import RECORD_PRELUDE

_PRELUDE = (
    RECORD_PRELUDE
    + """
-- An active or exhausted grant past its expiry becomes expired (once): true when it did.
local function expire_if_due()
  local f = redis.call('HMGET', key, 'status', 'expires_at')
  if (f[1] == 'active' or f[1] == 'exhausted') and now > tonumber(f[2]) then
    redis.call('HSET', key, 'status', 'expired')
    return true
  end
  return false
end
"""
)

# ARGV: now, ttl_ms, field, value, ... — HSETs a new grant unless the id exists.
CREATE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 1 then return reply('EXISTS', '0') end
for i = 3, #ARGV, 2 do redis.call('HSET', key, ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', key, ARGV[2])
return {'OK', '1'}
"""
)

# ARGV: now. The grant, expired first when it is past its expiry (lazy expiry of reads).
READ: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {} end
if expire_if_due() then return reply('OK', '1') end
return reply('OK', '0')
"""
)

# KEYS: the grant, this execution's receipt. ARGV: now, amount ('' when the grant has none),
# receipt ttl ms. Refuses (code, nothing changed) when the grant is gone, not active, past its
# expiry (then marks it expired: changed '1', with the record), at max_uses, or when the amount
# does not fit in max_total. Otherwise counts the use, adds the amount, leaves the receipt (the
# amount) for a give-back, and marks the grant exhausted when no further use can fit (changed
# '1'); the reply is short: {'OK', changed, uses, total}. A receipt already there: a retry of
# this take (OK, nothing counted twice); 'void': the give-back of this execution ran first, so
# the take counts nothing.
TAKE: Final = (
    _PRELUDE
    + """
local receipt = KEYS[2]
if redis.call('EXISTS', key) == 0 then return {'GONE', '0'} end
local held = redis.call('GET', receipt)
if held == 'void' then return {'VOID', '0'} end
local function taken(changed)
  local f = redis.call('HMGET', key, 'uses', 'total')
  return {'OK', changed, f[1], f[2]}
end
if held then return taken('0') end
if expire_if_due() then return reply('EXPIRED', '1') end
local f = redis.call('HMGET', key, 'status', 'uses', 'max_uses', 'total', 'max_total')
if f[1] ~= 'active' then return {'INACTIVE', '0'} end
local uses, max_uses = tonumber(f[2]), tonumber(f[3])
local total, max_total = tonumber(f[4]), tonumber(f[5])
if max_uses > 0 and uses >= max_uses then
  redis.call('HSET', key, 'status', 'exhausted')
  return {'EXHAUSTED', '1'}
end
local amount = 0
if ARGV[2] ~= '' then amount = tonumber(ARGV[2]) end
if max_total > 0 and total + amount > max_total then return {'OVER', '0'} end
uses = redis.call('HINCRBY', key, 'uses', 1)
if amount ~= 0 then total = tonumber(redis.call('HINCRBYFLOAT', key, 'total', ARGV[2])) end
redis.call('SET', receipt, tostring(amount), 'PX', ARGV[3])
if (max_uses > 0 and uses >= max_uses) or (max_total > 0 and total >= max_total) then
  redis.call('HSET', key, 'status', 'exhausted')
  return taken('1')
end
return taken('0')
"""
)

# KEYS: the grant, the execution's receipt. ARGV: now, void ttl ms. Gives back the use the
# receipt names, once: uses - 1, total - amount, and an exhausted grant that has room again is
# active again. No receipt yet: the take has not run (or never will); the receipt is marked
# 'void' so a take arriving late counts nothing. Replies 1 when a use was given back.
GIVE_BACK: Final = """
local key, receipt = KEYS[1], KEYS[2]
local held = redis.call('GET', receipt)
if not held then
  redis.call('SET', receipt, 'void', 'PX', ARGV[2])
  return 0
end
if held == 'void' then return 0 end
redis.call('DEL', receipt)
if redis.call('EXISTS', key) == 0 then return 0 end
redis.call('HINCRBY', key, 'uses', -1)
local amount = tonumber(held)
if amount ~= 0 then redis.call('HINCRBYFLOAT', key, 'total', -amount) end
local f = redis.call('HMGET', key, 'status', 'expires_at')
if f[1] == 'exhausted' and tonumber(ARGV[1]) <= tonumber(f[2]) then
  redis.call('HSET', key, 'status', 'active')
end
return 1
"""

# ARGV: now, revoked_by json, via json ('' if none), note. active|exhausted → revoked.
REVOKE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', '0'} end
if expire_if_due() then return reply('APPROVAL_ALREADY_DECIDED', '1') end
local status = redis.call('HGET', key, 'status')
if status ~= 'active' and status ~= 'exhausted' then
  return reply('APPROVAL_ALREADY_DECIDED', '0')
end
redis.call('HSET', key, 'status', 'revoked', 'revoked_at', ARGV[1], 'revoked_by', ARGV[2],
  'revoked_via', ARGV[3], 'revoke_note', ARGV[4])
return reply('OK', '1')
"""
)

# KEYS: the live index, the listing index, the (whom, what) match index, the specs — all
# `{grt-idx}`. ARGV: now, max live, grant id, expires_at, listing ttl ms (expiry + retention),
# match ttl ms (expiry), the oldest expiry a listed grant may have (now - retention), the spec.
# Prunes live entries (and their specs) and match entries past their expiry and listing
# entries past their retention, then admits the id when under the cap (idempotent for an id
# already admitted). Key TTLs are extended, never shortened.
ADMIT: Final = """
local live, all, match, spec = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
for _, old in ipairs(redis.call('ZRANGEBYSCORE', live, '-inf', '(' .. ARGV[1])) do
  redis.call('HDEL', spec, old)
end
redis.call('ZREMRANGEBYSCORE', live, '-inf', '(' .. ARGV[1])
redis.call('ZREMRANGEBYSCORE', match, '-inf', '(' .. ARGV[1])
redis.call('ZREMRANGEBYSCORE', all, '-inf', '(' .. ARGV[7])
if not redis.call('ZSCORE', live, ARGV[3]) then
  if redis.call('ZCARD', live) >= tonumber(ARGV[2]) then return 0 end
end
redis.call('ZADD', live, ARGV[4], ARGV[3])
redis.call('ZADD', all, ARGV[4], ARGV[3])
redis.call('ZADD', match, ARGV[4], ARGV[3])
redis.call('HSET', spec, ARGV[3], ARGV[8])
local function extend(k, ttl)
  if redis.call('PTTL', k) < tonumber(ttl) then redis.call('PEXPIRE', k, ttl) end
end
extend(live, ARGV[6])
extend(all, ARGV[5])
extend(match, ARGV[6])
extend(spec, ARGV[6])
return 1
"""

# KEYS: the live index, the match index, the specs. ARGV: grant id. A grant that can never be
# used again (revoked, expired) leaves the live cap, its match index and the specs.
RETIRE: Final = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"""

# KEYS: the specs, then the match indexes of one call's (whom, what) pairs — all `{grt-idx}`.
# ARGV: now, entries read per index. The candidates of a call in one round trip: each grant id
# not past its expiry, once, with its spec (what matching needs: expressions, caps, roles); a
# grant without a spec (retired meanwhile) is left out. Liveness is the take's to decide.
MATCH: Final = """
local spec = KEYS[1]
local seen, out = {}, {}
for i = 2, #KEYS do
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[i], ARGV[1], '+inf', 'LIMIT', 0, ARGV[2])) do
    if not seen[id] then
      seen[id] = true
      local blob = redis.call('HGET', spec, id)
      if blob then
        out[#out + 1] = id
        out[#out + 1] = blob
      end
    end
  end
end
return out
"""

ALL: Final[dict[str, str]] = {
    "create": CREATE,
    "read": READ,
    "take": TAKE,
    "give_back": GIVE_BACK,
    "revoke": REVOKE,
    "admit": ADMIT,
    "retire": RETIRE,
    "match": MATCH,
}
