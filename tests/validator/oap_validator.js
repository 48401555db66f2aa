#!/usr/bin/env node
// oap_validator.js - an independent OAP stand-in that judges what swagent sends.
//
// It is built only from SkyWalking's OWN schema: the message classes and gRPC service
// definitions that the SkyWalking project generated from apache/skywalking-data-collect-protocol
// and ships in the npm package skywalking-backend-js (lib/proto/**/*_pb.js, *_grpc_pb.js),
// served by @grpc/grpc-js and decoded by google-protobuf. Nothing here reads swagent's proto/
// files or code, so a field number, type or enum that swagent got wrong shows up as a decode
// error or a violation rather than being agreed with.
//
// Modes:
//   serve  --out DIR [--listen 127.0.0.1:0] [--port-file F]
//          gRPC server: skywalking.v3.TraceSegmentReportService/collect (client stream; one
//          empty Commands after the client half-closes, as OAP does) and collectInSync,
//          skywalking.v3.ManagementService/reportInstanceProperties and keepAlive (empty
//          Commands). gzip-compressed messages are accepted (grpc-js decompresses them). Every
//          segment is checked against OAP's analysis rules as it arrives; DIR gets
//          segments.jsonl, management.jsonl, calls.jsonl and violations.jsonl (one JSON object
//          per line; segments and messages as the generated classes' toObject()). Runs until
//          SIGTERM/SIGINT.
//   check  --out DIR [--expect-segments N] [--expect-traces N] [--require-parents]
//          [--strict-links] [--dead-peers HOST:PORT,...] [--same-clock [--clock-slack MS]]
//          [--require-gzip] [--require-properties] [--t0 MS --t1 MS]
//          Re-reads DIR, repeats the per-segment checks, runs the cross-segment pass (OAP's
//          relation building), prints a summary and exits 1 on any violation or unmet
//          expectation (including receiving nothing at all).
//   --self-test
//          Starts the server in-process, sends hand-made good and bad segments through the
//          generated client with gzip on (and raw bytes: an unknown field, a truncated
//          message), and verifies that every bad one is flagged with the expected rule and the
//          good ones are not. Exits 1 otherwise.
//
// Every segment and management message is also re-encoded with the official classes and must
// equal the bytes received (rule `roundtrip`): a field number, wire type or encoding the
// schema does not have cannot hide behind a lenient decoder.
//
// Rules (reference: shared/reference/skywalking-protocol.md sections 2, 4, 10). Violation codes
// are stable strings, listed in RULES below. Works on node 18 and 20 (no newer APIs).
'use strict';

const fs = require('fs');
const path = require('path');

function load(mod) {
    try {
        return require(mod);
    } catch (e) {
        process.stderr.write(`oap_validator: cannot load ${mod} (${e.message}); run npm ci of ` +
            `tests/validator/package.json and set NODE_PATH to its node_modules\n`);
        process.exit(2);
    }
}
const grpc = load('@grpc/grpc-js');
const SW = 'skywalking-backend-js/lib/proto/';
const tracingPb = load(SW + 'language-agent/Tracing_pb.js');
const tracingGrpc = load(SW + 'language-agent/Tracing_grpc_pb.js');
const mgmtPb = load(SW + 'management/Management_pb.js');
const mgmtGrpc = load(SW + 'management/Management_grpc_pb.js');
const commonPb = load(SW + 'common/Common_pb.js');

// Enum values known to the official schema (from the generated code, not typed in here).
const SPAN_TYPES = new Set(Object.values(tracingPb.SpanType));
const SPAN_LAYERS = new Set(Object.values(tracingPb.SpanLayer));
const REF_TYPES = new Set(Object.values(tracingPb.RefType));
const ENTRY = tracingPb.SpanType.ENTRY;
const EXIT = tracingPb.SpanType.EXIT;
const HTTP = tracingPb.SpanLayer.HTTP;
const CROSS_PROCESS = tracingPb.RefType.CROSSPROCESS;
const CROSS_THREAD = tracingPb.RefType.CROSSTHREAD;

// Component ids of OAP's component-libraries.yml that an HTTP agent may sensibly use
// (reference section 4). 0 is "Unknown". swagent documents 49 (generic http).
const KNOWN_COMPONENTS = new Map([
    [1, 'Tomcat'], [2, 'HttpClient'], [12, 'OKHttp'], [49, 'http'], [50, 'rpc'], [66, 'JdkHttp'],
    [110, 'tcp'], [129, 'https'], [130, 'tls'], [4001, 'HttpServer'], [5004, 'GoHttpServer'],
    [5005, 'GoHttpClient'], [6000, 'Nginx'], [6001, 'Kong'], [6002, 'APISIX'], [8002, 'cURL'],
    [9000, 'EnvoyProxy'], [11000, 'Rust'],
]);
// OAP's noUpstreamRealAddressAgents default: exits with these ids make no instance relation.
const NO_UPSTREAM_REAL_ADDRESS = new Set([6000, 9000]);

// Epoch milliseconds between 2020-01-01 and 2100-01-01: catches s, µs and ns.
const MS_MIN = Date.UTC(2020, 0, 1);
const MS_MAX = Date.UTC(2100, 0, 1);

