"""Lua scripts of the control-state ports: workqueue, expectations, backoff, leader lease,
and the watcher's batch that writes to several of them at once.

Each script starts with a header naming its KEYS and ARGV. Times come from Redis ``TIME``
inside the script (milliseconds), so every replica shares one clock. Scripts are registered
once per client (EVALSHA, reloaded by redis-py on NOSCRIPT).
"""

from __future__ import annotations

from shared.control.workqueue import MAX_NODE_HINTS

# ---- workqueue ---------------------------------------------------------------------------
#
# Every workqueue script gets the same KEYS, in this order (``WQ_KEYS`` in workqueue.py):
#
#   KEYS[1]  wq:queue       list   FIFO of queued keys (each dirty, none processing)
#   KEYS[2]  wq:dirty       set    an older version's dirty set (only WQ_UPGRADE reads it)
#   KEYS[3]  wq:processing  zset   key → lease deadline (ms)
#   KEYS[4]  wq:owner       hash   key → "<token>:<leased ms>:<worker>"
#   KEYS[5]  wq:waiting     zset   key → ready time (ms) of a delayed add
#   KEYS[6]  wq:failures    hash   key → failures counted by the rate limiter
#   KEYS[7]  wq:bucket      hash   token bucket: tokens, last (ms)
#   KEYS[8]  wq:signal      list   wake-up tokens for workers blocked in BLPOP
#   KEYS[9]  wq:stats       hash   counters: adds, retries, gets (= token sequence), done,
#                                  stale, reclaimed
#   KEYS[10] wq:enqueued    hash   an older version's enqueue stamps (only WQ_UPGRADE)
#   KEYS[11] wq:shutdown    string present while shut down
#   KEYS[12] log            stream the event log (read only: its newest id)
#   KEYS[13] wq:redelivered set    keys reclaimed from an expired lease, not handed out since
#   KEYS[14] wq:hints       hash   the dirty keys: each → the ms it became dirty, then "*" (a
#                                  full sync is asked for: a plain add) or its node hints,
#                                  "\n<node>\n<node>\n..." (as many hints as newlines less
#                                  one), e.g. "1700000000000*" or "1700000000000\nnode-1\n"
#
# Invariants kept by every script: queue == dirty - processing, no duplicates in queue
# (dirty: the keys of hints); redelivered is a subset of queue and of the keys marked full;
# a dirty key is marked full or holds its node hints, maybe no node ("\n": a sync of no
# node) (``shared.control.workqueue`` explains them); and
# the signal list holds min(len(queue), SIGNAL_CAP) tokens (at least 1 while shut down), so
# a worker blocked on it wakes whenever there is work: a script that puts no key on the
# queue and takes none off leaves it alone (the worker whose BLPOP took a token calls
# ``get``, which sets it right). WATCHER_BATCH (below) gets these KEYS
# too, plus its own, and keeps the same invariants through the same functions.

