"""Lua scripts for approval state transitions (DESIGN §7, §12).

Every script touches exactly one key, `KEYS[1]`: a record (`{apr:<id>}`) or, for the pending
cap, one actor's index. That keeps each transition atomic on one Redis Cluster slot. `now` is
always an argument (ARGV[1]) — never `TIME` — so the clock is injectable and replicas replaying
the script agree. Replies are `{code, changed, field, value, ...}`: `code` is "OK" or an error
code name, `changed` is "1" when this call made the transition (the caller then emits the
event and fixes the global indexes, exactly once), followed by the record's fields when the
caller may see them.
"""

from __future__ import annotations

from typing import Final

# The record scripts' common start (the grant scripts' too, grantscripts.py): the record's key,
# the caller's clock, and `reply(code, changed)` = {code, changed, field, value, ...}.
RECORD_PRELUDE: Final = """
local key = KEYS[1]
local now = tonumber(ARGV[1])
local function reply(code, changed)
  local out = {code, changed}
  local h = redis.call('HGETALL', key)
  for i = 1, #h do out[#out + 1] = h[i] end
  return out
end
"""

# Shared helpers, prepended to each script.
_PRELUDE = (
    RECORD_PRELUDE
    + """
local function is_live(status)
  return status == 'pending' or status == 'approved'
end
"""
)

# ARGV: now, ttl_ms, field, value, ...  — HSETs a new record unless the id exists.
CREATE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 1 then return reply('EXISTS', '0') end
for i = 3, #ARGV, 2 do redis.call('HSET', key, ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', key, ARGV[2])
return {'OK', '1'}
"""
)

# ARGV: now. Marks a live record past its expiry `expired`.
EXPIRE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', '0'} end
local f = redis.call('HMGET', key, 'status', 'expires_at')
if is_live(f[1]) and now > tonumber(f[2]) then
  redis.call('HSET', key, 'status', 'expired')
  return reply('OK', '1')
end
return reply('OK', '0')
"""
)

# ARGV: 1 now, 2 verdict ('approved'|'rejected'), 3 approver issuer, 4 approver id,
#       5 approver json, 6 via json ('' if none), 7 note, 8 input hash seen,
#       9 reject_self ('1'|'0'), 10 edited input json ('' for no edit; approvals only),
#       11 edited input hash, 12.. roles the approver holds.
# Checks: who the approver is (eligible roles, self) before what the record is, so that someone
# who may not decide learns nothing about its state. Eligible: holds every approver role, or —
# once escalated (`escalated_at` set, or `escalate_at` passed even if no sweep has marked it
# yet) — every escalation role. Self: the requester never decides a quorum above one, and one of
# a quorum of one only while reject_self is off. A due escalation is marked only by a call that
# is not refused (else the sweep publishes it). The reply's second element lists the events
# this call made, comma-separated and in order ("" for none): escalated, expired, edited,
# voted, approved, rejected. Quorum (docs/approvals.md "Quorum and separation of duties"):
# `votes` holds the distinct (issuer, id) approvals of the current input; the record is
# approved by the vote that makes `quorum` of them while every `distinct_roles` entry can be
# given to a different voter holding it (a bipartite matching). A vote that could no longer let
# the roles be covered within the quorum is refused (DISTINCT_ROLES, followed by the roles still
# missing). An edit replaces the input, keeps the first original, resets the votes and counts
# the editor's.
DECIDE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', ''} end
local f = redis.call('HMGET', key, 'status', 'expires_at', 'req_iss', 'req_id',
  'approver_roles', 'input_hash', 'dec_iss', 'dec_id', 'quorum', 'distinct_roles', 'votes',
  'escalate_at', 'escalated_at', 'escalation_roles', 'edited', 'edited_by')
local verdict, iss, id = ARGV[2], ARGV[3], ARGV[4]
local held = {}
for i = 12, #ARGV do held[ARGV[i]] = true end
local function holds_all(have, roles)
  for _, role in ipairs(roles) do
    if not have[role] then return false end
  end
  return true