// Every rule; a violation carries one of these codes. "warn" rules are reported, not failed.
const RULES = {
    'decode': 'message does not decode with the official schema',
    'roundtrip': 'the message re-encoded by the official classes differs from the bytes received ' +
        '(fields unknown to the schema, wrong wire types, or a non-canonical encoding)',
    'no-trace-id': 'traceId empty', 'trace-id-long': 'traceId longer than 150 chars',
    'no-segment-id': 'traceSegmentId empty', 'segment-id-long': 'traceSegmentId longer than 150',
    'no-service': 'service empty', 'no-instance': 'serviceInstance empty',
    'service-long': 'service longer than 70 (OAP truncates) [warn]',
    'instance-long': 'serviceInstance longer than 70 (OAP truncates) [warn]',
    'no-spans': 'segment without spans (OAP drops it silently)',
    'no-span0': 'no span with spanId 0 (OAP fills the segment record from span 0 only)',
    'span0-parent': 'span 0 parentSpanId is not -1',
    'dup-span-id': 'spanId used twice in one segment',
    'bad-parent': 'parentSpanId does not name another span of the segment',
    'parent-cycle': 'parent chain does not reach span 0',
    'time-unit': 'startTime/endTime not epoch milliseconds (2020..2100)',
    'time-order': 'endTime before startTime',
    'time-window': 'span time outside the test run',
    'span-type': 'spanType not in the schema enum',
    'span-layer': 'spanLayer not in the schema enum',
    'no-operation': 'operationName empty',
    'operation-long': 'operationName longer than 150 (OAP truncates) [warn]',
    'exit-no-peer': 'Exit span without peer (ignored in topology)',
    'operation-query': 'Http span operationName carries a query string (one OAP endpoint per ' +
        'distinct query)',
    'skip-analysis': 'skipAnalysis set: stored, but no metrics or topology [warn]',
    'time-nesting': 'a span starts before or ends after its parent span (same process clock)',
    'component-unknown': 'componentId not a known component-libraries.yml id',
    'component-no-relation': 'Exit with component 6000/9000 makes no instance relation [warn]',
    'ref-not-entry': 'refs on a span that is not an Entry span (CrossThread: not span 0)',
    'ref-type': 'refType not in the schema enum',
    'ref-not-crossprocess': 'ref is not CrossProcess (HTTP hops are cross-process)',
    'ref-field-empty': 'ref field empty (traceId, parentTraceSegmentId, parentService, ' +
        'parentServiceInstance, parentEndpoint, networkAddressUsedAtPeer)',
    'ref-span-negative': 'ref parentSpanId < 0',
    'ref-trace-id': 'ref traceId differs from the segment traceId',
    'status-not-int': 'http.status_code tag does not parse as an integer',
    'status-dup': 'http.status_code tag present more than once',
    'is-error': 'isError inconsistent with http.status_code >= 400',
    'empty-tag-key': 'tag with an empty key',
    'log-time': 'log time not epoch milliseconds',
    'props-no-language': 'InstanceProperties without the `language` property',
    'props-no-service': 'InstanceProperties/InstancePingPkg service or serviceInstance empty',
    // Cross-segment pass.
    'dup-segment-id': 'traceSegmentId received twice',
    'parent-missing': 'ref parentTraceSegmentId names a segment that never arrived',
    'parent-trace': 'ref traceId differs from the parent segment traceId',
    'parent-span-missing': 'ref parentSpanId names no span of the parent segment',
    'parent-not-exit': 'ref parentSpanId names a span that is not an Exit span',
    'peer-mismatch': 'ref networkAddressUsedAtPeer differs from the parent exit peer',
    'parent-service': 'ref parentService differs from the parent segment service',
    'parent-instance': 'ref parentServiceInstance differs from the parent segment instance',
    'parent-endpoint': 'ref parentEndpoint differs from the name of the parent segment first ' +
        'Entry span (or of its span 0)',
    'time-nesting-remote': 'the callee Entry span is not within the caller Exit span it links ' +
        'to, give or take --clock-slack ms (--same-clock: all processes on one host)',
    'status-disagree': 'the callee Entry span and the caller Exit span it links to disagree on ' +
        'http.status_code or isError (not an OAP rule: a consistency check of this agent)',
    'exit-unlinked': 'Exit span that no received segment refers to (strict links)',
    'exit-multi-linked': 'Exit span referred to by several segments (strict links)',
    'trace-roots': 'trace without exactly one root segment (strict links)',
    // Expectations of the check mode.
    'expect-segments': 'unexpected number of segments', 'expect-traces': 'unexpected trace count',
    'expect-gzip': 'a call was not gzip-compressed', 'expect-properties': 'no InstanceProperties',
    'instance-no-properties': 'an instance sent segments but never InstanceProperties ' +
        '(OAP shows it without language/host/pid) [warn]',
};
const WARN = new Set(['service-long', 'instance-long', 'operation-long', 'component-no-relation',
    'instance-no-properties', 'skip-analysis']);

function v(code, seg, extra) {
    if (!RULES[code]) throw new Error('unknown rule ' + code);
    const o = {code, rule: RULES[code], level: WARN.has(code) ? 'warn' : 'error'};
    if (seg) {
        o.service = seg.service;
        o.traceSegmentId = seg.tracesegmentid;
    }
    return Object.assign(o, extra || {});
}

function tagValues(span, key) {
    return (span.tagsList || []).filter((t) => t.key === key).map((t) => t.value);
}

function msOk(t) {
    return typeof t === 'number' && Number.isFinite(t) && t >= MS_MIN && t <= MS_MAX;
}