_WQ_PRELUDE = r"""
local Q, DIRTY, PROC, OWNER, WAIT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FAIL, BUCKET, SIGNAL, STATS = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local ENQ, SHUT, LOG, REDELIVERED = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local HINTS = KEYS[14]
local FULL = '*'  -- the value of hints for a key whose next hand-out is a full sync
local SIGNAL_CAP = 64
local MAX_HINTS = """ + str(MAX_NODE_HINTS) + r"""

local clock = nil
-- Redis' time (ms), read once per call, when first needed
local function now_ms()
  if clock == nil then
    local t = redis.call('TIME')
    clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return clock
end

local function is_down()
  return redis.call('EXISTS', SHUT) == 1
end

local pushed = false  -- whether this call put a key on the queue or a token on the signal
local pushed_len = nil  -- the queue's length after this call's last RPUSH of a key

-- a dirty key's entry in hints: (the ms it became dirty, as stored: '' if an older version
-- wrote it without; what its next hand-out syncs: FULL or its node hints)
local function entry_of(stored)
  local enq, mark = string.match(stored, '^(%d*)(.*)$')
  if mark == '' then mark = '\n' end
  return enq, mark
end

local function stamp(now)
  return string.format('%d', now or now_ms())
end

-- client-go Add of one key (the caller has checked shutdown): the key's entry in hints if
-- it was dirty already, else false, and then the key is queued unless it is being
-- processed (the caller writes its entry). Redis' time is read only for a key newly dirty.
local function add_one(key)
  local stored = redis.call('HGET', HINTS, key)
  if stored then return stored end
  if not redis.call('ZSCORE', PROC, key) then
    pushed_len = redis.call('RPUSH', Q, key)
    pushed = true
  end
  return false
end

-- client-go Add for a full sync; 1 if newly dirty. The adds take ``now`` (ms) when the
-- caller has it; nil: read when needed
local function add_full(key, now)
  local stored = add_one(key)
  if not stored then
    redis.call('HSET', HINTS, key, stamp(now) .. FULL)
    return 1
  end
  local enq, mark = entry_of(stored)
  if mark ~= FULL then redis.call('HSET', HINTS, key, enq .. FULL) end
  return 0
end

-- Add with node hints: the m node names ARGV[first..first+m-1] (m = 0: a sync of no node);
-- 1 if newly dirty. The hints of a key already dirty are written only when they change,
-- none for one marked full (a full sync covers every node).
local function add_hinted(key, first, m, now)
  local stored = add_one(key)
  local enq, held
  if stored then
    enq, held = entry_of(stored)
    if held == FULL then return 0 end
  else
    enq, held = stamp(now), '\n'
  end
  local before = held
  local _, newlines = string.gsub(held, '\n', '')
  local held_n = newlines - 1
  for j = first, first + m - 1 do
    if not string.find(held, '\n' .. ARGV[j] .. '\n', 1, true) then
      held = held .. ARGV[j] .. '\n'
      held_n = held_n + 1
    end
  end
  if held_n > MAX_HINTS then
    redis.call('HSET', HINTS, key, enq .. FULL)
  elseif not stored or held ~= before then
    redis.call('HSET', HINTS, key, enq .. held)
  end
  if stored then return 0 end
  return 1
end

-- add_hinted for each group in ARGV[first..last] (key, m, then m node names); the number of
-- keys newly dirty
local function add_hinted_groups(first, last, now)
  local n, i = 0, first
  while i <= last do
    local m = tonumber(ARGV[i + 1])
    n = n + add_hinted(ARGV[i], i + 2, m, now)
    i = i + 2 + m
  end
  return n
end

local function count(field, n)
  if n ~= 0 then redis.call('HINCRBY', STATS, field, n) end
end

-- down: whether the queue is shut down, when the caller has looked already (nil: look);
-- qlen: the queue's length, when the caller knows it (nil: read it)
local function sync_signal(down, qlen)
  local want = math.min(qlen or redis.call('LLEN', Q), SIGNAL_CAP)
  if want == 0 then
    if down == nil then down = is_down() end
    if down then want = 1 end
  end
  local have = redis.call('LLEN', SIGNAL)
  if have < want then
    local tokens = {}
    for i = 1, want - have do tokens[i] = '1' end
    redis.call('RPUSH', SIGNAL, unpack(tokens))
  elseif have > want then
    if want == 0 then redis.call('DEL', SIGNAL) else redis.call('LTRIM', SIGNAL, 0, want - 1) end
  end
end

local function token_of(owner)
  return string.match(owner, '^(%d+):')
end

-- whether ``token`` holds the lease on ``key`` (a stale one is counted)
local function holds(key, token)
  local owner = redis.call('HGET', OWNER, key)
  if owner and token_of(owner) == token then return true end
  count('stale', 1)
  return false
end

-- drop a key's lease entries
local function release(key)
  redis.call('ZREM', PROC, key)
  redis.call('HDEL', OWNER, key)
end

-- client-go Done for the holder of lease ``token`` on ``key``: false when the lease is stale
-- (nothing changes), else true and, when the key is dirty (the queue changes only then),
-- the queue's length after it was queued again
local function done_one(key, token)
  if not holds(key, token) then return false end
  release(key)
  count('done', 1)
  if redis.call('HEXISTS', HINTS, key) == 1 then return true, redis.call('RPUSH', Q, key) end
  return true
end

-- done_one for a worker that asks for its next key in the same call (done_then_get): a
-- dirty key that would go alone onto an empty queue stays out of it, to be handed back as
-- ``direct`` by hand_out (which queues it where the push would have put it, if anything
-- else is queued meanwhile). Returns done, the queue's length when known, then ``direct``
-- and its entry in hints; a key handed back keeps its lease entries until hand_out
-- overwrites them (or releases them, if it queues the key instead)
local function done_before_get(key, token)
  if not holds(key, token) then return false end
  count('done', 1)
  local stored = redis.call('HGET', HINTS, key)
  if stored and redis.call('LLEN', Q) == 0 then return true, 0, key, stored end
  release(key)
  if not stored then return true end
  return true, redis.call('RPUSH', Q, key)
end

-- AddAfter once the delay is known (shutdown and the retry count are the caller's)
local function add_after(key, now, delay_ms)
  now = now or now_ms()
  if delay_ms <= 0 then
    count('adds', add_full(key, now))
    sync_signal()
    return
  end
  local ready = now + delay_ms
  local first = redis.call('ZRANGE', WAIT, 0, 0, 'WITHSCORES')
  redis.call('ZADD', WAIT, 'LT', ready, key)
  if #first == 0 or ready < tonumber(first[2]) then
    redis.call('RPUSH', SIGNAL, 'w')  -- wake blocked workers to shorten their wait
    pushed = true
  end
end
"""

