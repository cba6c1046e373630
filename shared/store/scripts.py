"""The store's Lua scripts. Each starts with a header naming its KEYS and ARGV.

Scripts are registered once per client (EVALSHA with automatic reload by redis-py).
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------
COMMIT = r"""
-- commit: apply a batch of object writes atomically and append one log entry per write.
--
-- KEYS[1]          the event log stream
-- KEYS[2k], KEYS[2k+1]  (k = 1..) the object hash and the resourceVersion hash of one kind
-- then           the cluster's meta hash (field "epoch": the log's identity), then the
--                  compaction point (Keys.log_snapshot_id)
-- KEYS[#KEYS]      with a fence only: the hash of the fence (see ARGV[5])
-- ARGV[1]          number of operations N
-- ARGV[2]          "1" = all-or-nothing (any failed precondition writes nothing), "0" = each op alone
-- ARGV[3]          schema version written into each entry
-- ARGV[4]          approximate max length of the log (0 = no trimming)
-- ARGV[5]          fence token ("" = no fence): write only while field ARGV[6] of the hash
--                  KEYS[#KEYS] holds a value "<token>:..." (a workqueue lease, see
--                  control_scripts: wq:owner), else every op is {"fenced", ""}
-- ARGV[6]          fence field (the leased workqueue key)
-- ARGV[7]          the log id the writer's log mark saw last ("0-0": none), checked before
--                  writing (shared.store.logmark): a write never hides a rewind
-- ARGV[8]          who writes (the API server's user; "" = not recorded): field "u" of each entry
-- then 6 values per operation:
--   mode      create | ensure | update | delete | record
--             create: fails with "exists" if present; ensure: create-if-absent, "exists" is
--             not a failure; update/delete: the current resourceVersion must equal `expected`
--             ("*" = any, but it must exist); record: append a log entry only (decisions)
--   kindpair  k: the object is in KEYS[2k] / KEYS[2k+1]
--   kind      kind name written to the entry
--   field     "<namespace>/<name>"
--   expected  resourceVersion precondition ("" for create/ensure/record)
--   payload   msgpack of the object without resourceVersion (decision record for record)
--
-- Returns one {status, value} pair per op: {"ok", id} | {"exists", rv} | {"conflict", rv}
-- | {"notfound", ""} | {"skipped", ""} (all-or-nothing batch aborted by another op)
-- | {"fenced", ""} (the fence token no longer holds the lease: nothing written); then
-- the mark's check: {epoch|false, 1|0 (ARGV[7] is in the log), compaction point|false}.
local n = tonumber(ARGV[1])
local atomic = ARGV[2] == "1"
local version = ARGV[3]
local maxlen = tonumber(ARGV[4])
local fenced = ARGV[5] ~= ""
local meta_at = #KEYS - 1
if fenced then meta_at = #KEYS - 2 end
local seen = ARGV[7]
local check = {redis.call("HGET", KEYS[meta_at], "epoch"), 1, false}
if seen ~= "0-0" and #redis.call("XRANGE", KEYS[1], seen, seen, "COUNT", 1) == 0 then
  check = {check[1], 0, redis.call("GET", KEYS[meta_at + 1])}
end
local writer = ARGV[8]
local results = {}
local failed = false
if fenced then
  local owner = redis.call("HGET", KEYS[#KEYS], ARGV[6])
  if not owner or string.match(owner, "^([^:]*):") ~= ARGV[5] then
    for i = 1, n do results[i] = {"fenced", ""} end
    results[n + 1] = check
    return results
  end
end
for i = 0, n - 1 do
  local b = 9 + i * 6
  local mode = ARGV[b]
  local pair = tonumber(ARGV[b + 1])
  local field = ARGV[b + 3]
  local expected = ARGV[b + 4]
  local res = {"ok", ""}
  if mode ~= "record" then
    local cur = redis.call("HGET", KEYS[2 * pair + 1], field)
    if mode == "create" or mode == "ensure" then
      if cur then
        res = {"exists", cur}
        if mode == "create" then failed = true end
      end
    else
      if not cur then
        res = {"notfound", ""}
        failed = true
      elseif expected ~= "*" and expected ~= cur then
        res = {"conflict", cur}
        failed = true
      end
    end
  end
  results[i + 1] = res
end
if atomic and failed then
  for i = 1, n do
    if results[i][1] == "ok" then results[i] = {"skipped", ""} end
  end
  results[n + 1] = check
  return results
end
for i = 0, n - 1 do
  if results[i + 1][1] == "ok" then
    local b = 9 + i * 6
    local mode = ARGV[b]
    local pair = tonumber(ARGV[b + 1])
    local kind = ARGV[b + 2]
    local field = ARGV[b + 3]
    local payload = ARGV[b + 5]
    local etype = "MODIFIED"
    if mode == "create" or mode == "ensure" then etype = "ADDED"
    elseif mode == "delete" then etype = "DELETED"
    elseif mode == "record" then etype = "DECISION" end
    local xadd = {"XADD", KEYS[1]}
    if maxlen > 0 then
      xadd[#xadd + 1] = "MAXLEN"; xadd[#xadd + 1] = "~"; xadd[#xadd + 1] = maxlen
    end
    for _, v in ipairs({"*", "v", version, "t", etype, "k", kind, "n", field, "o", payload}) do
      xadd[#xadd + 1] = v
    end
    if writer ~= "" then xadd[#xadd + 1] = "u"; xadd[#xadd + 1] = writer end
    local id = redis.call(unpack(xadd))
    if mode == "delete" then
      redis.call("HDEL", KEYS[2 * pair], field)
      redis.call("HDEL", KEYS[2 * pair + 1], field)
    elseif mode ~= "record" then
      redis.call("HSET", KEYS[2 * pair], field, payload)
      redis.call("HSET", KEYS[2 * pair + 1], field, id)
    end
    results[i + 1] = {"ok", id}
  end
end
results[n + 1] = check
return results
"""

# ------------------------------------------------------------------------------------------
SNAPSHOT = r"""
-- snapshot: read the log tip and whole kinds of the materialised view in one atomic step,
-- with the reads of a log mark's check (shared.store.logmark) in the same step.
--
-- KEYS[1]          the event log stream
-- KEYS[2]          the cluster's meta hash (field "epoch": the log's identity)
-- KEYS[3]          the compaction point (Keys.log_snapshot_id)
-- KEYS[2k+2], KEYS[2k+3]  the object hash and resourceVersion hash of each kind requested
-- ARGV[1]          the log id the mark saw last ("0-0": none)
--
-- Returns {tip, epoch|false, 1|0 (ARGV[1] is in the log), compaction point|false,
-- {fields..., payloads...}, {fields..., rvs...}, ...}: tip is the newest log id ("0-0" when
-- empty); then per kind HGETALL of the object hash and of the version hash.
local last = redis.call("XREVRANGE", KEYS[1], "+", "-", "COUNT", 1)
local tip = "0-0"
if #last > 0 then tip = last[1][1] end
local found = 0
if ARGV[1] ~= "0-0" and #redis.call("XRANGE", KEYS[1], ARGV[1], ARGV[1], "COUNT", 1) > 0 then
  found = 1
end
local out = {tip, redis.call("HGET", KEYS[2], "epoch"), found, redis.call("GET", KEYS[3])}
for k = 4, #KEYS do
  out[#out + 1] = redis.call("HGETALL", KEYS[k])
end
return out
"""

# ------------------------------------------------------------------------------------------
NEWER_POSITION = r"""
-- newer_position: claim the right to write a status computed at log position ARGV[2].
--
-- KEYS[1]   hash: DaemonSet key → log position of the newest status written
-- KEYS[2]   the event log stream
-- ARGV[1]   the DaemonSet key
-- ARGV[2]   the log position ("<ms>-<seq>") the status was computed at
--
-- Returns 1 (and records ARGV[2]) unless a status computed at a later position was already
-- claimed (0), so status-writers racing on one DaemonSet never go back in time; and -1,
-- recording nothing, for a position that is malformed or that the log has not reached (no
-- sync can have read it: the message is forged or corrupt, and recording it would make
-- every true status after it "older" for good).
local nms, nseq = string.match(ARGV[2], "^(%d+)-(%d+)$")
if not nms then return -1 end
nms, nseq = tonumber(nms), tonumber(nseq)
local last = redis.call("XREVRANGE", KEYS[2], "+", "-", "COUNT", 1)
local tip = "0-0"
if #last > 0 then tip = last[1][1] end
local tms, tseq = string.match(tip, "^(%d+)-(%d+)$")
tms, tseq = tonumber(tms), tonumber(tseq)
if nms > tms or (nms == tms and nseq > tseq) then return -1 end
local cur = redis.call("HGET", KEYS[1], ARGV[1])
if cur then
  local cms, cseq = string.match(cur, "^(%d+)-(%d+)$")
  if cms then
    cms, cseq = tonumber(cms), tonumber(cseq)
    if cms > nms or (cms == nms and cseq > nseq) then return 0 end
  end
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return 1
"""

# ------------------------------------------------------------------------------------------
ENSURE_EPOCH = r"""
-- ensure_epoch: the log's identity (shared.store.logmark), created with the log.
--
-- KEYS[1]   the event log stream
-- KEYS[2]   the cluster's meta hash (field "epoch")
-- ARGV[1]   a new random epoch, stored only if the log exists and has none yet
--
-- Returns the epoch, or false while there is no log (nothing is written then: reading an
-- empty prefix leaves it empty, so `replay` can still rebuild into it).
if redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("HSETNX", KEYS[2], "epoch", ARGV[1])
end
return redis.call("HGET", KEYS[2], "epoch")
"""
