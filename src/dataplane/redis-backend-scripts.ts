/**
 * The Lua scripts of the Redis data-plane backend (redis-backend.ts runs them): one per operation,
 * which Redis runs atomically, so a claim's scan-and-mark, a put's bytes-plus-production-bits, a
 * clear's free-then-forget can never interleave with another client's call (docs/dataplane.md §6:
 * unserialized controller state was upstream's worst bug class). Each script validates everything
 * before its first write because Redis does not roll a script back when it fails halfway. Above each
 * script: its ARGV and its reply, the contract redis-backend.ts encodes and decodes.
 *
 * Key layout, K = `<prefix>{<partition>}` (the braces keep one partition in one cluster slot):
 *   K:fields  hash  field → dtype            K:tasks   set of consumer tasks
 *   K:samples zset  id → first-put sequence  K:seq     sequence counter     K:bytes  bytes held
 *   K:s:<id>  hash  h:<field> → "dtype|d0,d1", b:<field> → raw bytes (presence = production bit)
 *   K:g:<id>  hash  tag → JSON value
 *   K:pend:<task> zset id → seq (unclaimed)   K:lease:<task> zset id → expiry ms (server clock)
 *   K:lid:<task>  hash id → lease id          K:done:<task>  set (consumed)
 *
 * The scripts sit in their own file because they are one program, run by Redis, sharing one
 * prelude and one key layout; the client side reads as TypeScript without paging through them.
 */

// Errors raised inside scripts start with "DP <code> " so the client can rebuild a DataPlaneError.
const PRELUDE = `
local K, P = ARGV[1], ARGV[2]
local function fail(code, msg) error({err = 'DP ' .. code .. ' ' .. msg}) end
local function need_partition()
  if redis.call('EXISTS', K .. ':fields') == 0 then fail('unknown_partition', 'partition "' .. P .. '" is not registered') end
end
local function need_task(t)
  if redis.call('SISMEMBER', K .. ':tasks', t) == 0 then
    fail('unknown_task', 'task "' .. t .. '" is not a consumer of partition "' .. P .. '" (registered: ' .. table.concat(redis.call('SMEMBERS', K .. ':tasks'), ', ') .. ')')
  end
end
local function need_field(f)
  local dt = redis.call('HGET', K .. ':fields', f)
  if not dt then fail('unknown_field', 'field "' .. f .. '" is not declared in partition "' .. P .. '" (declared: ' .. table.concat(redis.call('HKEYS', K .. ':fields'), ', ') .. ')') end
  return dt
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Frees a sample's bytes, then forgets it everywhere (one script: no window where the id is reusable but bytes remain).
local function drop_sample(id, tasks)
  if not redis.call('ZSCORE', K .. ':samples', id) then return 0 end
  local sk = K .. ':s:' .. id
  local freed = 0
  for _, f in ipairs(redis.call('HKEYS', K .. ':fields')) do freed = freed + redis.call('HSTRLEN', sk, 'b:' .. f) end
  redis.call('DEL', sk, K .. ':g:' .. id)
  redis.call('DECRBY', K .. ':bytes', freed)
  redis.call('ZREM', K .. ':samples', id)
  for _, t in ipairs(tasks) do
    redis.call('ZREM', K .. ':pend:' .. t, id)
    redis.call('ZREM', K .. ':lease:' .. t, id)
    redis.call('HDEL', K .. ':lid:' .. t, id)
    redis.call('SREM', K .. ':done:' .. t, id)
  end
  return 1
end
`;

// ARGV: K, P, mode ('1' replace, '0' reuse an empty partition, '2' create only), nFields, fields..., dtypes..., tasks...
export const REGISTER = `${PRELUDE}
local replace, nf = ARGV[3] == '1', tonumber(ARGV[4])
if ARGV[3] == '2' and redis.call('EXISTS', K .. ':fields') == 1 then
  fail('conflict', 'partition "' .. P .. '" is already registered (createOnly refuses an existing partition)')
end
local held = redis.call('ZCARD', K .. ':samples')
if held > 0 and not replace then
  fail('conflict', 'partition "' .. P .. '" still holds ' .. held .. ' samples; clear it first or register with replace: true')
end
local old = redis.call('SMEMBERS', K .. ':tasks')
for _, id in ipairs(redis.call('ZRANGE', K .. ':samples', 0, -1)) do drop_sample(id, old) end
for _, t in ipairs(old) do redis.call('DEL', K .. ':pend:' .. t, K .. ':lease:' .. t, K .. ':lid:' .. t, K .. ':done:' .. t) end
redis.call('DEL', K .. ':fields', K .. ':tasks', K .. ':samples', K .. ':bytes')
for i = 1, nf do redis.call('HSET', K .. ':fields', ARGV[4 + i], ARGV[4 + nf + i]) end
for i = 5 + 2 * nf, #ARGV do redis.call('SADD', K .. ':tasks', ARGV[i]) end
return 1
`;