end
local function list(raw)
  if raw == false or raw == '' then return {} end
  return cjson.decode(raw)
end
local status = f[1]
local events = {}
local escalation = list(f[14])
local due = f[12] ~= false and f[12] ~= '' and now >= tonumber(f[12])
local escalated = (f[13] ~= false and f[13] ~= '') or due
local eligible = holds_all(held, cjson.decode(f[5]))
if not eligible and escalated and #escalation > 0 then eligible = holds_all(held, escalation) end
if not eligible then return {'FORBIDDEN', ''} end
local quorum = tonumber(f[9] ~= false and f[9] ~= '' and f[9] or '1')
if (ARGV[9] == '1' or quorum > 1) and iss == f[3] and id == f[4] then
  return {'APPROVAL_SELF_APPROVAL', ''}
end
if status == 'expired' then return {'APPROVAL_EXPIRED', ''} end
if is_live(status) and now > tonumber(f[2]) then
  redis.call('HSET', key, 'status', 'expired')
  return reply('APPROVAL_EXPIRED', 'expired')
end
local votes = list(f[11])
local function voted()
  for _, v in ipairs(votes) do
    if v['issuer'] == iss and v['id'] == id then return true end
  end
  return false
end
if status ~= 'pending' then
  -- The same approver repeating the same verdict (a retry after a lost reply) is answered
  -- with the record, not an error; anything else was decided by someone else or differently.
  if status == verdict and ((f[7] == iss and f[8] == id) or (verdict == 'approved' and voted()))
  then return reply('OK', '') end
  return {'APPROVAL_ALREADY_DECIDED', ''}
end
local edit = ARGV[10] ~= ''
if edit and f[6] == ARGV[11] and f[16] ~= false and f[16] ~= '' and voted() then
  local by = cjson.decode(f[16])
  if by['issuer'] == iss and by['id'] == id then return reply('OK', '') end  -- a retried edit
end
-- A rejection of whatever is pending is always safe; an approval must bind the input seen.
if not (verdict == 'rejected' and ARGV[8] == '') and ARGV[8] ~= f[6] then
  return {'APPROVAL_INPUT_MISMATCH', ''}
