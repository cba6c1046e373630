"""The store's Lua scripts. Each starts with a header naming its KEYS and ARGV.

Scripts are registered once per client (EVALSHA with automatic reload by redis-py).
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------
COMMIT = r"""
-- commit: apply a batch of object writes atomically and append one log entry per write,
-- each authorised for the caller's role first.
--
-- KEYS[1]          the event log stream "<tag>:log" (tag = the cluster's hash tag "{prefix}")
-- KEYS[2k], KEYS[2k+1]  (k = 1..) "<tag>:obj:<Kind>" and "<tag>:rv:<Kind>" of one kind
-- then           the cluster's meta hash (field "epoch": the log's identity), then the
--                  compaction point (Keys.log_snapshot_id)
-- KEYS[#KEYS]      with a fence only: the hash of the fence (see ARGV[5])
-- ARGV[1]          number of operations N
-- ARGV[2]          "1" = all-or-nothing (any failed precondition writes nothing), "0" = each op alone,
--                  "s<B>" = slow start: each op alone, in batches of B, 2B, 4B, ... ops; the
--                  batches after the first one with an op that is not "ok" are "skipped"
--                  (upstream's slow-start batches of creates, in one call)
-- ARGV[3]          schema version written into each entry
-- ARGV[4]          approximate max length of the log (0 = no trimming)
-- ARGV[5]          fence token ("" = no fence): write only while field ARGV[6] of the hash
--                  KEYS[#KEYS] holds a value "<token>:..." (a workqueue lease, see
--                  control_scripts: wq:owner), else every op is {"fenced", ""}
-- ARGV[6]          fence field (the leased workqueue key)
-- ARGV[7]          the log id the writer's log mark saw last ("0-0": none), checked before
--                  writing (shared.store.logmark): a write never hides a rewind
-- ARGV[8]          who writes (the API server's user; "" = not recorded): field "u" of each entry
-- ARGV[9]          the role the caller commits as (see ROLES below and shared/store/roles.py)
-- ARGV[10]         node names the writes are made for, comma-separated: trusted only from a
--                  caller holding the node-admission role (it commits for node agents)
-- ARGV[11]         "1": read the log's identity for the mark's check; "0": only if the entry
--                  ARGV[7] is gone (shared.store.logmark says when the mark needs it)
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
-- | {"notfound", ""} | {"forbidden", reason} | {"taken", what} (a Service's cluster IP or
-- node port another Service holds: see holdings below) | {"skipped", ""} (batch aborted by
-- another op, or a slow-start batch not tried)
-- | {"fenced", ""} (the fence token no longer holds the lease: nothing written); then
-- the mark's check: {epoch|false, 1|0 (ARGV[7] is in the log), compaction point|false,
-- 1|0 (the epoch was read)}.
--
-- Authorisation. A role is bound to credentials, not claimed: committing as role R needs the
-- caller's Redis user to hold write access to the key "daemonbus-role:<tag>:R" (the ACL
-- gives each role's user its own; the administrator's ~* holds every one), checked with
-- redis.acl_check_cmd; a node agent's node N likewise "daemonbus-node:<tag>:N". These keys
-- are never written: they are names the ACL grants. Each op is then checked against the
-- role's rules (refused_by below); an op refused makes the whole call write nothing, and is
-- logged in Redis' own log with the role. The KEYS must be the cluster's own names for the
-- kinds given, so no op can reach another hash under a kind it is allowed.
local n = tonumber(ARGV[1])
local atomic = ARGV[2] == "1"
local slow_start = tonumber(string.match(ARGV[2], "^s(%d+)$") or "")
local version = ARGV[3]
local maxlen = tonumber(ARGV[4])
local fenced = ARGV[5] ~= ""
local meta_at = #KEYS - 1
if fenced then meta_at = #KEYS - 2 end
local seen = ARGV[7]
local check = {false, 1, false, 0}
if seen ~= "0-0" and #redis.call("XRANGE", KEYS[1], seen, seen, "COUNT", 1) == 0 then
  check = {false, 0, redis.call("GET", KEYS[meta_at + 1]), 0}
end
if ARGV[11] == "1" or check[2] == 0 then
  check[1], check[4] = redis.call("HGET", KEYS[meta_at], "epoch"), 1
end
local writer = ARGV[8]
local role = ARGV[9]
local FIRST = 12
local tag = string.match(KEYS[1], "^(.*):log$")

local function may_write(key)
  return redis.acl_check_cmd("HSET", key, "x", "x")
end

local KINDS = {Node = true, Pod = true, DaemonSet = true, ControllerRevision = true,
               Event = true, Namespace = true, ConfigMap = true, Secret = true, Service = true,
               ServiceAccount = true, Role = true, RoleBinding = true, ClusterRole = true,
               ClusterRoleBinding = true, PriorityClass = true}
-- the namespaced kinds only users write (shared.model.kinds.USER_KINDS)
local USERS_OWN = {ConfigMap = true, Secret = true, Service = true, ServiceAccount = true,
                   Role = true, RoleBinding = true}
local ROLES = {admin = true, reconciler = true, ["status-writer"] = true, gc = true,
               ["node-agent"] = true}
local bound = tag ~= nil and ROLES[role] and may_write("daemonbus-role:" .. tag .. ":" .. role)

local owned = {}
if bound and role == "node-agent" and may_write("daemonbus-role:" .. tag .. ":node-admission") then
  for name in string.gmatch(ARGV[10], "[^,]+") do owned[name] = true end
end
local function owns(node)
  if type(node) ~= "string" or node == "" then return false end
  if owned[node] == nil then owned[node] = may_write("daemonbus-node:" .. tag .. ":" .. node) end
  return owned[node]
end

local function deq(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not deq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
-- a and b equal but for the top-level fields in `top` and the metadata fields in `md`
local function same_but(a, b, top, md)
  for k, v in pairs(a) do
    if not top[k] and k ~= "metadata" and not deq(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if not top[k] and k ~= "metadata" and a[k] == nil then return false end
  end
  local am, bm = a.metadata or {}, b.metadata or {}
  for k, v in pairs(am) do if not md[k] and not deq(v, bm[k]) then return false end end
  for k in pairs(bm) do if not md[k] and am[k] == nil then return false end end
  return true
end
local NONE, STATUS = {}, {status = true}
local STATUS_SPEC = {status = true, spec = true}
local DELETION = {finalizers = true, ownerReferences = true, deletionTimestamp = true,
                  deletionGracePeriodSeconds = true, generation = true}
local FINALIZERS = {finalizers = true}
local TAINTS, CONDITIONS = {taints = true}, {conditions = true}
local RECOUNT = {count = true, lastTimestamp = true, message = true}

local function decode(raw)
  if not raw then return nil end
  local ok, obj = pcall(cmsgpack.unpack, raw)
  if ok and type(obj) == "table" and type(obj.metadata) == "table" then return obj end
  return nil
end
local function spec(o) return (type(o.spec) == "table" and o.spec) or {} end
local function status(o) return (type(o.status) == "table" and o.status) or {} end
local function deleting(o) return o.metadata.deletionTimestamp ~= nil end
-- old and new equal but for the top-level fields in `top` and the DELETION metadata, whose
-- generation only a deletion that starts raises, by one (upstream's BeforeDelete)
local function deletion_only(old, new, top)
  if not same_but(old, new, top, DELETION) then return false end
  local was, now = old.metadata.generation, new.metadata.generation
  if deq(was, now) then return true end
  return not deleting(old) and deleting(new) and type(was) == "number" and now == was + 1
end
-- whether the namespace `ns` has an object being deleted (its content goes first)
local function terminating(ns)
  local o = decode(redis.call("HGET", tag .. ":obj:Namespace", "/" .. ns))
  return o ~= nil and deleting(o)
end
-- the node a daemon pod is aimed at: metadata.name In [node] of its required node affinity
local function target(pod)
  local ok, terms = pcall(function()
    return spec(pod).affinity.nodeAffinity
      .requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms end)
  if not ok or type(terms) ~= "table" then return nil end
  for _, term in ipairs(terms) do
    for _, req in ipairs((type(term) == "table" and term.matchFields) or {}) do
      if type(req) == "table" and req.key == "metadata.name" and req.operator == "In"
          and type(req.values) == "table" and #req.values == 1 then
        return req.values[1]
      end
    end
  end
  return nil
end

-- A node agent's status write of a pod, proven from the bytes: `payload` is the pod as
-- stored (`cur`) with its status (its last field) replaced or added last and, binding an
-- unbound pod, the field nodeName added last to its spec, naming the node its affinity names.
-- Only the stored pod and the new status are decoded (not the new object as well, nor both
-- compared field by field as refused_by does): whatever this accepts, refused_by accepts.
-- Returns the stored pod (decoded) and its node; nil proves nothing.
local function map_head(raw, at)  -- a map's field count and the (0-based) offset after its header
  local b = string.byte(raw, at + 1)
  if b == nil then return nil end
  if b >= 0x80 and b <= 0x8f then return b - 0x80, at + 1 end
  if b == 0xde then
    local h, l = string.byte(raw, at + 2, at + 3)
    if l ~= nil then return h * 256 + l, at + 3 end
  elseif b == 0xdf then
    local b1, b2, b3, b4 = string.byte(raw, at + 2, at + 5)
    if b4 ~= nil then return ((b1 * 256 + b2) * 256 + b3) * 256 + b4, at + 5 end
  end
  return nil
end
local function map_header(count)  -- as msgpack writes it (the shortest), for up to 65535
  if count < 16 then return string.char(0x80 + count) end
  return string.char(0xde, math.floor(count / 256), count % 256)
end
local STATUS_KEY, NODE_NAME_KEY = cmsgpack.pack("status"), cmsgpack.pack("nodeName")
local function status_write(cur, payload)
  local count, off = map_head(cur, 0)
  if count == nil or count > 64 then return nil end
  local old, keys, first, last = {}, {}, {}, {}
  for i = 1, count do  -- cur field by field: where each one's key starts and value ends
    if off < 0 then return nil end
    local vat, key = cmsgpack.unpack_one(cur, off)
    if type(key) ~= "string" or first[key] ~= nil or vat < 0 then return nil end
    local after, value = cmsgpack.unpack_one(cur, vat)
    if after < 0 then after = #cur end
    old[key], keys[i], first[key], last[key] = value, key, off + 1, after
    off = after
  end
  if off ~= #cur or type(old.metadata) ~= "table" or type(old.spec) ~= "table" then
    return nil
  end
  for i = 1, count - 1 do if keys[i] == "status" then return nil end end
  local kept = count  -- the fields written again as they are (all but a last status)
  if keys[count] == "status" then kept = count - 1 end
  if kept < 1 then return nil end
  local node = old.spec.nodeName
  local upto = string.sub(cur, first[keys[1]], last[keys[kept]])
  if node == nil then  -- binding: spec gains nodeName, last
    node = target(old)
    local at = cmsgpack.unpack_one(cur, first.spec - 1)  -- where spec's value starts
    local m, body = map_head(cur, at)
    if type(node) ~= "string" or node == "" or m == nil or m >= 65535 then return nil end
    upto = string.sub(cur, first[keys[1]], at) .. map_header(m + 1)
      .. string.sub(cur, body + 1, last.spec) .. NODE_NAME_KEY .. cmsgpack.pack(node)
      .. string.sub(cur, last.spec + 1, last[keys[kept]])
  elseif type(node) ~= "string" or node == "" then
    return nil
  end
  local head = map_header(kept + 1) .. upto .. STATUS_KEY
  if string.sub(payload, 1, #head) ~= head then return nil end
  local ok, after = pcall(cmsgpack.unpack_one, payload, #head)
  if not ok or after ~= -1 then return nil end
  return old, node
end

-- A failed rollout paused or rolled back by the reconciler (shared.daemonset.failure): only
-- the rollout.daemonbus.io/ annotations (and the templateGeneration annotation and the
-- generation the update's bookkeeping moves) change, the failure record among them; the pod
-- template only for a rollback, whose new record says so. The rest of spec, metadata and
-- the status stay as they are.
local ROLLOUT_PREFIX = "rollout.daemonbus.io/"
local FAILURE_RECORD = ROLLOUT_PREFIX .. "failure-record"
local BOOKKEPT = {generation = true, annotations = true}
local SPEC, TEMPLATE = {spec = true}, {template = true}
local function rollout_annotation(k)
  return type(k) == "string" and (string.sub(k, 1, #ROLLOUT_PREFIX) == ROLLOUT_PREFIX
    or k == "deprecated.daemonset.template.generation")
end
local function failure_action(old, new)
  if not same_but(old, new, SPEC, BOOKKEPT) then return false end
  local oa = (type(old.metadata.annotations) == "table" and old.metadata.annotations) or {}
  local na = (type(new.metadata.annotations) == "table" and new.metadata.annotations) or {}
  for k, v in pairs(oa) do
    if not rollout_annotation(k) and not deq(v, na[k]) then return false end
  end
  for k in pairs(na) do
    if not rollout_annotation(k) and oa[k] == nil then return false end
  end
  local record = na[FAILURE_RECORD]
  if type(record) ~= "string" or record == oa[FAILURE_RECORD] then return false end
  local ok, parsed = pcall(cjson.decode, record)
  if not ok or type(parsed) ~= "table" then return false end
  if same_but(spec(old), spec(new), NONE, NONE) then return true end
  return parsed.action == "rollback" and same_but(spec(old), spec(new), TEMPLATE, NONE)
end

-- nil when `role` may do this op; else why not. `exists`: the object is stored (in
-- KEYS[2 * pair]); `payload` is the new object (the decision record for record).
local function refused_by(mode, kind, field, pair, exists, payload)
  if role == "admin" then return nil end
  local dependent = kind == "Pod" or kind == "ControllerRevision" or kind == "Event"
  -- the bulk writes first, decided without decoding anything
  if role == "reconciler" and dependent and mode ~= "record" then return nil end
  if role == "gc" and dependent and mode == "delete" then return nil end
  if role == "gc" and kind == "Event" and (mode == "create" or mode == "ensure") then
    return nil  -- its events (TaintManagerEviction)
  end
  if mode == "record" then
    if role == "reconciler" and kind == "DaemonSet" then return nil end
    if role == "gc" and kind == "Node" then return nil end  -- taint-eviction decisions
    return "only the reconciler and the garbage collector record decisions"
  end
  if role == "node-agent" and kind == "Pod" and mode == "update" and exists then
    local ok, old, node = pcall(status_write, redis.call("HGET", KEYS[2 * pair], field), payload)
    if ok and old ~= nil then
      local md = old.metadata  -- the new object's too, byte for byte
      if type(md.namespace or "") == "string" and type(md.name) == "string"
          and (md.namespace or "") .. "/" .. md.name == field
          and (old.kind == nil or old.kind == kind) and owns(node) then
        return nil
      end
    end
  end
  local new = decode(payload)
  if not new then return "the object cannot be decoded" end
  local md = new.metadata
  local ns = md.namespace or ""
  if type(ns) ~= "string" or type(md.name) ~= "string" or ns .. "/" .. md.name ~= field
      or (new.kind ~= nil and new.kind ~= kind) then
    return "the object's kind and name do not match the write"
  end
  local cur = exists and redis.call("HGET", KEYS[2 * pair], field)
  local old = decode(cur)
  if cur and not old then return "the stored object cannot be decoded" end
  local creating = mode == "create" or mode == "ensure"
  if role == "reconciler" then
    if kind == "DaemonSet" and mode == "update" and same_but(old, new, STATUS, NONE) then
      return nil
    end
    if kind == "DaemonSet" and mode == "update" and failure_action(old, new) then
      return nil
    end
    return "the reconciler writes pods, controller revisions, events, DaemonSet status, "
      .. "and pauses or rolls back a failed rollout"
  elseif role == "status-writer" then
    if kind == "DaemonSet" and mode == "update" and same_but(old, new, STATUS, NONE) then
      return nil
    end
    return "the status-writer writes only DaemonSet .status"
  elseif role == "gc" then
    if mode == "delete" and kind == "DaemonSet" and deleting(old) then return nil end
    -- the namespace controller: what is in a namespace being deleted, then the namespace
    if mode == "delete" and kind == "DaemonSet" and terminating(ns) then return nil end
    if USERS_OWN[kind] and terminating(ns) and (mode == "delete"
        or (mode == "update" and deletion_only(old, new, NONE))) then
      return nil  -- (admin alone writes these otherwise)
    end
    if mode == "delete" and kind == "Namespace" and deleting(old) then return nil end
    if mode == "update" and kind == "Namespace" and deleting(old)
        and same_but(old, new, STATUS, NONE) then
      return nil  -- its conditions: what is left in it
    end
    if mode == "update" and dependent and deletion_only(old, new, NONE) then return nil end
    -- a taint eviction: the DisruptionTarget condition and the graceful delete in one write
    if mode == "update" and kind == "Pod" and deleting(new)
        and deletion_only(old, new, STATUS) then
      return nil
    end
    if mode == "update" and kind == "DaemonSet" and deleting(old)
        and same_but(old, new, NONE, FINALIZERS) then
      return nil
    end
    -- the node lifecycle controller: a Node's status conditions and its taints only
    if mode == "update" and kind == "Node" and same_but(old, new, STATUS_SPEC, NONE)
        and same_but(spec(old), spec(new), TAINTS, NONE)
        and same_but(status(old), status(new), CONDITIONS, NONE) then
      return nil
    end
    return "the garbage collector only deletes dependents, evicts pods, finishes deletions, "
      .. "empties namespaces being deleted and sets node conditions and taints"
  elseif role == "node-agent" then
    if kind == "Event" then
      -- kubelet's events: about a pod or its own node, from one of its nodes; new ones, or
      -- a repeat counted on one it wrote (client-go's recorder patches count,
      -- lastTimestamp and message)
      local src, about = new.source, new.involvedObject
      if type(src) == "table" and owns(src.host) and type(about) == "table"
          and (about.kind == "Pod" or (about.kind == "Node" and owns(about.name))) then
        if creating then return nil end
        if mode == "update" and old and same_but(old, new, RECOUNT, NONE) then return nil end
      end
      return "a node agent creates only events about pods and its nodes, from its own nodes, "
        .. "and counts their repeats"
    end
    if kind == "Node" then
      if not owns(md.name) then return "node " .. md.name .. " is not this node agent's" end
      if creating or (mode == "update" and same_but(old, new, STATUS, NONE)) then
        return nil
      end
      return "a node agent registers its nodes and writes their status only"
    end
    if kind ~= "Pod" or creating or not old then
      return "a node agent writes only its nodes and the pods bound to them"
    end
    local node = spec(old).nodeName
    if node == nil or node == "" then
      node = target(old)  -- binding: only to the node the pod is aimed at
      if node == nil or spec(new).nodeName ~= node then
        return "a pod may be bound only to the node its affinity names"
      end
    elseif spec(new).nodeName ~= node and mode ~= "delete" then
      return "a bound pod stays on its node"
    end
    if not owns(node) then return "pod " .. field .. " is not on this node agent's nodes" end
    if mode == "delete" then
      if deleting(old) then return nil end
      return "a node agent deletes only pods being deleted (when finalising them)"
    end
    local ospec, nspec = spec(old), spec(new)
    local rest = {nodeName = true}
    if same_but(old, new, STATUS_SPEC, NONE) and same_but(ospec, nspec, rest, NONE) then
      return nil
    end
    return "a node agent writes only the status (and binding) of pods"
  end
  return "unknown role"
end

-- What a Service holds that no other Service may: its cluster IPs and node ports (its
-- health check port among them), as shared.api.serviceips.taken reads them. The API server
-- picks free ones from the view as it prepares a write; checked again here, where the writes
-- of two API servers that picked the same one meet, the second is "taken" (and its API
-- server picks again, as upstream's allocators retry a conflicting update of their range).
local function holdings(raw)
  local o, out = decode(raw), {}
  if not o then return out end
  local s = spec(o)
  for _, ip in ipairs((type(s.clusterIPs) == "table" and s.clusterIPs) or {}) do
    if type(ip) == "string" and ip ~= "" and ip ~= "None" then out[#out + 1] = "IP " .. ip end
  end
  for _, p in ipairs((type(s.ports) == "table" and s.ports) or {}) do
    if type(p) == "table" and type(p.nodePort) == "number" and p.nodePort ~= 0 then
      out[#out + 1] = string.format("node port %d", p.nodePort)
    end
  end
  if type(s.healthCheckNodePort) == "number" and s.healthCheckNodePort ~= 0 then
    out[#out + 1] = string.format("node port %d", s.healthCheckNodePort)
  end
  return out
end
local held = nil  -- holding -> the Service holding it: the stored ones', read once per call
local function taken(pair, field, payload)
  local wants = holdings(payload)
  if #wants == 0 then return nil end
  if held == nil then
    held = {}
    local all = redis.call("HGETALL", KEYS[2 * pair])
    for j = 1, #all, 2 do
      for _, h in ipairs(holdings(all[j + 1])) do held[h] = all[j] end
    end
  end
  for _, h in ipairs(wants) do
    local by = held[h]
    if by ~= nil and by ~= field then return h .. " is held by Service " .. by end
  end
  for _, h in ipairs(wants) do held[h] = field end  -- and by this one for the batch's others
  return nil
end

local results = {}
local failed, forbidden = false, nil
if fenced then
  local owner = redis.call("HGET", KEYS[#KEYS], ARGV[6])
  if not owner or string.match(owner, "^([^:]*):") ~= ARGV[5] then
    for i = 1, n do results[i] = {"fenced", ""} end
    results[n + 1] = check
    return results
  end
end
for i = 0, n - 1 do
  local b = FIRST + i * 6
  local mode = ARGV[b]
  local pair = tonumber(ARGV[b + 1])
  local kind = ARGV[b + 2]
  local field = ARGV[b + 3]
  local expected = ARGV[b + 4]
  local res = {"ok", ""}
  local cur = nil
  if not bound then
    res = {"forbidden", "the caller's credentials do not hold the role " .. role}
  elseif not KINDS[kind] or KEYS[2 * pair] ~= tag .. ":obj:" .. kind
      or KEYS[2 * pair + 1] ~= tag .. ":rv:" .. kind then
    res = {"forbidden", "not this cluster's keys of kind " .. kind}
  end
  if res[1] == "ok" and mode ~= "record" then
    cur = redis.call("HGET", KEYS[2 * pair + 1], field)
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
  if res[1] == "ok" and role ~= "admin" then
    local why = refused_by(mode, kind, field, pair, cur ~= nil, ARGV[b + 5])
    if why then res = {"forbidden", why} end
  end
  if res[1] == "ok" and kind == "Service" and mode ~= "delete" and mode ~= "record" then
    local why = taken(pair, field, ARGV[b + 5])
    if why then
      res = {"taken", why}
      failed = true
    end
  end
  if res[1] == "forbidden" then
    forbidden = forbidden or res
    redis.log(redis.LOG_WARNING, "daemonbus commit refused: role " .. role .. ", " .. mode
              .. " " .. kind .. " " .. field .. ": " .. res[2])
  end
  results[i + 1] = res
end
if slow_start and slow_start > 0 then
  local first, size = 1, slow_start
  while first <= n do
    local last = math.min(first + size - 1, n)
    local stops = false
    for i = first, last do
      if results[i][1] ~= "ok" then stops = true end
    end
    if stops then  -- the batches after this one are not tried (a refusal is still named)
      for i = last + 1, n do
        if results[i][1] ~= "forbidden" then results[i] = {"skipped", ""} end
      end
      break
    end
    first, size = last + 1, size * 2
  end
end
if forbidden or (atomic and failed) then
  for i = 1, n do
    if results[i][1] == "ok" then results[i] = {"skipped", ""} end
  end
  results[n + 1] = check
  return results
end
for i = 0, n - 1 do
  if results[i + 1][1] == "ok" then
    local b = FIRST + i * 6
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

# ------------------------------------------------------------------------------------------
RENEW_LEASES = r"""
-- renew_leases: set node leases (shared.store.nodelease), each to one value with one TTL.
--
-- KEYS      the lease of each node ("<tag>:nodelease:<node>")
-- ARGV[1]   the value (shared.model.nodelifecycle.NodeLease on the wire)
-- ARGV[2]   the TTL (ms)
--
-- Returns the number of leases set. One call sets a thousand leases: as many SETs in a
-- pipeline cost the agent six times the CPU to send and read back (50,000 nodes renew
-- 5,000 leases a second).
local value, ttl = ARGV[1], ARGV[2]
for i = 1, #KEYS do
  redis.call("SET", KEYS[i], value, "PX", ttl)
end
return #KEYS
"""