// checkSegment(seg, opts): the per-segment rules over a SegmentObject.toObject(). opts.t0/t1
// (optional, ms) bound every span's times. Returns a list of violations.
function checkSegment(seg, opts) {
    opts = opts || {};
    const out = [];
    const add = (code, extra) => out.push(v(code, seg, extra));
    if (!seg.traceid) add('no-trace-id');
    else if (seg.traceid.length > 150) add('trace-id-long', {value: seg.traceid});
    if (!seg.tracesegmentid) add('no-segment-id');
    else if (seg.tracesegmentid.length > 150) add('segment-id-long');
    if (!seg.service) add('no-service');
    else if (seg.service.length > 70) add('service-long', {value: seg.service});
    if (!seg.serviceinstance) add('no-instance');
    else if (seg.serviceinstance.length > 70) add('instance-long', {value: seg.serviceinstance});
    const spans = seg.spansList || [];
    if (spans.length === 0) {
        add('no-spans');
        return out;
    }
    const byId = new Map();
    for (const s of spans) {
        if (byId.has(s.spanid)) add('dup-span-id', {spanId: s.spanid});
        else byId.set(s.spanid, s);
    }
    const span0 = byId.get(0);
    if (!span0) add('no-span0', {spanIds: spans.map((s) => s.spanid)});
    else if (span0.parentspanid !== -1) add('span0-parent', {parentSpanId: span0.parentspanid});
    for (const s of spans) {
        const sid = {spanId: s.spanid};
        if (s.spanid !== 0 && (s.parentspanid === s.spanid || !byId.has(s.parentspanid))) {
            add('bad-parent', {spanId: s.spanid, parentSpanId: s.parentspanid});
        } else if (s.spanid !== 0) {
            // The chain must reach span 0 within as many steps as there are spans.
            let p = s, n = 0;
            while (p && p.spanid !== 0 && n <= spans.length) {
                p = byId.get(p.parentspanid);
                n++;
            }
            if (!p || p.spanid !== 0) add('parent-cycle', sid);
        }
        if (!msOk(s.starttime) || !msOk(s.endtime)) {
            add('time-unit', {spanId: s.spanid, startTime: s.starttime, endTime: s.endtime});
        } else {
            if (s.endtime < s.starttime) {
                add('time-order', {spanId: s.spanid, startTime: s.starttime, endTime: s.endtime});
            }
            if ((opts.t0 !== undefined && s.starttime < opts.t0) ||
                (opts.t1 !== undefined && s.endtime > opts.t1)) {
                add('time-window', {spanId: s.spanid, startTime: s.starttime, endTime: s.endtime,
                    t0: opts.t0, t1: opts.t1});
            }
        }
        if (!SPAN_TYPES.has(s.spantype)) add('span-type', {spanId: s.spanid, spanType: s.spantype});
        if (!SPAN_LAYERS.has(s.spanlayer)) {
            add('span-layer', {spanId: s.spanid, spanLayer: s.spanlayer});
        }
        if (!s.operationname) add('no-operation', sid);
        else if (s.operationname.length > 150) add('operation-long', sid);
        if (s.spantype === EXIT && !s.peer) add('exit-no-peer', sid);
        if (s.spanlayer === HTTP && s.operationname && s.operationname.includes('?')) {
            add('operation-query', {spanId: s.spanid, operationName: s.operationname});
        }
        if (s.skipanalysis) add('skip-analysis', sid);
        const par = s.spanid !== 0 ? byId.get(s.parentspanid) : undefined;
        if (par && par !== s && msOk(s.starttime) && msOk(s.endtime) && msOk(par.starttime) &&
            msOk(par.endtime) && (s.starttime < par.starttime || s.endtime > par.endtime)) {
            add('time-nesting', {spanId: s.spanid, start: s.starttime, end: s.endtime,
                parentStart: par.starttime, parentEnd: par.endtime});
        }
        if (!KNOWN_COMPONENTS.has(s.componentid)) {
            add('component-unknown', {spanId: s.spanid, componentId: s.componentid});
        } else if (s.spantype === EXIT && NO_UPSTREAM_REAL_ADDRESS.has(s.componentid)) {
            add('component-no-relation', {spanId: s.spanid, componentId: s.componentid});
        }
        for (const t of s.tagsList || []) if (!t.key) add('empty-tag-key', sid);
        const st = tagValues(s, 'http.status_code');
        if (st.length > 1) add('status-dup', {spanId: s.spanid, values: st});
        if (st.length >= 1) {
            if (!/^-?[0-9]{1,10}$/.test(st[0])) {
                add('status-not-int', {spanId: s.spanid, value: st[0]});
            } else if (s.spanlayer === HTTP && s.iserror !== (parseInt(st[0], 10) >= 400)) {
                add('is-error', {spanId: s.spanid, status: st[0], isError: s.iserror});
            }
        }
        for (const l of s.logsList || []) {
            if (!msOk(l.time)) add('log-time', {spanId: s.spanid, time: l.time});
        }
        const refs = s.refsList || [];
        for (const r of refs) {
            const rid = {spanId: s.spanid, ref: r};
            if (!REF_TYPES.has(r.reftype)) {
                add('ref-type', rid);
                continue;
            }
            if (r.reftype === CROSS_THREAD) {
                if (s.spanid !== 0) add('ref-not-entry', rid);
                if (!opts.allowCrossThread) add('ref-not-crossprocess', rid);
            } else if (s.spantype !== ENTRY) {
                add('ref-not-entry', rid);
            }
            const need = ['traceid', 'parenttracesegmentid', 'parentservice',
                'parentserviceinstance', 'parentendpoint'];
            if (r.reftype === CROSS_PROCESS) need.push('networkaddressusedatpeer');
            const empty = need.filter((k) => !r[k]);
            if (empty.length) add('ref-field-empty', {spanId: s.spanid, fields: empty, ref: r});
            if (r.parentspanid < 0) add('ref-span-negative', rid);
            if (r.traceid && seg.traceid && r.traceid !== seg.traceid) add('ref-trace-id', rid);
        }
    }
    return out;
}

// checkManagement(method, msg): InstanceProperties must name service, instance and `language`.
function checkManagement(method, m) {
    const out = [];
    const seg = {service: m.service, tracesegmentid: undefined};
    if (!m.service || !m.serviceinstance) {
        out.push(v('props-no-service', seg, {method, serviceInstance: m.serviceinstance}));
    }
    if (method === 'reportInstanceProperties' &&
        !(m.propertiesList || []).some((p) => p.key === 'language' && p.value)) {
        out.push(v('props-no-language', seg, {serviceInstance: m.serviceinstance,
            properties: m.propertiesList}));
    }
    return out;
}

// The parent endpoint a callee must see: the operation name of the caller segment's first
// Entry span (lowest spanId), or of its first span (span 0) when it has no Entry span.
function parentEndpointOf(seg) {
    const spans = (seg.spansList || []).slice().sort((a, b) => a.spanid - b.spanid);
    const e = spans.find((s) => s.spantype === ENTRY);
    return (e || spans[0] || {}).operationname;
}