end
-- The escalation is marked (and reported) only by a call that is not refused: a refusal makes
-- no event, and the sweep must still find it unmarked and publish it.
local function escalate()
  if escalated and (f[13] == false or f[13] == '') then
    redis.call('HSET', key, 'escalated_at', ARGV[1])
    events[#events + 1] = 'escalated'
  end
end
local function decided(as)
  redis.call('HSET', key, 'status', as, 'decided_at', ARGV[1], 'decided_by', ARGV[5],
    'dec_iss', iss, 'dec_id', id, 'decided_via', ARGV[6], 'note', ARGV[7])
  events[#events + 1] = as
  return reply('OK', table.concat(events, ','))
end
if verdict == 'rejected' then
  escalate()
  return decided('rejected')
end
if edit then
  votes = {}
elseif voted() then
  escalate()
  return reply('OK', table.concat(events, ','))  -- counted once
end
-- Separation of duties: a maximum matching of roles to voters (Kuhn's augmenting paths).
local roles = list(f[10])
local voters = {}
for _, v in ipairs(votes) do
  local have = {}
  for _, role in ipairs(v['roles']) do have[role] = true end
  voters[#voters + 1] = have
end
local function matching(n)
  local owner = {}
  local function try(v, seen)
    for r = 1, #roles do
      if voters[v][roles[r]] and not seen[r] then
        seen[r] = true
        if owner[r] == nil or try(owner[r], seen) then
          owner[r] = v
          return true
        end
      end
    end
    return false
  end
  local size = 0
  for v = 1, n do
    if try(v, {}) then size = size + 1 end
  end
  return size, owner
end
voters[#voters + 1] = held
local size = matching(#voters)
if #roles - size > quorum - #voters then
  local _, owner = matching(#voters - 1)
  local out = {'DISTINCT_ROLES', ''}
  for r = 1, #roles do
    if owner[r] == nil then out[#out + 1] = roles[r] end
  end
  return out
end
escalate()
local raw = '[]'
if not edit and f[11] ~= false and f[11] ~= '' then raw = f[11] end
if raw == '[]' then
  raw = '[' .. ARGV[5] .. ']'
else
  raw = string.sub(raw, 1, -2) .. ',' .. ARGV[5] .. ']'
end
redis.call('HSET', key, 'votes', raw)
if edit then
  if f[15] ~= '1' then
    local cur = redis.call('HMGET', key, 'input', 'input_hash')
    redis.call('HSET', key, 'original_input', cur[1], 'original_input_hash', cur[2])
  end
  redis.call('HSET', key, 'input', ARGV[10], 'input_hash', ARGV[11], 'request_hash', ARGV[11],
    'edited', '1', 'edited_by', ARGV[5])
  events[#events + 1] = 'edited'
end
if #voters >= quorum then return decided('approved') end
if not edit then events[#events + 1] = 'voted' end
return reply('OK', table.concat(events, ','))
"""
)

# ARGV: now. A pending, unexpired record whose `escalate_at` has come is escalated: once
# (`escalated_at` is set by the first caller, any replica; "1" tells that caller to publish).
ESCALATE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', '0'} end
local f = redis.call('HMGET', key, 'status', 'expires_at', 'escalate_at', 'escalated_at')
if f[1] ~= 'pending' or now > tonumber(f[2]) or not f[3] or f[3] == ''
  or now < tonumber(f[3]) or (f[4] and f[4] ~= '') then
  return reply('OK', '0')
end
redis.call('HSET', key, 'escalated_at', ARGV[1])
return reply('OK', '1')
"""
)

# ARGV: now, requester issuer, requester id, surface, execution id, reject_self ('1'|'0').
# The order of checks is seed 001's resume order; another requester or surface gets exactly the
# unknown-id answer (concealed, SI-8). SI-12: only `approved` becomes `consumed`, once. With
# reject_self, or a quorum above one, an approval the requester decided or voted for is refused.
CONSUME: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', '0'} end
local f = redis.call('HMGET', key, 'status', 'expires_at', 'req_iss', 'req_id', 'surface',
  'dec_iss', 'dec_id', 'resumed_execution_id', 'quorum', 'votes')
if f[3] ~= ARGV[2] or f[4] ~= ARGV[3] or f[5] ~= ARGV[4] then
  return {'APPROVAL_NOT_FOUND', '0'}
end
local status = f[1]
local changed = '0'
if is_live(status) and now > tonumber(f[2]) then
  redis.call('HSET', key, 'status', 'expired')
  status = 'expired'
  changed = '1'
end
if status == 'pending' then return {'APPROVAL_PENDING', '0'} end
if status == 'rejected' then return {'APPROVAL_REJECTED', '0'} end
if status == 'expired' then
  if changed == '1' then return reply('APPROVAL_EXPIRED', '1') end
  return {'APPROVAL_EXPIRED', '0'}
end
if status == 'consumed' and f[8] == ARGV[5] then return reply('OK', '0') end
if status == 'consumed' or status == 'executed' then return reply('APPROVAL_CONSUMED', '0') end
local quorum = tonumber(f[9] ~= false and f[9] ~= '' and f[9] or '1')
if ARGV[6] == '1' or quorum > 1 then
  if f[6] == f[3] and f[7] == f[4] then return {'APPROVAL_SELF_APPROVAL', '0'} end
  if f[10] ~= false and f[10] ~= '' then
    for _, v in ipairs(cjson.decode(f[10])) do
      if v['issuer'] == f[3] and v['id'] == f[4] then return {'APPROVAL_SELF_APPROVAL', '0'} end
    end
  end
end
redis.call('HSET', key, 'status', 'consumed', 'consumed_at', ARGV[1],
  'resumed_execution_id', ARGV[5])
return reply('OK', '1')
"""
)

# ARGV: now, execution id, envelope, outcome code. consumed → executed by the execution that
# consumed it; repeating it is harmless (the first stored envelope stays).
FINISH: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', '0'} end
local f = redis.call('HMGET', key, 'status', 'resumed_execution_id')
if f[1] == 'executed' then return reply('OK', '0') end
if f[1] ~= 'consumed' or f[2] ~= ARGV[2] then return {'APPROVAL_CONSUMED', '0'} end
redis.call('HSET', key, 'status', 'executed', 'finished_at', ARGV[1],
  'outcome_envelope', ARGV[3], 'outcome_code', ARGV[4])
return reply('OK', '1')
"""
)

# ARGV: now, execution id. consumed → approved again, only by the execution that consumed it:
# its call failed before any request reached the upstream for a reason other than governance
# (docs/approvals.md "Released"). The consuming execution id is cleared, so the next Resume
# consumes it as new — again at most once (SI-12); `releases` counts how often this happened.
RELEASE: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'APPROVAL_NOT_FOUND', '0'} end
local f = redis.call('HMGET', key, 'status', 'resumed_execution_id')
if f[1] ~= 'consumed' or f[2] ~= ARGV[2] then return {'APPROVAL_CONSUMED', '0'} end
redis.call('HSET', key, 'status', 'approved', 'resumed_execution_id', '', 'released_at', ARGV[1])
redis.call('HDEL', key, 'consumed_at')
redis.call('HINCRBY', key, 'releases', 1)
return reply('OK', '1')
"""
)

# ARGV: requester issuer, requester id, surface. The record when it belongs to that requester on
# that surface, else an empty reply — for another's record exactly what an unknown id gets: the
# same one HMGET of three short flat fields, no HGETALL, nothing for the caller to parse (SI-8).
OWNED: Final = """
local key = KEYS[1]
local f = redis.call('HMGET', key, 'req_iss', 'req_id', 'surface')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or f[3] ~= ARGV[3] then return {} end
return redis.call('HGETALL', key)
"""

# KEYS[1]: one actor's pending index (zset id -> expires_at).
# ARGV: now, max pending, approval id, expires_at, key ttl ms. Drops entries past their expiry,
# then admits the id when under the cap (idempotent for an id already admitted).
RESERVE: Final = """
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. ARGV[1])
if redis.call('ZSCORE', key, ARGV[3]) then return 1 end
if redis.call('ZCARD', key) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', key, ARGV[4], ARGV[3])
if redis.call('PTTL', key) < tonumber(ARGV[5]) then redis.call('PEXPIRE', key, ARGV[5]) end
return 1
"""

# KEYS[1]: one index. ARGV: ttl ms. Extends the key's TTL to at least `ttl`, never shortens it
# (a shorter-lived record must not cut an index that lists a longer-lived one).
EXTEND: Final = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 1
"""

# ARGV: now, the requesting execution id. GONE when there is no record (its reservation may be
# in the indexes: the caller clears them). A pending record whose requester was never told of it
# (the execution that asked ended first: its caller cancelled while the request was being
# stored) is deleted, only by that execution and only while still pending; undecided, it was
# never an approval anyone could use (issue 25). Any other state: left as it is.
WITHDRAW: Final = (
    _PRELUDE
    + """
if redis.call('EXISTS', key) == 0 then return {'GONE', '0'} end
local f = redis.call('HMGET', key, 'status', 'requesting_execution_id')
if f[1] ~= 'pending' or f[2] ~= ARGV[2] then return {'APPROVAL_ALREADY_DECIDED', '0'} end
redis.call('DEL', key)
return {'OK', '1'}
"""
)

ALL: Final[dict[str, str]] = {
    "create": CREATE,
    "expire": EXPIRE,
    "decide": DECIDE,
    "escalate": ESCALATE,
    "consume": CONSUME,
    "finish": FINISH,
    "release": RELEASE,
    "withdraw": WITHDRAW,
    "reserve": RESERVE,
    "owned": OWNED,
    "extend": EXTEND,
}
