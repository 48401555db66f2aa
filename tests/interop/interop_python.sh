#!/usr/bin/env bash
# interop_python.sh - interop with SkyWalking's official Python agent (PyPI apache-skywalking,
# pinned by requirements-python.txt), the second foreign peer after the Node.js agent:
#   curl (swagent) -> python http.server traced by the Python agent (NOT under LD_PRELOAD)
#   -> python3 -m http.server (swagent),
# all reporting to one collector-stub, two requests (200 and a relayed 404). Checks
# (python_chain.sh): each request one trace across the three services; the Python agent's entry
# ref names curl's exit (segment, span, service, instance, endpoint, networkAddressUsedAtPeer),
# so it decodes our sw8; python's ref names the Python agent's exit (span 1, instance, endpoint,
# peer), so we decode theirs (sent by urllib as "Sw8", next to an empty "Sw8-Correlation");
# errors on every hop of the 404; collector-stub took the Python agent's management calls and
# answered every call OK (its meter, log and profile services, which the stub does not
# implement, are turned off by their SW_AGENT_* switches).
# Needs the ctest fixture interop_pip_install: PY_VENV names its venv.
E2E_NAME=interop_python
. "$E2E_DIR/lib.sh"
. "$INTEROP_DIR/python_chain.sh"
e2e_init
start_stub
python_chain_start
python_chain_requests
wait_segments 6 30
T_END=$(now_ms)
python_chain_check_segments
# The stub takes the Python agent's management calls (first heartbeat after 2 s).
wait_for "grep -q '\"keepAlive\",\"service\":\"$PYC_AGENT\"' '$T/mgmt.json'" 30 ||
    fail "no keepAlive from the Python agent"
check '[.[] | select(.method == "reportInstanceProperties" and .service == "'"$PYC_AGENT"'")] as $p
    | ($p | length) >= 1 and all($p[]; .serviceInstance == "'"$PYC_AGENT_INSTANCE"'"
        and ([.properties[] | select(.key == "language" and .value == "python")] | length) == 1
        and ([.properties[] | select(.key == "Process No." and .value == "'"$PYC_MID_PID"'")] | length) == 1)' \
    "reportInstanceProperties of the Python agent" "$T/mgmt.json"
# Every call the stub answered with a status other than OK has a line "call N PATH: STATUS: why".
grep -E 'call [0-9]+ [^ ]+: [A-Z_]+: ' "$T/stub.err" && fail "collector-stub refused a call"
grep -q -e 'Traceback' -e '\[ERROR\]' "$T/pyagent.err" && fail "the Python agent logged an error"
echo "ok interop_python"