// crossCheck(segments, opts): OAP's relation building over all received segments.
// opts.requireParents: a ref to a segment never received is a violation. opts.strictLinks:
// every Exit span is referred to by exactly one segment and every trace has one root segment
// (true when every server on the path is traced); opts.deadPeers (a Set) names exit peers
// where nothing listens (failed connects), exempt from that. Returns {violations, links, traces}.
function crossCheck(segs, opts) {
    opts = opts || {};
    const out = [];
    const byId = new Map();
    for (const s of segs) {
        if (byId.has(s.tracesegmentid)) out.push(v('dup-segment-id', s));
        else byId.set(s.tracesegmentid, s);
    }
    let links = 0, unresolved = 0;
    const exitRefs = new Map(); // "segId/spanId" -> count of refs
    for (const s of segs) {
        for (const sp of s.spansList || []) {
            for (const r of sp.refsList || []) {
                if (r.reftype !== CROSS_PROCESS) continue;
                const p = byId.get(r.parenttracesegmentid);
                const ctx = {spanId: sp.spanid, ref: r};
                if (!p) {
                    unresolved++;
                    if (opts.requireParents) out.push(v('parent-missing', s, ctx));
                    continue;
                }
                let ok = true;
                const bad = (code, extra) => {
                    ok = false;
                    out.push(v(code, s, Object.assign({}, ctx, extra)));
                };
                if (r.traceid !== p.traceid) bad('parent-trace', {parentTraceId: p.traceid});
                const ps = (p.spansList || []).find((x) => x.spanid === r.parentspanid);
                if (!ps) {
                    bad('parent-span-missing');
                } else {
                    if (ps.spantype !== EXIT) bad('parent-not-exit', {parentSpan: ps});
                    if (ps.peer !== r.networkaddressusedatpeer) {
                        bad('peer-mismatch', {parentPeer: ps.peer});
                    }
                    // Caller and callee saw the same response: same status, same error flag,
                    // when the caller got a status at all (a timed-out caller may not have).
                    const cs = tagValues(ps, 'http.status_code');
                    const es = tagValues(sp, 'http.status_code');
                    if (ps.spantype === EXIT && sp.spantype === ENTRY && ps.spanlayer === HTTP &&
                        sp.spanlayer === HTTP && cs.length === 1 &&
                        (es.length !== 1 || es[0] !== cs[0] || sp.iserror !== ps.iserror)) {
                        bad('status-disagree', {callerStatus: cs[0], callerIsError: ps.iserror,
                            calleeStatus: es.length ? es[0] : null, calleeIsError: sp.iserror,
                            calleeLogs: sp.logsList});
                    }
                    // Each side stamps its time after its syscall returns, so on a busy host a
                    // callee may end (or start) a few ms outside its caller: hence the slack.
                    // What this catches is a process on another clock or in another unit.
                    const slack = opts.clockSlack === undefined ? 1000 : opts.clockSlack;
                    if (opts.sameClock && ps.spantype === EXIT &&
                        (sp.starttime < ps.starttime - slack || sp.endtime > ps.endtime + slack)) {
                        bad('time-nesting-remote', {start: sp.starttime, end: sp.endtime,
                            callerStart: ps.starttime, callerEnd: ps.endtime, slack});
                    }
                    const k = p.tracesegmentid + '/' + ps.spanid;
                    exitRefs.set(k, (exitRefs.get(k) || 0) + 1);
                }
                if (r.parentservice !== p.service) bad('parent-service', {parentSvc: p.service});
                if (r.parentserviceinstance !== p.serviceinstance) {
                    bad('parent-instance', {parentInstance: p.serviceinstance});
                }
                const ep = parentEndpointOf(p);
                if (r.parentendpoint !== ep) bad('parent-endpoint', {expected: ep});
                if (ok) links++;
            }
        }
    }
    const traces = new Map();
    for (const s of segs) {
        if (!traces.has(s.traceid)) traces.set(s.traceid, []);
        traces.get(s.traceid).push(s);
    }
    if (opts.strictLinks) {
        for (const s of segs) {
            for (const sp of s.spansList || []) {
                if (sp.spantype !== EXIT || (opts.deadPeers && opts.deadPeers.has(sp.peer))) {
                    continue;
                }
                const n = exitRefs.get(s.tracesegmentid + '/' + sp.spanid) || 0;
                if (n === 0) out.push(v('exit-unlinked', s, {spanId: sp.spanid, peer: sp.peer}));
                if (n > 1) out.push(v('exit-multi-linked', s, {spanId: sp.spanid, refs: n}));
            }
        }
        for (const [tid, list] of traces) {
            const roots = list.filter((s) => !(s.spansList || []).some(
                (sp) => (sp.refsList || []).length > 0));
            if (roots.length !== 1) {
                out.push(v('trace-roots', null, {traceId: tid, roots: roots.length,
                    segments: list.length}));
            }
        }
    }
    return {violations: out, links, unresolved, traces: traces.size};
}

// The violations of one received record (segments.jsonl / management.jsonl line).
function recordViolations(rec, opts) {
    let vs = rec.segment ? checkSegment(rec.segment, opts) :
        checkManagement(rec.method, rec.message);
    if (rec.roundtrip) {
        const who = rec.segment || {service: rec.message.service};
        vs = vs.concat([v('roundtrip', who, {method: rec.method, diff: rec.roundtrip})]);
    }
    return vs;
}

// ---------------------------------------------------------------------------------------------
// The gRPC server.

function appendLine(file, obj) {
    fs.appendFileSync(file, JSON.stringify(obj) + '\n');
}

// How each call's messages were compressed. grpc-js strips `grpc-encoding` from the metadata
// handlers see, so a server interceptor (the only one, so it gets grpc-js's base call) notes the
// call's encoding and counts the encoding of every message it decompresses (a message with the
// compressed flag 0 is "identity" even on a gzip call; gRPC sends a message uncompressed when
// gzip would not make it smaller). The handler finds its record through a metadata key.
// Relies on grpc-js internals (pinned by package-lock.json); if they change, the encoding reads
// "unknown" and --require-gzip fails loudly.
const CALL_KEY = 'x-oap-validator-call';
const callInfo = new Map();
let callSeq = 0;

function encodingInterceptor(method, call) {
    const id = String(++callSeq);
    const info = {encoding: typeof call.incomingEncoding === 'string' ? call.incomingEncoding :
        'unknown', messages: {}};
    if (typeof call.decompressMessage === 'function') {
        const orig = call.decompressMessage;
        call.decompressMessage = function (msg, enc) {
            info.messages[enc] = (info.messages[enc] || 0) + 1;
            return orig.call(this, msg, enc);
        };
    } else {
        info.encoding = 'unknown';
    }
    if (call.metadata && typeof call.metadata.set === 'function') {
        call.metadata.set(CALL_KEY, id);
        callInfo.set(id, info);
    }
    return call;
}

function infoOf(call) {
    const id = call.metadata.get(CALL_KEY);
    return (id.length && callInfo.get(String(id[0]))) || {encoding: 'unknown', messages: {}};
}

function encodingOf(call) {
    return infoOf(call).encoding;
}

function endCall(call) {
    const info = infoOf(call);
    const id = call.metadata.get(CALL_KEY);
    if (id.length) callInfo.delete(String(id[0]));
    return info;
}

function peerOf(call) {
    try {
        return call.getPeer();
    } catch (e) {
        return '';
    }
}

// The top-level fields of a protobuf message as [fieldNumber, wireType, byteLength] (for the
// roundtrip rule's diagnostics), or a string saying where the bytes stop being protobuf.
function wireFields(buf) {
    const out = [];
    let i = 0;
    const varint = () => {
        let v = 0, m = 1, b;
        do {
            if (i >= buf.length) throw new Error('truncated varint');
            b = buf[i++];
            v += (b & 0x7f) * m;
            m *= 128;
        } while (b & 0x80);
        return v;
    };
    try {
        while (i < buf.length) {
            const start = i;
            const key = varint();
            const wt = key % 8;
            const fn = Math.floor(key / 8);
            if (wt === 0) varint();
            else if (wt === 1) i += 8;
            else if (wt === 2) i += varint();
            else if (wt === 5) i += 4;
            else throw new Error(`wire type ${wt} at byte ${start}`);
            if (i > buf.length) throw new Error(`field ${fn} overruns the message`);
            out.push([fn, wt, i - start]);
        }
    } catch (e) {
        return e.message;
    }
    return out;
}

