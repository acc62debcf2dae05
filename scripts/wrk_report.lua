-- wrk report for scripts/load_test.py: one JSON line (prefixed WRK_JSON) with throughput inputs,
-- latency percentiles (p50/p90/p95/p99, which `wrk --latency` does not all print) and the count
-- of responses outside 2xx (wrk's own "status" errors count only >= 400, so a redirect would pass).

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non2xx = 0
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do
    bad = bad + t:get("non2xx")
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "bytes": %d, "non2xx": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"mean_us": %.1f, "p50_us": %d, "p90_us": %d, "p95_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, summary.bytes, bad,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(95),
    latency:percentile(99), latency.max))
end
