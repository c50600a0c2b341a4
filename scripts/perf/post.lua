-- wrk script: POST a message to one of SESSIONS sessions, chosen at random per request.
-- KEY and SESSIONS come from the environment (scripts/perf/service-post.sh sets them). With
-- KEYS=N and KEY_PREFIX=P instead of KEY, session i belongs to key P .. (i - 1) % N written
-- with 12 digits (scripts/perf/service-pg-throughput.sh): N accounts, SESSIONS / N sessions each.
-- Non-2xx answers are counted by wrk as `status` errors (printed by done()).
local key = os.getenv("KEY")
local keys = tonumber(os.getenv("KEYS") or "0")
local key_prefix = os.getenv("KEY_PREFIX")
local sessions = tonumber(os.getenv("SESSIONS") or "8000")

wrk.method = "POST"
wrk.body = '{"content":"Hello from wrk: how do lifetimes work in Rust?"}'
wrk.headers["Content-Type"] = "application/json"
if keys == 0 then
  wrk.headers["Authorization"] = "Bearer " .. key
end

-- The requests are formatted once, in init: formatting one per request took wrk 0.64 s of
-- user CPU per 10 s at 12 connections, against 0.36-0.41 s now, CPU the service on the same
-- two cores lacked (docs/performance.md, "Fourth pass").
local prepared = {}

function init(args)
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
  for i = 1, sessions do
    local id = string.format("session_wrk%013d", i)
    local headers = nil
    if keys > 0 then
      headers = {}
      for name, value in pairs(wrk.headers) do headers[name] = value end
      headers["Authorization"] = "Bearer " .. key_prefix .. string.format("%012d", (i - 1) % keys)
    end
    prepared[i] = wrk.format(nil, "/v1/sessions/" .. id .. "/messages", headers)
  end
end

function request()
  return prepared[math.random(sessions)]
end

function done(summary, latency, requests)
  io.write(string.format("requests %d in %.2f s = %.0f/s; errors: connect %d, read %d, write %d, status %d, timeout %d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status,
    summary.errors.timeout))
  io.write(string.format("latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
end