// ARGV: K, P, n, nFields, fields..., then per sample: id, nTags, (tag, json)*, (header, bytes) per field
export const PUT = `${PRELUDE}
need_partition()
local n, nf = tonumber(ARGV[3]), tonumber(ARGV[4])
local fields, declared = {}, {}
for j = 1, nf do fields[j] = ARGV[4 + j]; declared[j] = need_field(fields[j]) end
local layout, pos = {}, 5 + nf
for i = 1, n do
  local id, nt = ARGV[pos], tonumber(ARGV[pos + 1])
  local tagAt = pos + 2
  local cellAt = tagAt + 2 * nt
  for j = 1, nf do
    local dt = string.match(ARGV[cellAt + 2 * (j - 1)], '^([^|]*)|')
    if dt ~= declared[j] then
      fail('dtype_mismatch', 'put to partition "' .. P .. '": field "' .. fields[j] .. '" is declared ' .. declared[j] .. ', sample "' .. id .. '" has ' .. tostring(dt))
    end
  end
  layout[i] = {id, nt, tagAt, cellAt}
  pos = cellAt + 2 * nf
end
local tasks = redis.call('SMEMBERS', K .. ':tasks')
for i = 1, n do
  local id, nt, tagAt, cellAt = layout[i][1], layout[i][2], layout[i][3], layout[i][4]
  if not redis.call('ZSCORE', K .. ':samples', id) then
    local seq = redis.call('INCR', K .. ':seq')
    redis.call('ZADD', K .. ':samples', seq, id)
    for _, t in ipairs(tasks) do redis.call('ZADD', K .. ':pend:' .. t, seq, id) end
  end
  local sk = K .. ':s:' .. id
  for j = 1, nf do
    local bytes = ARGV[cellAt + 2 * (j - 1) + 1]
    local before = redis.call('HSTRLEN', sk, 'b:' .. fields[j])
    redis.call('HSET', sk, 'h:' .. fields[j], ARGV[cellAt + 2 * (j - 1)], 'b:' .. fields[j], bytes)
    redis.call('INCRBY', K .. ':bytes', string.len(bytes) - before)
  end
  for k = 0, nt - 1 do redis.call('HSET', K .. ':g:' .. id, ARGV[tagAt + 2 * k], ARGV[tagAt + 2 * k + 1]) end
end
return n
`;

// ARGV: K, P, task, batch, minBatch, leaseMs (0 = consume now), leaseId, required fields...
// Reply: {1, id, nTags, (tag, json)*, ...} or {0, ready, missing per required field...}
export const CLAIM = `${PRELUDE}
need_partition()
local task, batch, minBatch, leaseMs, leaseId = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
need_task(task)
local req = {}
for i = 8, #ARGV do req[#req + 1] = ARGV[i]; need_field(ARGV[i]) end
local pend, lease, lid = K .. ':pend:' .. task, K .. ':lease:' .. task, K .. ':lid:' .. task
local now = now_ms()
for _, id in ipairs(redis.call('ZRANGEBYSCORE', lease, '-inf', now)) do
  redis.call('ZREM', lease, id)
  redis.call('HDEL', lid, id)
  local seq = redis.call('ZSCORE', K .. ':samples', id)
  if seq then redis.call('ZADD', pend, seq, id) end
end
local ready, missing = {}, {}
for j = 1, #req do missing[j] = 0 end
local offset, chunk, full = 0, 256, false
while not full do
  local ids = redis.call('ZRANGE', pend, offset, offset + chunk - 1)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local sk, complete = K .. ':s:' .. id, true
    for j = 1, #req do
      if redis.call('HEXISTS', sk, 'b:' .. req[j]) == 0 then missing[j] = missing[j] + 1; complete = false end
    end
    if complete then
      ready[#ready + 1] = id
      if #ready >= batch then full = true; break end
    end
  end
  offset = offset + chunk
end
if #ready < minBatch then
  local out = {0, #ready}
  for j = 1, #req do out[#out + 1] = missing[j] end
  return out
end
local out = {1}
for _, id in ipairs(ready) do
  redis.call('ZREM', pend, id)
  if leaseMs > 0 then
    redis.call('ZADD', lease, now + leaseMs, id)
    redis.call('HSET', lid, id, leaseId)
  else
    redis.call('SADD', K .. ':done:' .. task, id)
  end
  local tags = redis.call('HGETALL', K .. ':g:' .. id)
  out[#out + 1] = id
  out[#out + 1] = #tags / 2
  for _, v in ipairs(tags) do out[#out + 1] = v end
end
return out
`;