// roundTrip(obj): null when the generated class re-encodes obj to exactly the bytes received
// (deserialize wrapper below keeps them in obj.__raw), else a description of the difference.
// swagent (protobuf-c) and google-protobuf both write fields in number order and leave proto3
// defaults out, so a faithful encoder round-trips byte for byte.
function roundTrip(obj) {
    if (!obj.__raw) return null;
    const again = Buffer.from(obj.serializeBinary());
    if (again.equals(obj.__raw)) return null;
    return {receivedBytes: obj.__raw.length, reencodedBytes: again.length,
        receivedFields: wireFields(obj.__raw), reencodedFields: wireFields(again),
        receivedHex: obj.__raw.subarray(0, 256).toString('hex')};
}

// A copy of a generated service definition whose deserializers keep the raw request bytes.
// A message the official class cannot decode is a `decode` violation; the error is rethrown,
// so grpc-js fails the call as grpc-java (OAP) does.
function keepRaw(def, sink) {
    const out = {};
    for (const [name, m] of Object.entries(def)) {
        out[name] = Object.assign({}, m, {requestDeserialize: (buf) => {
            let o;
            try {
                o = m.requestDeserialize(buf);
            } catch (e) {
                sink('violation', v('decode', null, {method: name, error: String(e),
                    bytes: buf.length, hex: Buffer.from(buf).subarray(0, 256).toString('hex')}));
                throw e;
            }
            Object.defineProperty(o, '__raw', {value: Buffer.from(buf), enumerable: false});
            return o;
        }});
    }
    return out;
}

// startServer(listen, sink, cb): sink(kind, record) receives every message and call record.
function startServer(listen, sink, cb) {
    const server = new grpc.Server({'grpc.max_receive_message_length': 50 * 1024 * 1024,
        interceptors: [encodingInterceptor]});
    const empty = () => new commonPb.Commands();
    const onSegment = (call, obj, method) => {
        const seg = obj.toObject();
        const rec = {received: Date.now(), method, encoding: encodingOf(call), segment: seg};
        const rt = roundTrip(obj);
        if (rt) rec.roundtrip = rt;
        sink('segment', rec);
    };
    server.addService(keepRaw(tracingGrpc.TraceSegmentReportServiceService, sink), {
        collect(call, callback) {
            let n = 0;
            call.on('data', (obj) => {
                n++;
                onSegment(call, obj, 'collect');
            });
            call.on('error', (e) => sink('call', {method: 'collect', error: String(e)}));
            // As OAP: the single Commands goes out only after the client half-closes.
            call.on('end', () => {
                const info = endCall(call);
                sink('call', {method: 'collect', encoding: info.encoding, peer: peerOf(call),
                    messages: n, compression: info.messages, at: Date.now()});
                callback(null, empty());
            });
        },
        collectInSync(call, callback) {
            const list = call.request.getSegmentsList();
            const rt = roundTrip(call.request);
            if (rt) sink('violation', v('roundtrip', null, {method: 'collectInSync', diff: rt}));
            for (const o of list) onSegment(call, o, 'collectInSync');
            const info = endCall(call);
            sink('call', {method: 'collectInSync', encoding: info.encoding, messages: list.length,
                compression: info.messages, at: Date.now()});
            callback(null, empty());
        },
    });
    const mgmt = (method) => (call, callback) => {
        const m = call.request.toObject();
        const info = endCall(call);
        sink('management', {received: Date.now(), method, encoding: info.encoding, message: m});
        sink('call', {method, encoding: info.encoding, messages: 1, compression: info.messages,
            at: Date.now()});
        callback(null, empty());
    };
    server.addService(keepRaw(mgmtGrpc.ManagementServiceService, sink), {
        reportInstanceProperties: mgmt('reportInstanceProperties'),
        keepAlive: mgmt('keepAlive'),
    });
    server.bindAsync(listen, grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) return cb(err);
        // grpc-js >= 1.10 starts serving on bind (start() is deprecated there).
        cb(null, server, port);
    });
}

function serve(a) {
    const dir = a.out;
    fs.mkdirSync(dir, {recursive: true});
    const files = {
        segment: path.join(dir, 'segments.jsonl'),
        management: path.join(dir, 'management.jsonl'),
        call: path.join(dir, 'calls.jsonl'),
        violation: path.join(dir, 'violations.jsonl'),
    };
    for (const f of Object.values(files)) fs.writeFileSync(f, '');
    let nseg = 0, nviol = 0;
    const sink = (kind, rec) => {
        if (kind !== 'violation') appendLine(files[kind], rec);
        let vs = [];
        if (kind === 'segment') nseg++;
        if (kind === 'segment' || kind === 'management') vs = recordViolations(rec, a);
        else if (kind === 'violation') vs = [rec];
        for (const x of vs) {
            nviol++;
            appendLine(files.violation, x);
            process.stderr.write(`oap_validator: VIOLATION ${x.code} (${x.rule}) ` +
                `${JSON.stringify(x)}\n`);
        }
    };
    startServer(a.listen || '127.0.0.1:0', sink, (err, server, port) => {
        if (err) {
            process.stderr.write(`oap_validator: bind ${a.listen}: ${err.message}\n`);
            process.exit(2);
        }
        process.stdout.write(`PORT ${port}\n`);
        if (a['port-file']) {
            fs.writeFileSync(a['port-file'] + '.tmp', String(port) + '\n');
            fs.renameSync(a['port-file'] + '.tmp', a['port-file']);
        }
        const stop = () => {
            process.stdout.write(`oap_validator: stopping: ${nseg} segments, ${nviol} ` +
                'violations\n');
            server.tryShutdown(() => process.exit(0));
            setTimeout(() => process.exit(0), 1000).unref();
        };
        process.on('SIGTERM', stop);
        process.on('SIGINT', stop);
    });
}

// ---------------------------------------------------------------------------------------------
// The check mode.