WQ_ADD = r"""
-- add: client-go Add for a batch of keys (ignored while shut down).
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV: the keys to add
-- Returns the number of keys newly marked dirty.
""" + _WQ_PRELUDE + r"""
if is_down() then return 0 end
local n = 0
for i = 1, #ARGV do n = n + add_full(ARGV[i]) end
count('adds', n)
if pushed then sync_signal(false, pushed_len) end
return n
"""

WQ_ADD_NODES = r"""
-- add_nodes: Add with node hints for a batch of keys (ignored while shut down); a key's
-- hints are kept for its next hand-out unless a full sync is pending for it.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV: groups of: key, m, then m node names (m = 0: a sync of no node)
-- Returns the number of keys newly marked dirty.
""" + _WQ_PRELUDE + r"""
if is_down() then return 0 end
local n = add_hinted_groups(1, #ARGV)
count('adds', n)
if pushed then sync_signal(false, pushed_len) end
return n
"""

_WQ_HAND_OUT = r"""
-- get's work (see WQ_GET): promote, reclaim, hand out the head of the queue to ``worker``;
-- returns WQ_GET's reply
local function hand_out(worker, lease_ms, batch, qlen, direct, direct_hints)
  local now = now_ms()
  local down = is_down()
  if not down then  -- the delaying queue stops promoting at shutdown (its Add is a no-op)
    local due = redis.call('ZRANGE', WAIT, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch)
    local n = 0
    for _, key in ipairs(due) do
      redis.call('ZREM', WAIT, key)
      local before = pushed_len
      n = n + add_full(key, now)
      if pushed_len ~= before then qlen = pushed_len end
      if key == direct then direct_hints = nil end  -- marked full now: read again below
    end
    count('adds', n)
  end
  if direct and qlen ~= 0 then  -- promoted keys queue behind it, as after its own push
    release(direct)
    qlen = redis.call('LPUSH', Q, direct)
    direct = nil
  end
  local expired = redis.call('ZRANGE', PROC, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch)
  for i = #expired, 1, -1 do  -- latest deadline first: the earliest ends at the front
    local key = expired[i]
    if key ~= direct then  -- (done already: its lease entries are its next lease's)
      release(key)
      count('reclaimed', 1)
      local stored = redis.call('HGET', HINTS, key)
      if stored or not down then  -- Done (pushes a dirty key) + Add (ignored while shut down)
        local enq = stored and entry_of(stored) or ''
        if enq == '' then enq = stamp(now) end
        redis.call('HSET', HINTS, key, enq .. FULL)
        redis.call('SADD', REDELIVERED, key)
        qlen = redis.call('LPUSH', Q, key)
      end
    end
  end
  if direct and qlen ~= 0 then  -- reclaimed keys go before it, as after its own push
    release(direct)
    qlen = redis.call('RPUSH', Q, direct)
    direct = nil
  end
  local key = direct
  if key then
    qlen = 0
  else
    key = redis.call('LPOP', Q)
    if key and qlen then qlen = qlen - 1 end
  end
  local result
  if key then
    local token = redis.call('HINCRBY', STATS, 'gets', 1)
    local deadline = now + lease_ms
    redis.call('ZADD', PROC, deadline, key)
    redis.call('HSET', OWNER, key, token .. ':' .. string.format('%d', now) .. ':' .. worker)
    local stored = direct_hints
    if key ~= direct or not stored then stored = redis.call('HGET', HINTS, key) end
    local enq, hinted = '', FULL  -- a queued key has its entry; none: taken as full
    if stored then
      redis.call('HDEL', HINTS, key)
      enq, hinted = entry_of(stored)
    end
    if enq == '' then enq = string.format('%d', now) end
    local tip = redis.call('XREVRANGE', LOG, '+', '-', 'COUNT', 1)
    local position = '0-0'
    if #tip > 0 then position = tip[1][1] end
    local full, redelivered = 0, 0
    if hinted == FULL then  -- redelivered is a subset of the keys marked full
      redelivered = redis.call('SREM', REDELIVERED, key)
      hinted = ''
      full = 1
    end
    result = {key, tostring(token), enq, string.format('%d', now),
              string.format('%d', deadline), position, redelivered, full, hinted}
  else
    local next_at = nil
    if not down then
      local w = redis.call('ZRANGE', WAIT, 0, 0, 'WITHSCORES')
      if #w > 0 then next_at = tonumber(w[2]) end
    end
    local p = redis.call('ZRANGE', PROC, 0, 0, 'WITHSCORES')
    if #p > 0 and (next_at == nil or tonumber(p[2]) < next_at) then next_at = tonumber(p[2]) end
    local hint = -1
    if next_at then hint = math.max(0, math.ceil(next_at - now)) end
    result = {down and 1 or 0, hint}
  end
  sync_signal(down, qlen)
  return result
end
"""

