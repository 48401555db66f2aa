#!/usr/bin/env bash
# oap_profile.sh - trace profiling against a real SkyWalking OAP 10.1.0 (docs/profiling.md),
# through the GraphQL API the UI uses: tests/profile/slow_server.c traced as prof-oap; a task
# created with createProfileTask (GET:/slow, threshold 100 ms, period 20 ms, max 3) reaches the
# reporter through getProfileTaskCommands (the OAP's task cache refreshes every 10 s); after 4
# slow requests getProfileTaskSegments lists the profiled segments and getSegmentsProfileAnalyze
# of one of them gives a tree naming slow_busy_function, counted and timed.
E2E_NAME=oap_profile
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
e2e_init
write_config 'collector.get_profile_task_interval=1'
oap_start
start_server srv traced prof-oap "$SLOW_SERVER"
SP=$PORT
for i in 1 2 3; do
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
done
gql_until '{ listServices { id name } }' '[.listServices[].name] | index("prof-oap") != null' 60 \
    "the service prof-oap listed"
SID=$(jq -r '.listServices[] | select(.name == "prof-oap") | .id' <<<"$GQL")
GQL=$(gql "mutation { createProfileTask(creationRequest: {serviceId: \"$SID\",
    endpointName: \"GET:/slow\", startTime: $(now_ms), duration: 1, minDurationThreshold: 100,
    dumpPeriod: 20, maxSamplingCount: 3}) { id errorReason } }")
expect '.createProfileTask.errorReason == null and (.createProfileTask.id | length > 0)' \
    "the task was created"
TASK=$(jq -r '.createProfileTask.id' <<<"$GQL")
echo "task $TASK for service $SID"
RLOG=$T/run/swagent-reporter.log
wait_for "grep -q 'task $TASK for prof-oap is running' '$RLOG'" 60 ||
    oap_fail agent "the reporter did not start task $TASK: $(grep profile "$RLOG" | tail -n 5)"
for i in 1 2 3 4; do
    [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request $i failed"
done
Q="{ getProfileTaskSegments(taskID: \"$TASK\") { traceId spans { segmentId spanId startTime
    endTime endpointName profiled } } }"
gql_until "$Q" '[.getProfileTaskSegments[].spans[] | select(.profiled)] | length >= 3' 90 \
    "3 profiled segments of the task"
expect '[.getProfileTaskSegments[].spans[] | select(.profiled and .spanId == 0)]
    | length == 3 and all(.endpointName == "GET:/slow")' "3 profiled GET:/slow segments (max 3)"
SPAN=$(jq -c '[.getProfileTaskSegments[].spans[] | select(.profiled and .spanId == 0)][0]' <<<"$GQL")
SEG=$(jq -r .segmentId <<<"$SPAN")
S=$(jq -r .startTime <<<"$SPAN")
E=$(jq -r .endTime <<<"$SPAN")
A="{ getSegmentsProfileAnalyze(queries: [{segmentId: \"$SEG\", timeRange: {start: $S, end: $E}}])
    { tip trees { elements { id parentId codeSignature duration durationChildExcluded count } } } }"
gql_until "$A" '[.getSegmentsProfileAnalyze.trees[]?.elements[]?] | length > 0' 30 "the analysis"
echo "$GQL" | jq -r '.getSegmentsProfileAnalyze.trees[].elements[]
    | "\(.count)\t\(.duration)\t\(.durationChildExcluded)\t\(.codeSignature)"'
expect '[.getSegmentsProfileAnalyze.trees[].elements[] | select(.codeSignature
    | test("!slow_busy_function"))] | (map(.count) | add) >= 7' \
    "slow_busy_function in the tree with at least 7 of its ~10 snapshots"
expect '[.getSegmentsProfileAnalyze.trees[].elements[] | select(.codeSignature
    | test("!busy_inner$"))] | length >= 1 and (map(.duration) | add) >= 100' \
    "busy_inner, the leaf, with its time"
oap_log_check
echo "ok oap_profile"