function readJsonl(f) {
    if (!fs.existsSync(f)) return [];
    return fs.readFileSync(f, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

function check(a) {
    const dir = a.out;
    const recs = readJsonl(path.join(dir, 'segments.jsonl'));
    const mgmt = readJsonl(path.join(dir, 'management.jsonl'));
    const calls = readJsonl(path.join(dir, 'calls.jsonl'));
    const segs = recs.map((r) => r.segment);
    let vs = [];
    for (const r of recs) vs = vs.concat(recordViolations(r, a));
    for (const m of mgmt) vs = vs.concat(recordViolations(m, a));
    // Violations only the server could see (no record of their own): undecodable messages,
    // collectInSync round trips.
    vs = vs.concat(readJsonl(path.join(dir, 'violations.jsonl')).filter((x) =>
        x.code === 'decode' || (x.code === 'roundtrip' && x.method === 'collectInSync')));
    const cross = crossCheck(segs, {requireParents: !!a['require-parents'],
        strictLinks: !!a['strict-links'], sameClock: !!a['same-clock'],
        clockSlack: a['clock-slack'] === undefined ? undefined : Number(a['clock-slack']),
        deadPeers: new Set((a['dead-peers'] || '').split(',').filter((x) => x))});
    vs = vs.concat(cross.violations);
    if (a['expect-segments'] !== undefined && segs.length !== Number(a['expect-segments'])) {
        vs.push(v('expect-segments', null, {expected: Number(a['expect-segments']),
            got: segs.length}));
    }
    if (a['expect-traces'] !== undefined && cross.traces !== Number(a['expect-traces'])) {
        vs.push(v('expect-traces', null, {expected: Number(a['expect-traces']),
            got: cross.traces}));
    }
    if (a['require-gzip']) {
        // Every call declares gzip, and the segment calls (collect streams, collectInSync
        // collections) carry gzip-compressed messages.
        for (const c of calls.filter((x) => x.encoding !== 'gzip')) {
            vs.push(v('expect-gzip', null, {call: c}));
        }
        const gz = calls.filter((c) => c.method === 'collect' || c.method === 'collectInSync')
            .reduce((n, c) => n + ((c.compression || {}).gzip || 0), 0);
        if (gz === 0) vs.push(v('expect-gzip', null, {why: 'no segment message was compressed'}));
    }
    const props = mgmt.filter((m) => m.method === 'reportInstanceProperties');
    if (a['require-properties'] && props.length === 0) vs.push(v('expect-properties', null));
    const withProps = new Set(props.map((m) => m.message.service + '\n' +
        m.message.serviceinstance));
    const seen = new Set();
    for (const s of segs) {
        const k = s.service + '\n' + s.serviceinstance;
        if (withProps.has(k) || seen.has(k)) continue;
        seen.add(k);
        vs.push(v('instance-no-properties', null, {service: s.service,
            serviceInstance: s.serviceinstance}));
    }
    const errors = vs.filter((x) => x.level === 'error');
    fs.writeFileSync(path.join(dir, 'check.json'), JSON.stringify({violations: vs}, null, 1));
    for (const x of vs) {
        process.stdout.write(`${x.level.toUpperCase()} ${x.code}: ${x.rule}\n  ` +
            `${JSON.stringify(x)}\n`);
    }
    const enc = {}, msgEnc = {};
    for (const c of calls) {
        enc[c.encoding] = (enc[c.encoding] || 0) + 1;
        for (const [k, n] of Object.entries(c.compression || {})) msgEnc[k] = (msgEnc[k] || 0) + n;
    }
    const summary = {
        segments: segs.length,
        services: [...new Set(segs.map((s) => s.service))].sort(),
        traces: cross.traces,
        spans: segs.reduce((n, s) => n + (s.spansList || []).length, 0),
        refsLinked: cross.links,
        refsUnresolved: cross.unresolved,
        instanceProperties: props.length,
        keepAlives: mgmt.filter((m) => m.method === 'keepAlive').length,
        callsByEncoding: enc,
        messagesByCompression: msgEnc,
        errors: errors.length,
        warnings: vs.length - errors.length,
    };
    process.stdout.write('oap_validator summary: ' + JSON.stringify(summary) + '\n');
    if (segs.length === 0) {
        process.stdout.write('FAIL: the validator received no segment at all\n');
        return 1;
    }
    return errors.length ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Self-test: hand-made segments through the generated client, gzip on.

// Builds a SegmentObject with the generated setters from a plain description.
function buildSegment(d) {
    const s = new tracingPb.SegmentObject();
    s.setTraceid(d.traceId);
    s.setTracesegmentid(d.segmentId);
    s.setService(d.service);
    s.setServiceinstance(d.instance);
    for (const x of d.spans) {
        const sp = new tracingPb.SpanObject();
        sp.setSpanid(x.id);
        sp.setParentspanid(x.parent);
        sp.setStarttime(x.start);
        sp.setEndtime(x.end);
        sp.setOperationname(x.op);
        sp.setPeer(x.peer || '');
        sp.setSpantype(x.type);
        sp.setSpanlayer(x.layer === undefined ? HTTP : x.layer);
        sp.setComponentid(x.component === undefined ? 49 : x.component);
        sp.setIserror(!!x.error);
        for (const [k, val] of x.tags || []) {
            const t = new commonPb.KeyStringValuePair();
            t.setKey(k);
            t.setValue(val);
            sp.addTags(t);
        }
        for (const r of x.refs || []) {
            const ref = new tracingPb.SegmentReference();
            ref.setReftype(r.type === undefined ? CROSS_PROCESS : r.type);
            ref.setTraceid(r.traceId);
            ref.setParenttracesegmentid(r.segmentId);
            ref.setParentspanid(r.spanId);
            ref.setParentservice(r.service);
            ref.setParentserviceinstance(r.instance);
            ref.setParentendpoint(r.endpoint);
            ref.setNetworkaddressusedatpeer(r.address);
            sp.addRefs(ref);
        }
        s.addSpans(sp);
    }
    return s;
}

function selfTestCases() {
    const now = Date.now();
    const client = (id, trace, peer) => ({traceId: trace, segmentId: id, service: 'st-client',
        instance: 'st-client-1', spans: [{id: 0, parent: -1, start: now, end: now + 5,
            op: 'GET:/x', peer, type: EXIT, tags: [['http.status_code', '200']]}]});
    const server = (id, trace, parentSeg, address, o) => Object.assign({traceId: trace,
        segmentId: id, service: 'st-server', instance: 'st-server-1', spans: [{id: 0, parent: -1,
            start: now + 1, end: now + 4, op: 'GET:/x', peer: '127.0.0.1:5555', type: ENTRY,
            tags: [['http.status_code', '200']], refs: [{traceId: trace, segmentId: parentSeg,
                spanId: 0, service: 'st-client', instance: 'st-client-1', endpoint: 'GET:/x',
                address}]}]}, o || {});
    const mut = (seg, f) => {
        f(seg);
        return seg;
    };
    // [description, segment, rule codes that must be flagged (empty: must be clean)].
    return [
        ['good client', client('good-c', 'T1', '10.0.0.1:80'), []],
        ['good server', server('good-s', 'T1', 'good-c', '10.0.0.1:80'), []],
        ['times in µs', mut(client('us', 'T2', 'h:1'), (s) => {
            s.spans[0].start *= 1000;
            s.spans[0].end *= 1000;
        }), ['time-unit']],
        ['times in seconds', mut(client('sec', 'T3', 'h:1'), (s) => {
            s.spans[0].start = Math.floor(now / 1000);
            s.spans[0].end = s.spans[0].start + 1;
        }), ['time-unit']],
        ['no span 0', mut(client('nospan0', 'T4', 'h:1'), (s) => {
            s.spans[0].id = 1;
        }), ['no-span0']],
        ['root parent not -1', mut(client('root0', 'T5', 'h:1'), (s) => {
            s.spans[0].parent = 0;
        }), ['span0-parent']],
        ['ref on exit', mut(client('refexit', 'T6', 'h:1'), (s) => {
            s.spans[0].refs = [{traceId: 'T6', segmentId: 'x', spanId: 0, service: 'a',
                instance: 'b', endpoint: 'c', address: 'd:1'}];
        }), ['ref-not-entry']],
        ['peer mismatch', server('peer-s', 'T1', 'good-c', '127.0.0.1:80'), ['peer-mismatch']],
        ['exit without peer', client('nopeer', 'T7', ''), ['exit-no-peer']],
        ['dangling parent', mut(client('dangle', 'T8', 'h:1'), (s) => {
            s.spans.push({id: 1, parent: 7, start: now, end: now + 1, op: 'x', peer: 'h:2',
                type: EXIT});
        }), ['bad-parent']],
        ['duplicate span id', mut(client('dupid', 'T9', 'h:1'), (s) => {
            s.spans.push({id: 0, parent: -1, start: now, end: now + 1, op: 'x', peer: 'h:2',
                type: EXIT});
        }), ['dup-span-id']],
        ['end before start', mut(client('order', 'T10', 'h:1'), (s) => {
            s.spans[0].end = now - 10;
        }), ['time-order']],
        ['unknown span layer', mut(client('layer', 'T11', 'h:1'), (s) => {
            s.spans[0].layer = 42;
        }), ['span-layer']],
        ['unknown component', mut(client('comp', 'T12', 'h:1'), (s) => {
            s.spans[0].component = 0;
        }), ['component-unknown']],
        ['status not int', mut(client('status', 'T13', 'h:1'), (s) => {
            s.spans[0].tags = [['http.status_code', 'OK']];
        }), ['status-not-int']],
        ['404 without isError', mut(client('err', 'T14', 'h:1'), (s) => {
            s.spans[0].tags = [['http.status_code', '404']];
        }), ['is-error']],
        ['empty ref address', server('noaddr', 'T1', 'good-c', ''), ['ref-field-empty']],
        ['no service', mut(client('nosvc', 'T15', 'h:1'), (s) => {
            s.service = '';
        }), ['no-service']],
        ['no spans', mut(client('nospans', 'T16', 'h:1'), (s) => {
            s.spans = [];
        }), ['no-spans']],
        ['ref to an entry span, wrong endpoint', mut(server('ep', 'T1', 'good-s', 'x'), (s) => {
            s.spans[0].refs[0].service = 'st-server';
            s.spans[0].refs[0].instance = 'st-server-1';
            s.spans[0].refs[0].endpoint = 'GET:/not-the-entry';
        }), ['parent-not-exit', 'parent-endpoint', 'peer-mismatch']],
        ['query string in the operation', mut(client('q', 'T17', 'h:1'), (s) => {
            s.spans[0].op = 'GET:/x?a=1';
        }), ['operation-query']],
        ['child span outside its parent', mut(client('nest', 'T18', 'h:1'), (s) => {
            s.spans.push({id: 1, parent: 0, start: now - 50, end: now + 1, op: 'GET:/y',
                peer: 'h:2', type: EXIT});
        }), ['time-nesting']],
        ['callee status differs from caller', mut(server('sd', 'T1', 'good-c', '10.0.0.1:80'),
            (s) => {
                s.spans[0].tags = [];
                s.spans[0].error = true;
            }), ['status-disagree']],
        ['ref trace differs from parent', server('tr', 'T99', 'good-c', '10.0.0.1:80'),
            ['parent-trace']],
    ];
}

const rawViolations = [];

// Part two of the self-test: bytes the generated classes would never write, sent through a
// pass-through serializer. A good segment with an extra unknown field must be flagged
// `roundtrip`; bytes that are not a SegmentObject must be flagged `decode` (and fail the call).
function rawStream(port, got, done) {
    const def = {collect: Object.assign({}, tracingGrpc.TraceSegmentReportServiceService.collect,
        {requestSerialize: (b) => b})};
    const Raw = grpc.makeGenericClientConstructor(def, 'TraceSegmentReportService');
    const cl = new Raw('127.0.0.1:' + port, grpc.credentials.createInsecure());
    const now = Date.now();
    const good = Buffer.from(buildSegment({traceId: 'R1', segmentId: 'raw-extra', service: 's',
        instance: 'i', spans: [{id: 0, parent: -1, start: now, end: now, op: 'GET:/', peer: 'h:1',
            type: EXIT}]}).serializeBinary());
    const extra = Buffer.concat([good, Buffer.from([15 << 3, 1])]); // field 15, varint 1
    let fails = 0;
    const fail = (m) => {
        fails++;
        console.log('FAIL: ' + m);
    };
    const s1 = cl.collect((e) => {
        if (e) fail('raw stream 1: ' + e.message);
        const l = got.get('raw-extra') || [];
        if (!l.some((x) => x.code === 'roundtrip')) fail('unknown field 15 not flagged roundtrip');
        else console.log('ok   unknown field 15: flagged roundtrip');
        const s2 = cl.collect((e2) => {
            if (!e2) fail('undecodable bytes: the call did not fail');
            if (!rawViolations.some((x) => x.code === 'decode')) {
                fail('undecodable bytes not flagged decode');
            } else {
                console.log('ok   undecodable bytes: flagged decode, call failed (' +
                    (e2 ? e2.code : '') + ')');
            }
            cl.close();
            done(fails);
        });
        // Field 1 (traceId) declared length-delimited with 100 bytes, only 3 present.
        s2.write(Buffer.from([0x0a, 100, 0x41, 0x42, 0x43]));
        s2.end();
    });
    s1.write(extra);
    s1.end();
}

function selfTest() {
    const got = new Map(); // segmentId -> violations (per-segment)
    const segs = [];
    const encodings = new Set();
    let gzipped = 0;
    const sink = (kind, rec) => {
        if (kind === 'segment') {
            segs.push(rec.segment);
            got.set(rec.segment.tracesegmentid, recordViolations(rec, {}));
        }
        if (kind === 'violation') rawViolations.push(rec);
        if (kind === 'call') {
            encodings.add(rec.encoding);
            gzipped += (rec.compression || {}).gzip || 0;
        }
    };
    startServer('127.0.0.1:0', sink, (err, server, port) => {
        if (err) {
            console.log('FAIL: self-test bind: ' + err.message);
            process.exit(1);
        }
        const cases = selfTestCases();
        const cl = new tracingGrpc.TraceSegmentReportServiceClient('127.0.0.1:' + port,
            grpc.credentials.createInsecure(), {'grpc.default_compression_algorithm': 2});
        const deadline = new Date(Date.now() + 10000);
        const stream = cl.collect({deadline}, (e, cmds) => {
            let fails = 0;
            const fail = (m) => {
                fails++;
                console.log('FAIL: ' + m);
            };
            if (e) fail('collect: ' + e.message);
            else if (!(cmds instanceof commonPb.Commands)) fail('reply is not Commands');
            if (segs.length !== cases.length) fail(`received ${segs.length} of ${cases.length}`);
            if (!encodings.has('gzip') || gzipped === 0) {
                fail('messages were not gzip-compressed: call encodings ' +
                    [...encodings].join(',') + `, ${gzipped} compressed messages`);
            } else {
                console.log(`ok   gzip: call encoding gzip, ${gzipped} compressed messages ` +
                    'decoded');
            }
            const cross = crossCheck(segs, {});
            for (const x of cross.violations) {
                const l = got.get(x.traceSegmentId);
                if (l) l.push(x);
            }
            for (const [desc, d, want] of cases) {
                const vs = got.get(d.segmentId) || [];
                const codes = [...new Set(vs.map((x) => x.code))].sort();
                const missing = want.filter((c) => !codes.includes(c));
                const extra = codes.filter((c) => !want.includes(c));
                if (!got.has(d.segmentId)) fail(`${desc}: segment not received`);
                else if (missing.length || (want.length === 0 && extra.length)) {
                    fail(`${desc}: want [${want}] got [${codes}]`);
                } else {
                    console.log(`ok   ${desc}: ${want.length ? 'flagged ' + codes.join(',') :
                        'clean'}`);
                }
            }
            // Management: properties without `language` are flagged.
            const noLang = checkManagement('reportInstanceProperties',
                {service: 's', serviceinstance: 'i', propertiesList: [{key: 'os', value: 'x'}]});
            if (!noLang.some((x) => x.code === 'props-no-language')) fail('props without language');
            else console.log('ok   instance properties without language: flagged');
            // Strict links: an exit nobody refers to, a trace without a root.
            const early = JSON.parse(JSON.stringify(segs.find((s) =>
                s.tracesegmentid === 'good-s')));
            early.spansList[0].starttime -= 2000;
            const clockOk = crossCheck([segs.find((s) => s.tracesegmentid === 'good-c'),
                segs.find((s) => s.tracesegmentid === 'good-s')], {sameClock: true});
            const clockBad = crossCheck([segs.find((s) => s.tracesegmentid === 'good-c'), early],
                {sameClock: true});
            if (clockOk.violations.length ||
                !clockBad.violations.some((x) => x.code === 'time-nesting-remote')) {
                fail('same clock: callee entry before the caller exit not flagged (or good ' +
                    'pair flagged)');
            } else {
                console.log('ok   same clock: callee entry 2 s before the caller exit flagged');
            }
            const strict = crossCheck([segs.find((s) => s.tracesegmentid === 'good-c')],
                {strictLinks: true});
            const sc = new Set(strict.violations.map((x) => x.code));
            if (!sc.has('exit-unlinked')) fail('strict links: unreferenced exit not flagged');
            else console.log('ok   strict links: unreferenced exit flagged');
            const orphan = crossCheck([segs.find((s) => s.tracesegmentid === 'good-s')],
                {strictLinks: true, requireParents: true});
            const oc = new Set(orphan.violations.map((x) => x.code));
            if (!oc.has('parent-missing') || !oc.has('trace-roots')) {
                fail('missing parent / rootless trace not flagged: ' + [...oc]);
            } else {
                console.log('ok   missing parent segment and rootless trace flagged');
            }
            rawStream(port, got, (rawFails) => {
                fails += rawFails;
                server.forceShutdown();
                console.log(fails ? `self-test: ${fails} FAILED` : 'self-test: all passed');
                process.exit(fails ? 1 : 0);
            });
        });
        for (const [, d] of cases) stream.write(buildSegment(d));
        stream.end();
    });
}

// ---------------------------------------------------------------------------------------------

function parseArgs(argv) {
    const a = {mode: 'serve'};
    const flags = new Set(['require-parents', 'strict-links', 'require-gzip',
        'require-properties', 'same-clock']);
    for (let i = 0; i < argv.length; i++) {
        const k = argv[i];
        if (k === '--self-test') a.mode = 'self-test';
        else if (k === 'serve' || k === 'check') a.mode = k;
        else if (k.startsWith('--') && flags.has(k.slice(2))) a[k.slice(2)] = true;
        else if (k.startsWith('--') && i + 1 < argv.length) a[k.slice(2)] = argv[++i];
        else {
            process.stderr.write(`oap_validator: bad argument ${k}\n`);
            process.exit(2);
        }
    }
    for (const k of ['t0', 't1']) if (a[k] !== undefined) a[k] = Number(a[k]);
    return a;
}

if (require.main === module) {
    const a = parseArgs(process.argv.slice(2));
    if (a.mode === 'self-test') {
        selfTest();
    } else if (!a.out) {
        process.stderr.write('usage: oap_validator.js serve|check --out DIR ... | --self-test\n');
        process.exit(2);
    } else if (a.mode === 'check') {
        process.exit(check(a));
    } else {
        serve(a);
    }
}

module.exports = {checkSegment, crossCheck, checkManagement, RULES};