WQ_GET = r"""
-- get: promote due delayed keys, reclaim expired leases, then hand out the head of the queue.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] worker id
-- ARGV[2] lease length (ms)
-- ARGV[3] at most this many delayed keys promoted / leases reclaimed per call
-- Returns {key, token, enqueued ms, leased ms, deadline ms, log position, redelivered (0|1),
-- full sync (0|1), its node hints ("\n<node>\n...\n", "\n": none, or "": not hinted)} when
-- a key was handed out
-- (its hints and full mark taken with it), else {shutting down (0|1), ms until the next delayed key or
-- lease deadline (-1: none)}.
""" + _WQ_PRELUDE + _WQ_HAND_OUT + r"""
return hand_out(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), nil, nil, nil)
"""

WQ_DONE = r"""
-- done: client-go Done for the holder of a current lease; a stale lease changes nothing.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] key
-- ARGV[2] lease token
-- Returns 1 when done, 0 when the lease was stale.
""" + _WQ_PRELUDE + r"""
local done, qlen = done_one(ARGV[1], ARGV[2])
if not done then return 0 end
if qlen then sync_signal(nil, qlen) end
return 1
"""

WQ_DONE_GET = r"""
-- done_then_get: WQ_DONE, then WQ_GET for ``worker``, in one call: a worker that goes on to
-- its next key sends one script (and the signal list is set right once, by the get).
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] key
-- ARGV[2] lease token
-- ARGV[3..5] as WQ_GET's ARGV[1..3]: worker id, lease length (ms), batch
-- Returns {1 when done (0: the lease was stale), then WQ_GET's reply}.
""" + _WQ_PRELUDE + _WQ_HAND_OUT + r"""
local done, qlen, direct, direct_hints = done_before_get(ARGV[1], ARGV[2])
-- the get below sets the signal list
local result = hand_out(ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), qlen, direct,
                        direct_hints)
table.insert(result, 1, done and 1 or 0)
return result
"""

