# stub_e2e_check.jq - checks the multi-trace segments stub_client sent with prefix $p
# ($k streams x $n segments, --base-time $base) field by field in a slurped segments file.
# Prints one line per problem; prints nothing when everything matches. $mode "max" allows
# fewer segments than sent (a dropped connection), never wrong or duplicated ones.
# proto3 JSON: a default value may be omitted, int64 may be a string or a number.

def i64: if . == null then "0" else tostring end;
def chk($what; $got; $want):
  if $got == $want then empty
  else "\(.traceSegmentId): \($what): got \($got | tojson), want \($want | tojson)" end;

[.[] | select((.traceSegmentId // "") | startswith($p + "-s"))] as $segs
| ($segs | map(.traceSegmentId) | unique | length) as $uniq
| (if $mode == "max" then
     (if ($segs | length) > $k * $n then "\($segs | length) segments, at most \($k * $n) sent"
      else empty end)
   else
     (if ($segs | length) != $k * $n then "\($segs | length) segments, expected \($k * $n)"
      else empty end)
   end),
  (if $uniq != ($segs | length) then "duplicate segments: \($segs | length) lines, \($uniq) ids"
   else empty end),
  ($segs[]
   | . as $s
   | (.traceSegmentId | capture("-s(?<k>[0-9]+)-(?<i>[0-9]+)$")
      // {k: "-1", i: "-1"}) as $m
   | ($m.k | tonumber) as $kk
   | ($m.i | tonumber) as $ii
   | if $kk < 0 or $kk >= $k or $ii < 0 or $ii >= $n then "\(.traceSegmentId): unexpected id"
     else
       chk("traceId"; .traceId; "\($p)-t\($kk)-\($ii)"),
       chk("service"; .service; "svc-\($kk)"),
       chk("serviceInstance"; .serviceInstance; "inst-\($kk)@127.0.0.1"),
       chk("isSizeLimited"; .isSizeLimited // false; false),
       chk("span count"; .spans | length; 2),
       (if (.spans | length) != 2 then empty
        else
          (.spans[0] as $e
           | chk("span0.spanId"; $e.spanId // 0; 0),
             chk("span0.parentSpanId"; $e.parentSpanId // 0; -1),
             chk("span0.startTime"; $e.startTime | i64; "\($base + $ii)"),
             chk("span0.endTime"; $e.endTime | i64; "\($base + $ii + 5)"),
             chk("span0.operationName"; $e.operationName; "GET:/item/\($ii)"),
             chk("span0.peer"; $e.peer // ""; ""),
             chk("span0.spanType"; $e.spanType // "Entry"; "Entry"),
             chk("span0.spanLayer"; $e.spanLayer // "Unknown"; "Http"),
             chk("span0.componentId"; $e.componentId // 0; 49),
             chk("span0.isError"; $e.isError // false; false),
             chk("span0.skipAnalysis"; $e.skipAnalysis // false; false),
             chk("span0.refs"; $e.refs // []; []),
             chk("span0.logs"; $e.logs // []; []),
             chk("span0.tags"; $e.tags // [];
                 [{key: "http.method", value: "GET"}, {key: "http.status_code", value: "200"}])),
          (.spans[1] as $x
           | chk("span1.spanId"; $x.spanId // 0; 1),
             chk("span1.parentSpanId"; $x.parentSpanId // 0; 0),
             chk("span1.startTime"; $x.startTime | i64; "\($base + $ii + 1)"),
             chk("span1.endTime"; $x.endTime | i64; "\($base + $ii + 4)"),
             chk("span1.operationName"; $x.operationName; "/backend/\($ii)"),
             chk("span1.peer"; $x.peer; "127.0.0.1:\(9000 + $kk)"),
             chk("span1.spanType"; $x.spanType // "Entry"; "Exit"),
             chk("span1.spanLayer"; $x.spanLayer // "Unknown"; "Http"),
             chk("span1.componentId"; $x.componentId // 0; 49),
             chk("span1.isError"; $x.isError // false; false),
             chk("span1.refs"; $x.refs // []; []),
             chk("span1.tags"; $x.tags // []; []),
             chk("span1.logs"; $x.logs // []; []))
        end)
     end)