// ARGV: K, P, task, leaseId, action (ack | ack-clear | release), ids...   Reply: {settled ids, lost ids}
// ack-clear drops each acked row that every consumer task has consumed, inside this same script.
export const SETTLE = `${PRELUDE}
need_partition()
local task, leaseId, action = ARGV[3], ARGV[4], ARGV[5]
local ack = action == 'ack' or action == 'ack-clear'
need_task(task)
local lease, lid = K .. ':lease:' .. task, K .. ':lid:' .. task
local settled, lost = {}, {}
for i = 6, #ARGV do
  local id = ARGV[i]
  if redis.call('HGET', lid, id) == leaseId then
    redis.call('ZREM', lease, id)
    redis.call('HDEL', lid, id)
    if ack then
      redis.call('SADD', K .. ':done:' .. task, id)
    else
      redis.call('ZADD', K .. ':pend:' .. task, redis.call('ZSCORE', K .. ':samples', id), id)
    end
    settled[#settled + 1] = id
  else
    lost[#lost + 1] = id
  end
end
if action == 'ack-clear' then
  local tasks = redis.call('SMEMBERS', K .. ':tasks')
  for _, id in ipairs(settled) do
    local everyone = true
    for _, t in ipairs(tasks) do
      if redis.call('SISMEMBER', K .. ':done:' .. t, id) == 0 then everyone = false end
    end
    if everyone then drop_sample(id, tasks) end
  end
end
return {settled, lost}
`;

// ARGV: K, P, tasks...   Reply: 1 when every task consumed every (>= 1) sample.
export const CONSUMED = `${PRELUDE}
need_partition()
for i = 3, #ARGV do need_task(ARGV[i]) end
local n = redis.call('ZCARD', K .. ':samples')
if n == 0 then return 0 end
for i = 3, #ARGV do
  if redis.call('SCARD', K .. ':done:' .. ARGV[i]) ~= n then return 0 end
end
return 1
`;

// ARGV: K, P, nIds, ids..., fields...   Reply: {1, (header, bytes) per id per field} or {0, unknown ids, unproduced "id/field"}
export const GET = `${PRELUDE}
need_partition()
local n = tonumber(ARGV[3])
local fields = {}
for i = 4 + n, #ARGV do fields[#fields + 1] = ARGV[i]; need_field(ARGV[i]) end
local unknown, unproduced = {}, {}
for i = 1, n do
  local id = ARGV[3 + i]
  if not redis.call('ZSCORE', K .. ':samples', id) then
    unknown[#unknown + 1] = id
  else
    for _, f in ipairs(fields) do
      if redis.call('HEXISTS', K .. ':s:' .. id, 'b:' .. f) == 0 then unproduced[#unproduced + 1] = id .. '/' .. f end
    end
  end
end
if #unknown > 0 or #unproduced > 0 then return {0, unknown, unproduced} end
local out = {1}
for i = 1, n do
  local sk = K .. ':s:' .. ARGV[3 + i]
  for _, f in ipairs(fields) do
    out[#out + 1] = redis.call('HGET', sk, 'h:' .. f)
    out[#out + 1] = redis.call('HGET', sk, 'b:' .. f)
  end
end
return out
`;

// ARGV: K, P, all ('1'/'0'), ids...   Reply: number of samples removed. Unknown partition/ids: no-op.
export const CLEAR = `${PRELUDE}
if redis.call('EXISTS', K .. ':fields') == 0 then return 0 end
local tasks = redis.call('SMEMBERS', K .. ':tasks')
local ids = {}
if ARGV[3] == '1' then ids = redis.call('ZRANGE', K .. ':samples', 0, -1) else for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end end
local removed = 0
for _, id in ipairs(ids) do removed = removed + drop_sample(id, tasks) end
return removed
`;

// ARGV: K, P   Reply: {samples, bytes, {field, dtype, ...}, {tasks...}}
export const STATS = `${PRELUDE}
need_partition()
return {redis.call('ZCARD', K .. ':samples'), tonumber(redis.call('GET', K .. ':bytes') or '0'), redis.call('HGETALL', K .. ':fields'), redis.call('SMEMBERS', K .. ':tasks')}
`;