WQ_RENEW = r"""
-- renew: move the deadline of a current lease to now + lease length.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] key
-- ARGV[2] lease token
-- ARGV[3] lease length (ms)
-- Returns the new deadline (ms, as a string), or false when the lease is stale.
""" + _WQ_PRELUDE + r"""
local owner = redis.call('HGET', OWNER, ARGV[1])
if not owner or token_of(owner) ~= ARGV[2] then return false end
local deadline = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', PROC, 'XX', deadline, ARGV[1])
return string.format('%d', deadline)
"""

WQ_ADD_AFTER = r"""
-- add_after: client-go AddAfter; a key already waiting keeps the earlier ready time.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] key
-- ARGV[2] delay (ms, may be fractional; <= 0 adds at once)
-- Returns 1, or 0 when ignored (shut down).
""" + _WQ_PRELUDE + r"""
if is_down() then return 0 end
count('retries', 1)
add_after(ARGV[1], now_ms(), tonumber(ARGV[2]))
return 1
"""

WQ_ADD_RATE_LIMITED = r"""
-- add_rate_limited: AddAfter(key, When(key)) with client-go's default controller limiter:
-- max(base·2^failures capped at max, token-bucket reservation delay); counts one failure.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] key
-- ARGV[2] base delay (ms)
-- ARGV[3] max per-item delay (ms)
-- ARGV[4] bucket refill rate (tokens per second)
-- ARGV[5] bucket size (burst)
-- Returns the chosen delay (ms, as a string).
""" + _WQ_PRELUDE + r"""
local key = ARGV[1]
local base, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
local qps, burst = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local failures = tonumber(redis.call('HGET', FAIL, key) or '0')
redis.call('HINCRBY', FAIL, key, 1)
local item = cap
if failures < 1024 then item = math.min(base * 2 ^ failures, cap) end
local b = redis.call('HMGET', BUCKET, 'tokens', 'last')
local tokens = burst
if b[1] then
  local elapsed = math.max(0, now - tonumber(b[2])) / 1000
  tokens = math.min(burst, tonumber(b[1]) + elapsed * qps)
end
tokens = tokens - 1
redis.call('HSET', BUCKET, 'tokens', string.format('%.17g', tokens), 'last', string.format('%d', now))
local wait = 0
if tokens < 0 then wait = -tokens / qps * 1000 end
local delay = math.max(item, wait)
if not is_down() then
  count('retries', 1)
  add_after(key, now, delay)
end
return string.format('%.17g', delay)
"""

WQ_REMOVE_ALL = r"""
-- remove_all: drop every trace of a key (queued, dirty, delayed, failures, lease, redelivery,
-- full mark, node hints).
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] key
-- Returns 1.
""" + _WQ_PRELUDE + r"""
local key = ARGV[1]
redis.call('LREM', Q, 0, key)
redis.call('ZREM', WAIT, key)
redis.call('HDEL', FAIL, key)
redis.call('ZREM', PROC, key)
redis.call('HDEL', OWNER, key)
redis.call('SREM', REDELIVERED, key)
redis.call('HDEL', HINTS, key)
sync_signal()
return 1
"""

WQ_SHUTDOWN = r"""
-- shutdown: set (ARGV[1] = "1") or clear ("0") the shutdown flag and wake blocked workers.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV[1] "1" to shut down, "0" to reopen
-- Returns 1.
""" + _WQ_PRELUDE + r"""
if ARGV[1] == '1' then redis.call('SET', SHUT, '1') else redis.call('DEL', SHUT) end
sync_signal()
return 1
"""

