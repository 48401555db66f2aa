-- wrk_summary.lua - prints one machine-readable line at the end of a wrk run (bench/run.sh):
-- requests, duration, errors and latency percentiles in microseconds, p99.9 included (wrk's
-- --latency table stops at p99). Only done() is defined, so wrk keeps its per-request fast
-- path, unless SW_BENCH_DELAY_MS is set: then every connection waits that many milliseconds
-- before each request (paced load below saturation, for latency comparisons).
local pace = tonumber(os.getenv("SW_BENCH_DELAY_MS") or "")
if pace and pace > 0 then
   function delay()
      return pace
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   local errors = e.connect + e.read + e.write + e.status + e.timeout
   io.write(string.format(
      "SWBENCH requests=%d duration_us=%d errors=%d p50=%d p90=%d p99=%d p999=%d mean=%.1f\n",
      summary.requests, summary.duration, errors,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.mean))
end