WQ_STATS = r"""
-- stats: sizes, counters and running-work ages, read at one instant.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV: none
-- Returns {depth, dirty, processing, waiting, shutting down (0|1), unfinished work (ms),
-- longest running (ms), counter name, value, counter name, value, ...}.
""" + _WQ_PRELUDE + r"""
local now = now_ms()
local unfinished, longest = 0, 0
for _, owner in ipairs(redis.call('HVALS', OWNER)) do
  local leased = tonumber(string.match(owner, '^%d+:(%d+):'))
  if leased then
    local age = math.max(0, now - leased)
    unfinished = unfinished + age
    if age > longest then longest = age end
  end
end
local out = {redis.call('LLEN', Q), redis.call('HLEN', HINTS), redis.call('ZCARD', PROC),
             redis.call('ZCARD', WAIT), is_down() and 1 or 0,
             string.format('%d', unfinished), string.format('%d', longest)}
for _, v in ipairs(redis.call('HGETALL', STATS)) do out[#out + 1] = v end
return out
"""

WQ_UPGRADE = r"""
-- upgrade: fold what an older version kept beside the hints into them: its dirty set (a
-- dirty key without hints was a full sync) and its enqueue stamps; then both are deleted.
-- Idempotent; every process that opens the queue runs it once.
-- KEYS: the workqueue keys (see WQ_KEYS)
-- ARGV: none
-- Returns the number of keys folded in.
""" + _WQ_PRELUDE + r"""
local n = 0
for _, key in ipairs(redis.call('SMEMBERS', DIRTY)) do
  local stored = redis.call('HGET', HINTS, key) or FULL
  if not string.match(stored, '^%d') then
    redis.call('HSET', HINTS, key, (redis.call('HGET', ENQ, key) or '') .. stored)
  end
  n = n + 1
end
if n > 0 or redis.call('EXISTS', ENQ) == 1 then redis.call('DEL', DIRTY, ENQ) end
return n
"""

# ---- expectations ------------------------------------------------------------------------

_EXP_LOWER = r"""
-- LowerExpectations for the triples ARGV[first..last] (DaemonSet key, creations observed,
-- deletions observed) in the expectations hash EXP; keys without an entry are skipped, and
-- an entry that is not [add, del, timestamp] is deleted (read as none, as the store reads
-- it: the next sync sets it anew).
-- Returns the number of entries changed.
local function lower_expectations(EXP, first, last)
  local n = 0
  for i = first, last, 3 do
    local raw = redis.call('HGET', EXP, ARGV[i])
    if raw then
      local ok, e = pcall(cmsgpack.unpack, raw)
      if ok and type(e) == 'table' and type(e[1]) == 'number' and type(e[2]) == 'number' then
        e[1] = e[1] - tonumber(ARGV[i + 1])
        e[2] = e[2] - tonumber(ARGV[i + 2])
        redis.call('HSET', EXP, ARGV[i], cmsgpack.pack(e))
      else
        redis.call('HDEL', EXP, ARGV[i])
      end
      n = n + 1
    end
  end
  return n
end
"""

EXP_OBSERVE = r"""
-- observe: LowerExpectations for many DaemonSet keys; keys without an entry are skipped.
-- KEYS[1] expectations hash: DaemonSet key → msgpack [add, del, timestamp]
-- ARGV    triples: DaemonSet key, creations observed, deletions observed
-- Returns the number of entries changed.
""" + _EXP_LOWER + r"""
return lower_expectations(KEYS[1], 1, #ARGV)
"""

# ---- the watcher's batch -----------------------------------------------------------------

WATCHER_BATCH = r"""
-- watcher_batch: everything the watcher writes for one batch of log changes, atomically and
-- fenced by its leader lease: unless ARGV[1] holds the lease, nothing at all is written.
-- In order: DeleteExpectations, LowerExpectations (as EXP_OBSERVE), Add (as WQ_ADD),
-- AddAfter (as WQ_ADD_AFTER, each counted as a retry) and Add with node hints (as
-- WQ_ADD_NODES; the three ignored while the queue is shut down), then the cursor, if given.
-- KEYS[1..14] the workqueue keys (see WQ_KEYS)
-- KEYS[15] expectations hash: DaemonSet key → msgpack [add, del, timestamp]
-- KEYS[16] the watcher's cursor (string: last log id fully processed)
-- KEYS[17] the watcher's leader lease (string: holder id, with a TTL)
-- ARGV[1] holder id
-- ARGV[2] the log position to store as the cursor ('': the cursor is left as it is)
-- ARGV[3..6] counts: d keys whose expectations are deleted, o observation triples, a keys
--            to add, l delayed adds
-- ARGV[7..] the d keys; the o triples (key, creations observed, deletions observed); the a
--           keys; the l pairs (key, delay in ms, may be fractional; <= 0 adds at once); then
--           to the end, the groups of hinted keys (key, m, then m node names)
-- Returns {0, current holder or ''} when ARGV[1] does not hold the lease (nothing written),
-- else {1, keys newly dirty, shut down (0|1), expectation entries lowered}.
""" + _WQ_PRELUDE + _EXP_LOWER + r"""
local EXP, CURSOR, LEASE = KEYS[15], KEYS[16], KEYS[17]
local holder = redis.call('GET', LEASE)
if holder ~= ARGV[1] then return {0, holder or ''} end
local nd, no = tonumber(ARGV[3]), tonumber(ARGV[4])
local na, nl = tonumber(ARGV[5]), tonumber(ARGV[6])
local i = 7
for j = i, i + nd - 1 do redis.call('HDEL', EXP, ARGV[j]) end
i = i + nd
local lowered = lower_expectations(EXP, i, i + 3 * no - 1)
i = i + 3 * no
local down = is_down()
local added = 0
if not down then  -- Redis' time is read only if a key needs it (add_one)
  for j = i, i + na - 1 do added = added + add_full(ARGV[j]) end
  i = i + na
  for j = i, i + 2 * nl - 1, 2 do
    count('retries', 1)
    add_after(ARGV[j], nil, tonumber(ARGV[j + 1]))
  end
  i = i + 2 * nl
  added = added + add_hinted_groups(i, #ARGV)
  count('adds', added)
  if pushed then sync_signal(false, pushed_len) end
end
if ARGV[2] ~= '' then redis.call('SET', CURSOR, ARGV[2]) end
return {1, added, down and 1 or 0, lowered}
"""

# ---- backoff -----------------------------------------------------------------------------

BACKOFF_GC = r"""
-- gc: delete the given backoff entries that are still older than the cutoff (an entry
-- advanced since the caller scanned it is kept), and those that are not [delay, last_update].
-- KEYS[1] backoff hash: backoff key → msgpack [delay, last_update]
-- ARGV[1] cutoff: entries with last_update < cutoff (epoch seconds) are dropped
-- ARGV[2..] candidate backoff keys
-- Returns the number of entries deleted.
local cutoff = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local ok, e = pcall(cmsgpack.unpack, raw)
    local last = ok and type(e) == 'table' and tonumber(e[2]) or nil
    if last == nil or last < cutoff then
      redis.call('HDEL', KEYS[1], ARGV[i])
      n = n + 1
    end
  end
end
return n
"""

# ---- leader lease ------------------------------------------------------------------------

LEASE_ACQUIRE = r"""
-- acquire: take the lease if free, or extend it if ARGV[1] already holds it.
-- KEYS[1] the lease key (string: holder id, with a TTL)
-- ARGV[1] holder id
-- ARGV[2] ttl (ms)
-- Returns 1 when ARGV[1] holds the lease afterwards, else 0.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
return 1
"""

LEASE_RENEW = r"""
-- renew: extend the lease only if ARGV[1] still holds it.
-- KEYS[1] the lease key
-- ARGV[1] holder id
-- ARGV[2] ttl (ms)
-- Returns 1 when extended, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

LEASE_RELEASE = r"""
-- release: delete the lease only if ARGV[1] holds it.
-- KEYS[1] the lease key
-- ARGV[1] holder id
-- Returns 1 when released, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""
