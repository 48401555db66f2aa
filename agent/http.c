/*
 * http.c - incremental HTTP/1.x parsing for one direction of one connection (see http.h).
 *
 * Rules: runs on application threads inside read()/write() interposers. No malloc, no locks,
 * no syscalls, no stdio, errno untouched; all state lives in the caller's struct sw_http
 * (and struct sw_http_req).
 *
 * A hand-written scanner (it replaced libhttp-parser 2.9.4, see below). It is a resumable
 * state machine: bytes may be split anywhere, nothing is buffered except a header name split
 * across calls (up to 20 or 32 bytes kept) and a 20-byte token (method, Connection /
 * Transfer-Encoding token). Per byte it does as little as it can:
 *   - a head that begins a call (between messages) and ends in it, with no http.headers
 *     names configured, is done by a whole-head fast path (fast_request / fast_response): one
 *     pass, 16-byte blocks, only the values that matter looked at; anything else gives up
 *     with nothing changed and the state machine below takes the head from its start (see
 *     "Whole-head fast path" below). The points below are about the state machine.
 *   - runs of one byte class (request-target, header names, header values, reason phrases,
 *     chunk extensions) are found 16 bytes at a time with SSE2 (baseline on x86_64), else one
 *     at a time; both give the same index (run_end; -DSW_HTTP_NO_SIMD forces the scalar loops,
 *     and the http_diff_simd_vs_scalar test compares the two builds). The vector loop never
 *     reads outside the bytes it was given. Bytes are only copied when captured.
 *   - a header line complete in the buffer is checked whole (name run, ':', value run, line
 *     end) and then handled by the same calls the per-state code makes; the per-state code
 *     takes everything else (split lines, the blank line, errors) from the line start, so
 *     both ways give the same events (http_diff compares whole / byte-at-a-time / random
 *     splits over generated heads, a byte sweep and the fuzz corpus).
 *   - header names are matched where they are (or, when split, in the small buffer): by
 *     length, then by OR-0x20 word compares against the names we need (Host, sw8,
 *     sw8-correlation, sw8-x, Expect, Content-Length, Transfer-Encoding, Connection,
 *     Proxy-Connection, Upgrade; configured http.headers names byte by byte); values of
 *     headers nothing looks at are only validated. A one-token Connection /
 *     Transfer-Encoding value is compared in place too (known tokens first, the separator
 *     scan only for others); in a complete line, a Host / sw8 / sw8-correlation / sw8-x value
 *     is stored in one go (slot_value, when no http.headers names are configured) and a
 *     Content-Length value parsed in one go (cl_value, when not captured).
 *   - keep-alive is decided once per head; "GET " and "HTTP/1.1" are one compare each;
 *     Content-Length bodies and chunk data are skipped in O(1) per call (a Content-Length
 *     body without entering the scanner); chunked bodies look only at chunk-size lines and
 *     trailers.
 * No byte is accepted or refused differently from before these fast paths (the strictness
 * below is unchanged, for every name, captured or not).
 *
 * Whole-head fast path (sw_http_fast_request / sw_http_fast_response; conn.c calls them through
 * http.h's sw_http_feed_request / sw_http_feed_response, which make sw_http_feed()'s test inline,
 * skip its direction dispatch and take a brief HEAD event at the usual end (fast_event_of): 15
 * instructions fewer per request of the bench).
 * sw_http_feed() tries it when the parser is between messages with nothing of a head consumed
 * (head_bytes, phase, st and pending zero: empty lines before a head, consumed by an earlier
 * call, leave it to the state machine) with the fast path on (nofast, set by sw_http_init() when
 * http.headers names are configured; the eight bytes are one load) and the call has 16 bytes or
 * more. It takes:
 *   - the request line "METHOD /target HTTP/1.x" (METHOD one of the 34 but CONNECT, "GET " one
 *     compare; an origin-form target, 16 bytes a block: its first block also gives the path
 *     information of struct sw_http_req, the first '?' / '#' and the last '.' with no '/'
 *     after it, from '.' and '/' masks: the last '.' has no '/' after it when dm > sm) or the
 *     status line "HTTP/1.x ddd[ reason]" (" ddd" one SWAR check; not an interim 1xx other
 *     than 101; the reason's line end found like a header value's);
 *   - header lines, each where it is (fast_lines): a 16-byte class of letters and '-' at the
 *     line start ends at the ':' (digits: a second, wider class, for sw8 and such), then the
 *     value's first control byte in the 16-byte block after it, or the 17th byte when the block
 *     has none, must be the CR of a CRLF (one check: the lowest clear bit of the block's
 *     value-byte mask, the mask + 1; other values of 16 bytes or more take more blocks). The
 *     classes are cheap in SSE2: x | 0x20 plus a constant is one signed range for the letters;
 *     x ^ 0x40 plus 0x41 puts 0x00-0x1f (or 0x20) and DEL in one signed range, compared so that
 *     the result is the value bytes (with GCC, small asm blocks: see FAST_ASM). kind_first (the
 *     first letter by name length) says whether a name may matter; Host, Content-Length and
 *     Connection: keep-alive / close are then handled in the loop (their value has no HT and
 *     ends at a CR), the others by fast_value(). Loads are unchecked while 35 bytes are left
 *     from a line's start; the last lines are read in a copy of the call's last 48 bytes
 *     followed by 16 zeros (a zero is a control byte and no name byte, so every run stops at
 *     the first of them and a line running into them is not complete), by the same loop,
 *     positions translated by one offset. Other lines (other token bytes, names of 16 bytes or
 *     more, HT, a bare LF) send the rest of the head to fast_lines_cold(), checked runs with the
 *     same results;
 *   - the end: the usual request (no body, fold_message) and response (a Content-Length body,
 *     in the call or later, not to HEAD or CONNECT, not 101 / 204 / 304) inline, the others by
 *     fast_request_rest / fast_response_rest: what head_done() does, writing only what a later
 *     call reads (seen_head always, head_bytes being 0 already; mflags, cur_method, status,
 *     remaining, st, phase, pending only when an event of the message comes later: at idle
 *     upgrade_after is false, and major, minor, idx, hdr, last_byte are set again before they
 *     are read), the captures (by reference with opts.capture_refs: no copy of the target and
 *     Host) and the HEAD event. (The call's flags are kept in fflags for feed_slow(), which
 *     takes the call when it gives up.)
 * The head must end in the call and within the head size limit (checked at the end; a "\r"
 * that SW_HTTP_FEED_HOLD holds back cannot be in a head that ends in the call, whose last byte
 * is a LF). The bytes of a Content-Length body after a head go through fast_cl_body().
 * It gives up, having changed nothing (it writes only after the blank line is found and every
 * check passed), and feed_slow() takes the call from the head's start, on anything else:
 * another start line (CONNECT, '*', absolute-form, an unknown method, another version), a bare
 * CR or another control byte or DEL, obs-fold, a line without ':', a second Content-Length or
 * one the state machine refuses or of more than 19 digits, a Connection / Transfer-Encoding
 * value of several tokens, what head_done() refuses (TE with CL, a request TE not ending in
 * chunked), a head not complete in the bytes or beyond the limit. Tests: test_http_diff runs
 * every input whole with the fast path on and off (SW_TESTING hooks), with captures by
 * reference and copied, besides byte-at-a-time and random splits, each from a heap copy of
 * exactly its size (ASan), over generated heads on its edges (fast_generated; fast_tail_edges:
 * heads of 16 to 140 bytes whose last lines fall in the copy, the 17th byte after a ':';
 * fast_line_sweep: every byte of the status digits, reasons of every length with HT, LF, CR,
 * DEL at every position, targets with '?', '#', '.', '/' at every position; fast_cap_limits),
 * and fails if the common heads do not take it (fast_must_hit; test_http's test_fast_path and
 * test_path_info too). They failed when the code was broken on purpose: the '.' index off by
 * one, the '/' mask not cut at the path end, '#' not a path end, the copy's offset or second
 * block missing, the status SP or digit nibble check dropped, keep-alive / close swapped or
 * the token length not checked, 20 Content-Length digits taken, Host's trailing SP kept or its
 * size limit applied after the trim, ':' not checked after the digit class, the head limit
 * ignored (requests, responses), fast_cl_body() not resetting st, the keep-alive flag lost for
 * a body that comes later, (ASan) one byte less room for the unchecked loads or the reason's
 * in a call of one byte less, and CRLFs instead of zeros after the copy.
 *
 * Strictness (anything not understood ends in NOT_HTTP before the first head of a connection,
 * else ERROR, so conn.c leaves the connection alone rather than guess):
 *   - request line: METHOD SP target SP HTTP/d.d, one space each; METHOD is one of the 34
 *     methods libhttp-parser knew (refused as soon as the bytes seen so far cannot begin one);
 *     target: bytes 0x21-0x7e, 0x80-0xff, beginning with '/' or '*' or "scheme://" (CONNECT:
 *     an authority, ASCII only). Status line: HTTP/d.d SP 3 digits [SP reason].
 *     A version other than 1.0/1.1 gives SW_HTTP_ERR_VERSION at the end of the head (as
 *     before; 1xx interim responses are not checked, as before).
 *   - header lines: token ":" OWS value OWS; values: HT, 0x20-0x7e, 0x80-0xff. Obsolete line
 *     folding (a line beginning with SP/HT) is refused. Empty lines before a request/status
 *     line are skipped. Line ends: CRLF or bare LF; a bare CR (not immediately followed by LF)
 *     in a head is refused whatever the split (a CR ending a call must be followed by LF at
 *     the start of the next; a CR at the end of the bytes examined is checked against the
 *     next byte of the same call when there is one).
 *   - Content-Length: digits (with trailing OWS), one header only, no overflow; not together
 *     with Transfer-Encoding. Transfer-Encoding: the last token must be "chunked" (requests:
 *     else refused; responses: else the body runs until close, RFC 9112 6.3).
 *   - chunked: hex size, optional ";ext" or OWS up to CRLF (CRLF required), data, CRLF
 *     (required), last chunk 0, trailers with header-line syntax (not captured; no size
 *     limit, as they are scanned in constant memory).
 * Framing decisions (keep-alive, HEAD/1xx/204/304/CONNECT/101, Upgrade) follow what
 * libhttp-parser did, so the unit tests in tests/unit/test_http.c pass unchanged.
 *
 * Why not libhttp-parser any more. Measured with bench's callgrind method (sw_bench_server,
 * one keep-alive connection, 500 vs 1500 requests, instructions per traced request, agent run
 * minus bare run of 622.0): with libhttp-parser the agent added 11,095 per request, of which
 * about 6,900 were HTTP parsing (http_parser_execute 4,878, its callbacks, parse_url_char,
 * http_should_keep_alive, http_parser_pause: a byte-at-a-time state machine, a URL parser, a
 * callback per header piece and a pause per event). With the first version of this scanner
 * (byte-at-a-time loops, names lower-cased into a buffer) the agent added 6,831, HTTP parsing
 * about 2,800. With the state machine alone (its in-place runs and one-go lines) http.c cost
 * 1,434 instructions per request on the same bench (78-byte request head, 65-byte response
 * head + 64-byte body: scan 1,280, sw_http_feed 154; agent total 4,157 with bare 622), and
 * 2,191 on nginx serving a 612-byte file (its ~240-byte response head has 8 headers: scan
 * 1,944, sw_http_feed 181, token_value 40, msg_done 26; agent total 17,138, bare ~12,470).
 * With the whole-head fast path (the same method, 500 vs 2,500 requests; nginx 500 vs 2,000): bench
 * http.c 985 (fast_request 561, fast_response 404, sw_http_feed 20), agent total 3,691; nginx
 * http.c ~1,536 (fast_response 891, fast_request 561, feed_slow 41 for the sendfile body, the
 * dispatch 23, fast_token 20), agent total ~16,500. Its second round (the same method; a
 * scratch harness feeding the bench's request and response to sw_http_feed() gave the same
 * counts and was used in between): bench http.c 786 (fast_request 449, fast_response 321,
 * sw_http_feed 16; 766 with opts.capture_refs, the target and Host not copied), agent total
 * 2,892 (3,091 on the same tree before); nginx http.c ~1,213 (fast_response 696, fast_request
 * 454, the dispatch with fast_cl_body 63), agent total ~15,450 (~15,800 before). Where it
 * goes: ~40 instructions per usual header line (the letter class is 10 SSE2 operations with
 * its load and movemask, the control class 6, the rest the ':', CRLF and kind_first checks and
 * the loop), 25 to 35 per value looked at (Host, Content-Length), ~25 for the copy of the last
 * 48 bytes (requests that end the call), and ~200 per head that do not depend on the lines:
 * the start line (~45 for a request with its path information, ~35 for a status line), the
 * limits, the end's decisions, ~25 stores into the parser, the captures and the event,
 * prologue and epilogue. The aim of ~500 for the bench is not reached: at ~40 per line its
 * five lines take ~200, which leaves ~300 for two heads' fixed parts; counted instruction by
 * instruction this design's floor with SSE2 is about 35 per line and ~150 per head. Tried on
 * the way and measured or counted worse, so not kept: whole-head bitmasks (the letter and
 * control classes of every byte and their assembly into 64-bit masks cost ~20 instructions per
 * 16 bytes, ~1.2 per byte, more than the two blocks a line of 20 bytes or more needs, before
 * the ~20 per line of walking the masks; the five masks LF, ':', CR, bad, not-a-name-byte
 * ~2.5 per byte); fast_lines out of line (+45 bench, +33 nginx); the switch to the copy
 * through the loop's entry (its constants loaded again, +12); a checked second loop for the
 * last lines (+12 against the copy); a branch-free queue pop (+9); and from the first round: one
 * SSE2 pass per 64-byte window before the per-state machinery (+290), one 32-byte block per
 * line (+92), a control-byte mask kept across lines, a zero-padded copy with rep stos and a
 * second loop body. GCC 12 follows __builtin_ctz() with a sign extension before address
 * arithmetic, hence ctz64()'s tzcnt. Far lower would take cheaper name classes than SSE2 gives
 * (SSSE3's byte shuffles would make the token class one lookup, but are not baseline on
 * x86_64). Its third round (the same method and harness): bench http.c 630 (fast_request 350,
 * fast_response 262, sw_http_feed 18; 369 for fast_request without capture_refs), agent total
 * 2,641 (2,777 on the same tree before); with the nginx response head of test_http_diff's
 * fast_must_hit and its 612-byte body in a later call, fast_response 586 (696 before), the
 * dispatch with fast_cl_body 55 (64). A usual header line is 30 instructions (42): the classes
 * compared into masks of value bytes and of non-letters so that no constant or value is copied, in
 * GCC-only asm (GCC 12 turns a compare with a constant into the reverse compare and a negation, and
 * loads every constant into a register before the loop: as memory operands they cost nothing per
 * line and save ~10 per head), the line end checked once at the value's first control byte or 17th
 * byte, the CR kept as a pointer, values of 16 bytes or more in value16() blocks. Per head: the
 * captures seen in the flags word (one test at the end), fold_message, captures and the head limit
 * one compare with fast_max, head_bytes read with phase..nofast (no reset after the head), the path
 * information as offsets in the target, the copy of the last bytes three blocks and 16 zeros, once;
 * the call's flags in the parser (fflags) instead of a register held through the function (-9
 * request, -4 response, +2 dispatch), Content-Length digits checked once after their loop, status
 * 200 tested first, the queue popped where it is read, the four capture lengths zeroed in one
 * store, fast_cl_body() with a branch per outcome. Tried and not kept: Content-Length digits by
 * SWAR (about the loop's cost for 2 digits, a gain only from 3); one 64-bit store for the eight
 * flag bytes of struct sw_http_req (composing it costs what the byte stores do); kind_first's
 * address held in a register (spilled, +2); and, counted but not done, reads past the end of the
 * call within its last page instead of the copy (~20 less per head that ends its call, but reads
 * outside the caller's buffer, which ASan and valgrind report: the fast path would have to go
 * uninstrumented). Later: a status line's " 200" is one compare, the digits' arithmetic and the
 * interim test only for other codes (fast_response -11, 258 -> 247 on the bench). It also drops
 * libhttp-parser's lenient parsing (it took "HTTT/1.1", "CR + any byte" line ends, any two
 * bytes after chunk data) that http.c had to narrow around, and one static library (no longer
 * linked, agent/agent.cmake).
 */
#include "common.h"

#include "http.h"

#include <string.h>

enum phase { PH_IDLE = 0, PH_HEAD, PH_BODY, PH_STOPPED };
enum pending { PEND_NONE = 0, PEND_MESSAGE, PEND_UPGRADE, PEND_ERROR };
/* http.h's inline queries use these values. */
_Static_assert(PH_HEAD == SW_HTTP_PH_HEAD && PH_BODY == SW_HTTP_PH_BODY, "phase values");
_Static_assert(PEND_MESSAGE == SW_HTTP_PEND_MESSAGE && PEND_UPGRADE == SW_HTTP_PEND_UPGRADE,
               "pending values");
/* sw_http_feed() reads head_bytes, phase, st, pending and nofast in one load. */
_Static_assert(offsetof(struct sw_http, phase) == offsetof(struct sw_http, head_bytes) + 4 &&
                   offsetof(struct sw_http, st) == offsetof(struct sw_http, phase) + 1 &&
                   offsetof(struct sw_http, pending) == offsetof(struct sw_http, phase) + 2 &&
                   offsetof(struct sw_http, nofast) == offsetof(struct sw_http, phase) + 3,
               "phase, st, pending, nofast");

/* Scanner states (struct sw_http.st). */
enum st {
    ST_IDLE = 0, /* between messages: empty lines skipped */
    ST_METHOD,
    ST_TARGET,
    ST_VER,    /* request line: HTTP/d.d then the line end */
    ST_RVER,   /* status line: HTTP/d.d then SP */
    ST_STATUS, /* three digits */
    ST_REASON,
    ST_LINE, /* start of a header (or trailer) line, or the blank line */
    ST_NAME,
    ST_VWS, /* OWS before a value */
    ST_VAL,
    ST_CR, /* a CR was read: its LF must follow (struct sw_http.kind says what it ends) */
    ST_CL, /* Content-Length body */
    ST_CSIZE0,
    ST_CSIZE,
    ST_CEXT,
    ST_CSIZE_LF,
    ST_CDATA,
    ST_CDATA_CR,
    ST_CDATA_LF,
    ST_EOF, /* body until the connection closes */
};

_Static_assert(ST_CL == SW_HTTP_ST_CL && ST_IDLE == 0 && PH_IDLE == 0,
               "sw_http_body_unseen() (http.h)");

/* What the line ended by ST_CR's LF was. */
enum kind { K_LEAD = 0, K_START, K_HDR, K_BLANK };

/* Headers the framing needs (struct sw_http.hdr). */
enum hdr { H_OTHER = 0, H_CL, H_TE, H_CONN, H_CAP /* none of those, but captured */ };

/* Message flags (struct sw_http.mflags). */
#define F_CLOSE 0x001u   /* Connection: close */
#define F_KA 0x002u      /* Connection: keep-alive */
#define F_CUP 0x004u     /* Connection: upgrade */
#define F_UPG 0x008u     /* an Upgrade header */
#define F_CL 0x010u      /* a Content-Length header */
#define F_TE 0x020u      /* a Transfer-Encoding header */
#define F_CHUNKED 0x040u /* ... whose last token is chunked */
#define F_CLDIG 0x080u   /* Content-Length digits seen */
#define F_CLWS 0x100u    /* whitespace after them */
#define F_SKIP 0x200u    /* the response has no body whatever its headers say */
#define F_TOKWS 0x400u   /* whitespace after a Connection/Transfer-Encoding token */
#define F_KEEP 0x800u    /* keep_alive() of the message, decided when its head completed */

/* Byte classes. */
#define C_TCHAR 1u  /* token character (RFC 9110 tchar) */
#define C_VALUE 2u  /* header value / reason byte: HT, 0x20-0x7e, 0x80-0xff */
#define C_TARGET 4u /* request-target byte: 0x21-0x7e, 0x80-0xff */

#define IS_TCHAR(c)                                                                                \
    (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') ||     \
     (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' || (c) == '&' || (c) == '\'' ||          \
     (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' ||           \
     (c) == '`' || (c) == '|' || (c) == '~')
#define CLS(c)                                                                                     \
    ((IS_TCHAR(c) ? C_TCHAR : 0u) | (((c) == 9 || ((c) >= 0x20 && (c) != 0x7f)) ? C_VALUE : 0u) |  \
     (((c) > 0x20 && (c) != 0x7f) ? C_TARGET : 0u))
#define CLS4(c) CLS(c), CLS((c) + 1), CLS((c) + 2), CLS((c) + 3)
#define CLS16(c) CLS4(c), CLS4((c) + 4), CLS4((c) + 8), CLS4((c) + 12)
#define CLS64(c) CLS16(c), CLS16((c) + 16), CLS16((c) + 32), CLS16((c) + 48)

static const uint8_t cls[256] = {CLS64(0), CLS64(64), CLS64(128), CLS64(192)};

/*
 * Runs of bytes of one class, 16 at a time with SSE2 (baseline on x86_64), else one at a time.
 * Both give the same answer: the index of the first byte in buf[i..lim) that is not of the
 * class (or lim). The vector loop never reads outside buf[0..lim): the last partial block is
 * the 16 bytes ENDING at lim (when lim >= 16) with the bytes before i shifted out. Build with
 * -DSW_HTTP_NO_SIMD to force the scalar loops (tests compare the two).
 */
#if defined(__SSE2__) && !defined(SW_HTTP_NO_SIMD)
#include <emmintrin.h>
#define HAVE_SIMD 1
#endif

enum run { RUN_VALUE, RUN_TARGET, RUN_NAME };

#ifdef HAVE_SIMD
/* Bit k set: p[k] ends the run (RUN_NAME: p[k] is not a letter, digit or '-'). */
static inline unsigned stop16(const char *p, enum run k)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i neg = _mm_cmpgt_epi8(_mm_setzero_si128(), v); /* bytes >= 0x80 */
    __m128i stop;

    if (k == RUN_NAME) {
        /* x - (lo + 0x80) < -0x80 + width, signed: lo <= x < lo + width. */
        __m128i l =
            _mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8((char)('a' + 0x80)));
        __m128i d = _mm_sub_epi8(v, _mm_set1_epi8((char)('0' + 0x80)));
        __m128i alpha = _mm_cmpgt_epi8(_mm_set1_epi8(-0x80 + 26), l);
        __m128i digit = _mm_cmpgt_epi8(_mm_set1_epi8(-0x80 + 10), d);
        __m128i ok =
            _mm_or_si128(_mm_or_si128(alpha, digit), _mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
        return (unsigned)_mm_movemask_epi8(ok) ^ 0xffffu;
    }
    /* RUN_VALUE stops at 0x00-0x1f but HT, and 0x7f; RUN_TARGET at 0x00-0x20 and 0x7f. */
    stop = _mm_andnot_si128(neg, _mm_cmpgt_epi8(_mm_set1_epi8(k == RUN_VALUE ? 0x20 : 0x21), v));
    if (k == RUN_VALUE)
        stop = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), stop);
    stop = _mm_or_si128(stop, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    return (unsigned)_mm_movemask_epi8(stop);
}
#endif

/* The end of the run of class `k` bytes (C_VALUE, C_TARGET, C_TCHAR) starting at buf[i]. */
static inline size_t run_end(const char *buf, size_t i, size_t lim, enum run k)
{
    unsigned cl = k == RUN_VALUE ? C_VALUE : k == RUN_TARGET ? C_TARGET : C_TCHAR;

#ifdef HAVE_SIMD
    unsigned m = 0;

    while (lim - i >= 16) {
        m = stop16(buf + i, k);
        if (m)
            break;
        i += 16;
    }
    if (m == 0) {
        if (i == lim)
            return i;
        if (lim >= 16)
            m = stop16(buf + lim - 16, k) >> (16 - (lim - i));
        if (m == 0 && lim >= 16)
            return lim;
    }
    if (m) {
        i += (size_t)__builtin_ctz(m);
        if (k != RUN_NAME || buf[i] == ':' || !(cls[(unsigned char)buf[i]] & C_TCHAR))
            return i;
        /* A token character other than a letter, digit or '-' (rare): go on byte by byte. */
    }
#endif
    while (i < lim && (cls[(unsigned char)buf[i]] & cl))
        i++;
    return i;
}

/* Unaligned little loads, for comparing header names a word at a time. */
static inline uint16_t ld16(const char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint32_t ld32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t ld64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/*
 * Case-insensitive compares of a header name (token characters only) with a lower-case name
 * made of letters, digits and '-': OR-ing 0x20 into each byte maps an upper-case letter to its
 * lower-case one and no other token character onto a letter, a digit or '-'.
 */
#define EQ16(p, s) ((ld16(p) | 0x2020u) == ld16(s))
#define EQ32(p, s) ((ld32(p) | 0x20202020u) == ld32(s))
#define EQ64(p, s) ((ld64(p) | 0x2020202020202020ull) == ld64(s))
#define EQ8(p, s) ((((unsigned char)*(p)) | 0x20u) == (unsigned char)*(s))

/* The methods libhttp-parser 2.9.4 knew, most common first. */
static const char *const methods[] = {
    "GET",         "POST",       "HEAD",       "PUT",   "DELETE",   "OPTIONS", "PATCH",
    "CONNECT",     "TRACE",      "COPY",       "LOCK",  "MKCOL",    "MOVE",    "PROPFIND",
    "PROPPATCH",   "SEARCH",     "UNLOCK",     "BIND",  "REBIND",   "UNBIND",  "ACL",
    "REPORT",      "MKACTIVITY", "CHECKOUT",   "MERGE", "M-SEARCH", "NOTIFY",  "SUBSCRIBE",
    "UNSUBSCRIBE", "PURGE",      "MKCALENDAR", "LINK",  "UNLINK",   "SOURCE",
};
#define METHOD_LONGEST 11 /* UNSUBSCRIBE */

/* Where the value of the current header goes. Custom header i is SLOT_CUSTOM + i. */
enum slot { SLOT_NONE = 0, SLOT_HOST, SLOT_SW8, SLOT_CORR, SLOT_SW8X, SLOT_EXPECT, SLOT_CUSTOM };

#define ENTRY_HDR 3 /* scratch entry: u8 name index, u16 value length, value bytes */

static const struct sw_http_opts default_opts = {
    .max_head = SW_HTTP_HEAD_MAX,
    .headers_threshold = SW_HTTP_HEADERS_MAX - 1,
    .header_count = 0,
};

static const struct sw_http_opts *opts_of(const struct sw_http *h)
{
    return h->opts; /* never NULL: sw_http_init() puts the defaults in */
}

static uint32_t max_head_of(const struct sw_http *h)
{
    return h->max_head; /* opts->max_head, put in range by sw_http_init() */
}

/* struct sw_http.fopts: the opts bits the parser uses, taken at sw_http_init(). */
#define FO_FOLD 0x1u /* opts->fold_message */
#define FO_REFS 0x2u /* opts->capture_refs */

static bool fold_of(const struct sw_http *h)
{
    return (h->fopts & FO_FOLD) != 0;
}

static inline char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
}

const char *sw_http_method_name(enum sw_http_method m)
{
    static const char *const names[] = {"OTHER",  "GET",     "HEAD",    "POST",  "PUT",
                                        "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    return ((unsigned)m < SW_ARRAY_LEN(names)) ? names[m] : "OTHER";
}

/* ---- request captures ------------------------------------------------------------------ */

static void req_reset(struct sw_http_req *r)
{
    r->method = SW_HTTP_M_OTHER;
    r->method_text[0] = '\0';
    r->method_len = 0;
    r->http_minor = 0;
    r->target_truncated = false;
    r->expect_continue = false;
    r->upgrade = false;
    r->keep_alive = false;
    r->headers_truncated = false;
    r->path_valid = false;
    r->target_ref = r->host_ref = NULL;
    r->target_len = r->host_len = r->sw8_len = r->corr_len = r->sw8x_len = 0;
    r->headers_len = 0;
    r->target[0] = r->host[0] = r->sw8[0] = r->corr[0] = r->sw8x[0] = r->headers[0] = '\0';
    r->scratch_len = 0;
    r->entry_start = 0;
    r->name_len = 0;
    r->slot = SLOT_NONE;
    r->slot_overflow = false;
}

/* The buffer and length field of a fixed slot, or NULL for custom and none. */
static char *slot_buf(struct sw_http_req *r, unsigned slot, uint16_t **len, size_t *cap)
{
    switch (slot) {
    case SLOT_HOST:
        *len = &r->host_len;
        *cap = sizeof(r->host);
        return r->host;
    case SLOT_SW8:
        *len = &r->sw8_len;
        *cap = sizeof(r->sw8);
        return r->sw8;
    case SLOT_CORR:
        *len = &r->corr_len;
        *cap = sizeof(r->corr);
        return r->corr;
    case SLOT_SW8X:
        *len = &r->sw8x_len;
        *cap = sizeof(r->sw8x);
        return r->sw8x;
    default:
        return NULL;
    }
}

/* A configured header name (lower-case, any bytes) equals nm[0..n) ignoring case. */
static bool custom_is(const char *cfg, const char *nm, size_t n)
{
    if (strnlen(cfg, SW_HTTP_HDR_NAME_MAX) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(nm[i]) != cfg[i])
            return false;
    return n != 0;
}

/*
 * The header name nm[0..n) is complete: choose where its value goes. `slot` is what name_end()
 * found among the fixed slots (SLOT_NONE: maybe a configured one).
 */
static void header_name_done(struct sw_http *h, struct sw_http_req *r, unsigned slot,
                             const char *nm, size_t n)
{
    uint16_t *len;
    size_t cap;

    r->slot_overflow = false;
    r->name_len = 0; /* SLOT_EXPECT reuses name[] for its value */
    /*
     * Host: the first occurrence counts. sw8 and friends: the LAST one counts. A proxy traced
     * by swagent forwards the sw8 it received and swagent appends its own just before the
     * blank line, so the last one is the closest hop's.
     */
    if (slot == SLOT_HOST && r->host_len != 0)
        slot = SLOT_NONE;
    else if (slot != SLOT_NONE && slot != SLOT_EXPECT && slot_buf(r, slot, &len, &cap))
        *len = 0;
    if (slot == SLOT_NONE && h->opts->header_count != 0 && n < sizeof(r->name)) {
        const struct sw_http_opts *o = h->opts;
        uint32_t cnt = o->header_count < SW_HTTP_HDR_NAMES ? o->header_count : SW_HTTP_HDR_NAMES;
        for (uint32_t i = 0; i < cnt; i++) {
            if (custom_is(o->header_names[i], nm, n)) {
                slot = SLOT_CUSTOM + i;
                break;
            }
        }
        if (slot >= SLOT_CUSTOM) {
            if ((size_t)r->scratch_len + ENTRY_HDR > sizeof(r->scratch)) {
                r->headers_truncated = true;
                slot = SLOT_NONE;
            } else {
                char *e = r->scratch + r->scratch_len;
                r->entry_start = r->scratch_len;
                e[0] = (char)(slot - SLOT_CUSTOM);
                e[1] = e[2] = 0;
                r->scratch_len += ENTRY_HDR;
            }
        }
    }
    r->slot = (uint8_t)slot;
}

static size_t trim_len(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

/* The current header's value is complete. */
static void header_value_done(struct sw_http_req *r)
{
    uint16_t *len;
    size_t cap;
    char *b = slot_buf(r, r->slot, &len, &cap);

    if (b) {
        *len = r->slot_overflow ? 0 : (uint16_t)trim_len(b, *len);
        b[*len] = '\0';
    } else if (r->slot == SLOT_EXPECT) {
        size_t n = trim_len(r->name, r->name_len);
        if (!r->slot_overflow && n == 12 && memcmp(r->name, "100-continue", 12) == 0)
            r->expect_continue = true;
    } else if (r->slot >= SLOT_CUSTOM) {
        size_t start = r->entry_start;
        size_t vlen = trim_len(r->scratch + start + ENTRY_HDR, r->scratch_len - start - ENTRY_HDR);

        r->scratch[start + 1] = (char)(vlen & 0xff);
        r->scratch[start + 2] = (char)(vlen >> 8);
        r->scratch_len = (uint16_t)(start + ENTRY_HDR + vlen);
    }
    r->slot = SLOT_NONE;
    r->name_len = 0;
}

static void header_value_append(struct sw_http_req *r, const char *at, size_t n)
{
    uint16_t *len;
    size_t cap;
    char *b = slot_buf(r, r->slot, &len, &cap);

    if (b) {
        if (r->slot_overflow || n >= cap - *len) {
            r->slot_overflow = true;
            return;
        }
        memcpy(b + *len, at, n);
        *len = (uint16_t)(*len + n);
    } else if (r->slot == SLOT_EXPECT) {
        if (r->slot_overflow || n >= sizeof(r->name) - r->name_len) {
            r->slot_overflow = true;
            return;
        }
        for (size_t i = 0; i < n; i++)
            r->name[r->name_len + i] = lower(at[i]);
        r->name_len = (uint8_t)(r->name_len + n);
    } else if (r->slot >= SLOT_CUSTOM) {
        size_t room = sizeof(r->scratch) - r->scratch_len;
        if (n > room) {
            n = room;
            r->headers_truncated = true;
        }
        memcpy(r->scratch + r->scratch_len, at, n);
        r->scratch_len = (uint16_t)(r->scratch_len + n);
    }
}

/*
 * The whole value of a Host / sw8 / sw8-correlation / sw8-x header line p[0..n) (OWS
 * included), when no http.headers names are configured: what header_name_done() +
 * header_value_append() + header_value_done() store for it, in one go (a value that does not
 * fit its slot leaves it empty).
 */
static void slot_value(struct sw_http_req *r, unsigned slot, const char *p, size_t n)
{
    uint16_t *len;
    size_t cap;
    char *b = slot_buf(r, slot, &len, &cap);

    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    if (n >= cap) {
        n = 0;
    } else {
        n = trim_len(p, n);
        memcpy(b, p, n);
    }
    *len = (uint16_t)n;
    b[n] = '\0';
}

/* Appends to headers[] within `limit`; returns false (and marks truncation) when cut. */
static bool out_put(struct sw_http_req *r, size_t limit, const char *s, size_t n)
{
    size_t room = limit > r->headers_len ? limit - r->headers_len : 0;
    bool fits = n <= room;

    if (!fits) {
        n = room;
        r->headers_truncated = true;
    }
    memcpy(r->headers + r->headers_len, s, n);
    r->headers_len = (uint16_t)(r->headers_len + n);
    return fits;
}

/* Builds the http.headers tag value from scratch: "name=[v1, v2]" per name, "\n"-joined. */
static void headers_build(const struct sw_http *h, struct sw_http_req *r)
{
    const struct sw_http_opts *o = opts_of(h);
    size_t limit = o->headers_threshold;
    uint32_t names = o->header_count < SW_HTTP_HDR_NAMES ? o->header_count : SW_HTTP_HDR_NAMES;
    bool ok = true;

    if (limit == 0 || limit > sizeof(r->headers) - 1)
        limit = sizeof(r->headers) - 1;
    r->headers_len = 0;
    for (uint32_t i = 0; i < names && ok; i++) {
        bool first = true;
        for (size_t off = 0; off + ENTRY_HDR <= r->scratch_len && ok;) {
            size_t l = (uint8_t)r->scratch[off + 1] | ((size_t)(uint8_t)r->scratch[off + 2] << 8);
            if (off + ENTRY_HDR + l > r->scratch_len)
                break;
            if ((uint8_t)r->scratch[off] == i) {
                if (first) {
                    const char *nm = o->header_names[i];
                    if (r->headers_len != 0)
                        ok = out_put(r, limit, "\n", 1);
                    ok = ok && out_put(r, limit, nm, strnlen(nm, SW_HTTP_HDR_NAME_MAX));
                    ok = ok && out_put(r, limit, "=[", 2);
                    first = false;
                } else {
                    ok = out_put(r, limit, ", ", 2);
                }
                ok = ok && out_put(r, limit, r->scratch + off + ENTRY_HDR, l);
            }
            off += ENTRY_HDR + l;
        }
        if (!first && ok)
            ok = out_put(r, limit, "]", 1);
    }
    r->headers[r->headers_len] = '\0';
}

/* ---- scanner ------------------------------------------------------------------------- */

static enum sw_http_method method_enum(unsigned i)
{
    static const uint8_t map[] = {SW_HTTP_M_GET,   SW_HTTP_M_POST,    SW_HTTP_M_HEAD,
                                  SW_HTTP_M_PUT,   SW_HTTP_M_DELETE,  SW_HTTP_M_OPTIONS,
                                  SW_HTTP_M_PATCH, SW_HTTP_M_CONNECT, SW_HTTP_M_TRACE};
    return i < SW_ARRAY_LEN(map) ? (enum sw_http_method)map[i] : SW_HTTP_M_OTHER;
}

/* The index in methods[] of the method p[0..n), or -1 when it is none of them. */
static int method_index(const char *p, size_t n)
{
    for (unsigned i = 0; i < SW_ARRAY_LEN(methods); i++)
        if (methods[i][0] == p[0] && strlen(methods[i]) == n && memcmp(methods[i], p, n) == 0)
            return (int)i;
    return -1;
}

/* The method token (h->tok[0..idx)) is complete: known method, or false. */
static bool method_end(struct sw_http *h)
{
    size_t n = h->idx;
    int i = method_index(h->tok, n);

    if (i < 0)
        return false;
    h->cur_method = (uint8_t)method_enum((unsigned)i);
    if (h->req) {
        h->req->method = (enum sw_http_method)h->cur_method;
        memcpy(h->req->method_text, h->tok, n);
        h->req->method_text[n] = '\0';
        h->req->method_len = (uint8_t)n;
    }
    return true;
}

/* The method bytes seen so far begin a known method. */
static bool method_prefix_ok(const struct sw_http *h)
{
    for (unsigned i = 0; i < SW_ARRAY_LEN(methods); i++)
        if (strlen(methods[i]) >= h->idx && memcmp(methods[i], h->tok, h->idx) == 0)
            return true;
    return false;
}

static void msg_begin(struct sw_http *h)
{
    h->phase = PH_HEAD;
    h->status = 0;
    h->upgrade_after = false;
    h->mflags = 0;
    h->remaining = 0;
    h->major = h->minor = 0;
    h->idx = 0;
    h->hdr = H_OTHER;
    if (h->req)
        req_reset(h->req);
}

static void target_append(struct sw_http_req *r, const char *at, size_t n)
{
    size_t room = sizeof(r->target) - 1 - r->target_len;

    if (n > room) {
        n = room;
        r->target_truncated = true;
    }
    memcpy(r->target + r->target_len, at, n);
    r->target_len = (uint16_t)(r->target_len + n);
    r->target[r->target_len] = '\0';
}

/* Checking of a request-target's form (struct sw_http.kind while ST_TARGET). */
enum target_form { T_FIRST = 0, T_SCHEME, T_COLON, T_SLASH, T_OK };

/*
 * One of the first bytes of a request-target. origin-form and "*" begin with '/' or '*';
 * absolute-form is scheme "://" (scheme: a letter, then letters, digits, '+', '-', '.');
 * CONNECT's authority-form begins with a letter, a digit or '[' (and has no bytes >= 0x80,
 * checked by the caller). False: refused.
 */
static bool target_form(struct sw_http *h, unsigned char c)
{
    bool alpha = (c | 0x20) >= 'a' && (c | 0x20) <= 'z';

    switch (h->kind) {
    case T_FIRST:
        if (h->cur_method == SW_HTTP_M_CONNECT) {
            h->kind = T_OK;
            return alpha || (c >= '0' && c <= '9') || c == '[';
        }
        if (c == '/' || c == '*') {
            h->kind = T_OK;
            return true;
        }
        h->kind = T_SCHEME;
        return alpha;
    case T_SCHEME:
        if (c == ':')
            h->kind = T_COLON;
        return c == ':' || alpha || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    case T_COLON:
        h->kind = T_SLASH;
        return c == '/';
    default:
        h->kind = T_OK;
        return c == '/';
    }
}

static bool tok_is(const struct sw_http *h, const char *s, size_t n)
{
    return h->idx == n && memcmp(h->tok, s, n) == 0;
}

/*
 * What a header name is. The fixed slots keep their enum slot values. Names are matched by
 * length first, then a word-at-a-time case-insensitive compare (see EQ16).
 */
enum name_kind {
    NK_OTHER = SLOT_NONE,
    NK_HOST = SLOT_HOST,
    NK_SW8 = SLOT_SW8,
    NK_CORR = SLOT_CORR,
    NK_SW8X = SLOT_SW8X,
    NK_EXPECT = SLOT_EXPECT,
    NK_UPGRADE = SLOT_CUSTOM,
    NK_CONN,
    NK_CL,
    NK_TE,
};

/* The kind of the header name nm[0..n) (token characters, any case). */
static inline __attribute__((always_inline)) enum name_kind name_kind(const char *nm, size_t n)
{
    switch (n) {
    case 3:
        return EQ16(nm, "sw") && EQ8(nm + 2, "8") ? NK_SW8 : NK_OTHER;
    case 4:
        return EQ32(nm, "host") ? NK_HOST : NK_OTHER;
    case 5:
        return EQ32(nm, "sw8-") && EQ8(nm + 4, "x") ? NK_SW8X : NK_OTHER;
    case 6:
        return EQ32(nm, "expe") && EQ32(nm + 2, "pect") ? NK_EXPECT : NK_OTHER;
    case 7:
        return EQ32(nm, "upgr") && EQ32(nm + 3, "rade") ? NK_UPGRADE : NK_OTHER;
    case 10:
        return EQ64(nm, "connecti") && EQ64(nm + 2, "nnection") ? NK_CONN : NK_OTHER;
    case 14:
        return EQ64(nm, "content-") && EQ64(nm + 6, "t-length") ? NK_CL : NK_OTHER;
    case 15:
        return EQ64(nm, "sw8-corr") && EQ64(nm + 7, "relation") ? NK_CORR : NK_OTHER;
    case 16:
        return EQ64(nm, "proxy-co") && EQ64(nm + 8, "nnection") ? NK_CONN : NK_OTHER;
    case 17:
        return EQ64(nm, "transfer") && EQ64(nm + 8, "-encodin") && EQ8(nm + 16, "g") ? NK_TE
                                                                                     : NK_OTHER;
    default:
        return NK_OTHER;
    }
}

/*
 * A header name nm[0..n) (token characters, any case; n may exceed the bytes kept of a split
 * name, which then matches nothing) is complete, its ':' read. False: refused. `in_head`: the
 * caller knows the line is in a head (not trailers).
 */
static inline __attribute__((always_inline)) bool name_end(struct sw_http *h, const char *nm,
                                                           size_t n, bool in_head, unsigned *direct)
{
    unsigned slot = SLOT_NONE;
    enum name_kind k;

    h->hdr = H_OTHER;
    h->idx = 0;
    if (!in_head && h->phase != PH_HEAD) /* trailers: syntax only */
        return true;
    k = name_kind(nm, n);
    switch (k) {
    case NK_OTHER:
        break;
    case NK_UPGRADE:
        h->mflags |= F_UPG;
        break;
    case NK_CONN:
        h->hdr = H_CONN;
        break;
    case NK_CL:
        if (h->mflags & F_CL)
            return false; /* a second Content-Length */
        h->mflags |= F_CL;
        h->remaining = 0;
        h->hdr = H_CL;
        break;
    case NK_TE:
        h->mflags = (uint16_t)((h->mflags | F_TE) & ~F_CHUNKED);
        h->hdr = H_TE;
        break;
    default: /* NK_HOST ... NK_EXPECT: their slot */
        slot = (unsigned)k;
        break;
    }
    if (direct && h->req && slot >= SLOT_HOST && slot <= SLOT_SW8X && h->opts->header_count == 0) {
        /* The caller stores the whole value (slot_value); the first Host counts. */
        if (slot != SLOT_HOST || h->req->host_len == 0)
            *direct = slot;
        return true;
    }
    if (h->req && (slot != SLOT_NONE || h->opts->header_count != 0)) {
        header_name_done(h, h->req, slot, nm, n);
        if (h->hdr == H_OTHER && h->req->slot != SLOT_NONE)
            h->hdr = H_CAP;
    }
    return true;
}

/* A Connection / Transfer-Encoding token (h->tok[0..idx)) ended. */
static void token_end(struct sw_http *h)
{
    if (h->idx == 0 || h->idx >= sizeof(h->tok))
        return;
    if (h->hdr == H_TE) {
        if (tok_is(h, "chunked", 7))
            h->mflags |= F_CHUNKED;
        else
            h->mflags &= (uint16_t)~F_CHUNKED;
    } else if (tok_is(h, "close", 5)) {
        h->mflags |= F_CLOSE;
    } else if (tok_is(h, "keep-alive", 10)) {
        h->mflags |= F_KA;
    } else if (tok_is(h, "upgrade", 7)) {
        h->mflags |= F_CUP;
    }
    h->idx = 0;
}

/* Bytes of a header value (all of class C_VALUE). False: refused. */
static inline __attribute__((always_inline)) bool value_bytes(struct sw_http *h, const char *s,
                                                              size_t n)
{
    if (h->phase != PH_HEAD)
        return true;
    switch (h->hdr) {
    case H_CL:
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c >= '0' && c <= '9') {
                if ((h->mflags & F_CLWS) || h->remaining > (UINT64_MAX - 10) / 10)
                    return false;
                h->remaining = h->remaining * 10 + (c - '0');
                h->mflags |= F_CLDIG;
            } else if (c == ' ' || c == '\t') {
                h->mflags |= F_CLWS;
            } else {
                return false;
            }
        }
        break;
    case H_TE:
    case H_CONN:
        for (size_t i = 0; i < n; i++) {
            char c = s[i];
            if (c == ',') {
                token_end(h);
                h->idx = 0;
                h->mflags &= (uint16_t)~F_TOKWS;
            } else if (c == ' ' || c == '\t') {
                if (h->idx > 0)
                    h->mflags |= F_TOKWS;
            } else if (h->mflags & F_TOKWS) {
                h->idx = 0xff; /* "a b": not a token we know */
            } else {
                if (h->idx < sizeof(h->tok))
                    h->tok[h->idx] = lower(c);
                if (h->idx < 0xff)
                    h->idx++;
            }
        }
        break;
    default:
        break;
    }
    if (h->req && h->req->slot != SLOT_NONE)
        header_value_append(h->req, s, n);
    return true;
}

/*
 * The current header is one whose value nothing looks at (value_bytes/value_done no-ops): not
 * framing, not captured (name_end() makes a captured one H_CAP), or a trailer (H_OTHER).
 */
static inline bool plain_header(const struct sw_http *h)
{
    return h->hdr == H_OTHER;
}

/*
 * The whole value p[0..n) (OWS skipped before it) of a Connection / Proxy-Connection /
 * Transfer-Encoding header that is not captured: when it is one token (no ',', SP or HT but
 * trailing OWS), does what value_bytes() + value_done() do, without copying it to h->tok;
 * else returns false and does nothing. Letters and '-' compare exactly with OR 0x20 here, as
 * a value run holds no CR.
 */
__attribute__((noinline)) static bool token_value(struct sw_http *h, const char *p, size_t n)
{
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0 || h->idx != 0 || (h->req && h->req->slot != SLOT_NONE))
        return false;
    /* A token we know matched (letters and '-' only) holds no ',', SP or HT: no scan. */
    if (h->hdr == H_TE) {
        if (n == 7 && EQ32(p, "chun") && EQ32(p + 3, "nked")) {
            h->mflags |= F_CHUNKED;
            goto done;
        }
    } else if (n == 10 && EQ64(p, "keep-ali") && EQ16(p + 8, "ve")) {
        h->mflags |= F_KA;
        goto done;
    } else if (n == 5 && EQ32(p, "clos") && EQ8(p + 4, "e")) {
        h->mflags |= F_CLOSE;
        goto done;
    } else if (n == 7 && EQ32(p, "upgr") && EQ32(p + 3, "rade")) {
        h->mflags |= F_CUP;
        goto done;
    }
    for (size_t k = 0; k < n; k++)
        if (p[k] == ',' || p[k] == ' ' || p[k] == '\t')
            return false;
    if (h->hdr == H_TE && n < sizeof(h->tok))
        h->mflags &= (uint16_t)~F_CHUNKED;
done:
    h->mflags &= (uint16_t)~F_TOKWS;
    h->hdr = H_OTHER;
    return true;
}

/*
 * The whole value p[0..n) (OWS skipped before it) of a Content-Length header that is not
 * captured, in a head: what value_bytes() + value_done() do with it. False: refused.
 */
static inline bool cl_value(struct sw_http *h, const char *p, size_t n)
{
    uint64_t v = h->remaining; /* 0: name_end() reset it */
    size_t k = 0;

    for (; k < n && (unsigned)p[k] - '0' <= 9u; k++) {
        if (v > (UINT64_MAX - 10) / 10)
            return false;
        v = v * 10 + (unsigned)(p[k] - '0');
    }
    if (k == 0)
        return false;
    for (size_t t = k; t < n; t++) {
        if (p[t] != ' ' && p[t] != '\t')
            return false;
        h->mflags |= F_CLWS;
    }
    h->remaining = v;
    h->mflags = (uint16_t)((h->mflags | F_CLDIG) & ~F_TOKWS);
    h->hdr = H_OTHER;
    h->idx = 0;
    return true;
}

/* A header line ended. False: refused. */
static bool value_done(struct sw_http *h)
{
    if (h->phase != PH_HEAD)
        return true;
    if (h->hdr == H_CL && !(h->mflags & F_CLDIG))
        return false;
    if (h->hdr == H_TE || h->hdr == H_CONN)
        token_end(h);
    h->mflags &= (uint16_t)~F_TOKWS;
    h->hdr = H_OTHER;
    h->idx = 0;
    if (h->req)
        header_value_done(h->req);
    return true;
}

static enum sw_http_method queue_pop(struct sw_http *h)
{
    enum sw_http_method m = SW_HTTP_M_GET;

    if (h->q_len) {
        m = (enum sw_http_method)h->queue[h->q_head];
        h->q_head = (uint8_t)((h->q_head + 1) % SW_HTTP_PENDING_MAX);
        h->q_len--;
    }
    return m;
}

/* libhttp-parser's http_should_keep_alive(), on our flags. */
static bool keep_alive(const struct sw_http *h)
{
    if (h->major > 0 && h->minor > 0) {
        if (h->mflags & F_CLOSE)
            return false;
    } else if (!(h->mflags & F_KA)) {
        return false;
    }
    if (h->dir == SW_HTTP_REQUEST)
        return true;
    if (h->status / 100 == 1 || h->status == 204 || h->status == 304 || (h->mflags & F_SKIP))
        return true;
    return (h->mflags & (F_CHUNKED | F_CL)) != 0; /* else the body needs EOF */
}

static void ev_clear(struct sw_http_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->type = SW_HTTP_EV_NONE;
    ev->insert_at = SW_HTTP_NO_OFFSET;
    ev->line_end = SW_HTTP_NO_OFFSET;
}

static void ev_fill_msg(struct sw_http *h, struct sw_http_event *ev, enum sw_http_ev_type t,
                        size_t off)
{
    ev->type = t;
    ev->offset = off;
    ev->status = h->dir == SW_HTTP_RESPONSE ? h->status : 0;
    ev->method = (enum sw_http_method)h->cur_method;
    ev->keep_alive = (h->mflags & F_KEEP) != 0;
}

static size_t stop(struct sw_http *h, struct sw_http_event *ev, enum sw_http_ev_type t,
                   enum sw_http_err err, size_t consumed)
{
    h->phase = PH_STOPPED;
    h->pending = PEND_NONE;
    ev->type = t;
    ev->err = err;
    ev->offset = 0; /* unused for NOT_HTTP and ERROR: the caller stops looking */
    return consumed;
}

/* A parse error: before the first complete head it means the peer does not speak HTTP/1.x. */
static size_t fail(struct sw_http *h, struct sw_http_event *ev, enum sw_http_err err, size_t len)
{
    bool not_http = !h->seen_head && err != SW_HTTP_ERR_TOO_LARGE;
    return stop(h, ev, not_http ? SW_HTTP_EV_NOT_HTTP : SW_HTTP_EV_ERROR, err, len);
}

/* A message ends just before buf[n]. */
static size_t msg_done(struct sw_http *h, const char *buf, size_t n, struct sw_http_event *ev)
{
    if (n > 0)
        h->last_byte = (uint8_t)buf[n - 1];
    if (h->upgrade_after) {
        ev_fill_msg(h, ev, SW_HTTP_EV_UPGRADE, n);
        h->phase = PH_STOPPED;
        return n;
    }
    ev_fill_msg(h, ev, SW_HTTP_EV_MESSAGE, n);
    h->head_bytes = 0;
    h->phase = PH_IDLE;
    h->st = ST_IDLE;
    return n;
}

/*
 * The blank line ending a head has its LF at buf[lf]. Returns 1 with the HEAD event in `ev`,
 * 0 for an interim (1xx) response (no event, keep scanning), -1 refused, -2 bad version.
 */
static int head_done(struct sw_http *h, const char *buf, size_t lf, struct sw_http_event *ev)
{
    uint16_t f = h->mflags;
    struct sw_http_req *r = h->req;
    bool body;

    if ((f & F_TE) && (f & F_CL))
        return -1;
    if (h->dir == SW_HTTP_RESPONSE) {
        int st = h->status;

        if (st / 100 == 1 && st != 101) {
            h->phase = PH_IDLE; /* the final response follows */
            h->st = ST_IDLE;
            return 0;
        }
        if (h->major != 1 || h->minor > 1)
            return -2;
        h->cur_method = (uint8_t)queue_pop(h);
        h->upgrade_after = st == 101 || (h->cur_method == SW_HTTP_M_CONNECT && st / 100 == 2);
        if (h->upgrade_after || h->cur_method == SW_HTTP_M_HEAD || st == 204 || st == 304) {
            h->mflags |= F_SKIP;
            body = false;
        } else if (f & F_CHUNKED) {
            body = true;
            h->st = ST_CSIZE0;
            h->remaining = 0;
        } else if (f & F_CL) {
            body = h->remaining > 0;
            h->st = ST_CL;
        } else {
            body = true;
            h->st = ST_EOF;
        }
    } else {
        bool has_body = (f & F_CHUNKED) || ((f & F_CL) && h->remaining > 0);

        if ((f & F_TE) && !(f & F_CHUNKED))
            return -1;
        if (h->major != 1 || h->minor > 1)
            return -2;
        h->upgrade_after = ((f & F_UPG) && (f & F_CUP)) || h->cur_method == SW_HTTP_M_CONNECT;
        if (h->upgrade_after && (h->cur_method == SW_HTTP_M_CONNECT || !has_body)) {
            body = false;
        } else if (f & F_CHUNKED) {
            body = true;
            h->st = ST_CSIZE0;
            h->remaining = 0;
        } else {
            body = has_body;
            h->st = ST_CL;
        }
    }
    /* Nothing read after the head changes this (trailers are not looked at). */
    if (!h->upgrade_after && keep_alive(h))
        h->mflags |= F_KEEP;
    if (r) {
        r->http_minor = h->minor;
        r->upgrade = h->upgrade_after;
        r->keep_alive = (h->mflags & F_KEEP) != 0;
        if (opts_of(h)->header_count != 0)
            headers_build(h, r);
        else
            r->headers[0] = '\0'; /* headers_len is still 0 from req_reset() */
    }
    ev_fill_msg(h, ev, SW_HTTP_EV_HEAD, lf + 1);
    if (lf > 0)
        ev->insert_at = buf[lf - 1] == '\r' ? lf - 1 : lf;
    else
        ev->insert_at = h->last_byte == '\r' ? SW_HTTP_NO_OFFSET : 0;
    h->seen_head = true;
    h->head_bytes = 0;
    h->last_byte = '\n';
    if (body) {
        h->phase = PH_BODY;
    } else {
        h->phase = PH_IDLE;
        h->st = ST_IDLE;
        if (h->upgrade_after) {
            h->pending = PEND_UPGRADE;
        } else if (fold_of(h)) {
            ev->message = true; /* the HEAD event is the MESSAGE event too (same fields) */
            ev->msg_end = ev->offset;
        } else {
            h->pending = PEND_MESSAGE;
        }
    }
    return 1;
}

#define REFUSE() return fail(h, ev, SW_HTTP_ERR_SYNTAX, len)

/*
 * Scans buf[0..lim) (lim <= len; bytes past lim are only looked at to judge a CR) until one
 * event. `counting`: the call began in a head (or between messages); `capped`: lim is where
 * the head size limit is reached.
 */
__attribute__((noinline)) static size_t scan(struct sw_http *h, const char *buf, size_t lim,
                                             size_t len, bool counting, bool capped,
                                             struct sw_http_event *ev)
{
    size_t i = 0, lf = 0;
    unsigned char c;
    const bool head = h->phase == PH_HEAD || h->phase == PH_IDLE; /* not trailers */

    while (i < lim) {
        switch ((enum st)h->st) {
        case ST_IDLE:
            c = (unsigned char)buf[i];
            if (c == '\r') {
                h->st = ST_CR;
                h->kind = K_LEAD;
                i++;
                break;
            }
            if (c == '\n') {
                i++;
                break;
            }
            msg_begin(h);
            if (h->dir == SW_HTTP_RESPONSE) {
                if (c != 'H')
                    REFUSE();
                h->st = ST_RVER;
                h->idx = 0;
                goto ver;
            }
            h->st = ST_METHOD;
            __attribute__((fallthrough));
        case ST_METHOD:
            if (h->idx == 0 && lim - i >= 4 && ld32(buf + i) == ld32("GET ")) { /* the usual */
                h->cur_method = SW_HTTP_M_GET;
                if (h->req) {
                    h->req->method = SW_HTTP_M_GET;
                    memcpy(h->req->method_text, "GET", 4);
                    h->req->method_len = 3;
                }
                i += 4;
                h->kind = T_FIRST;
                h->st = ST_TARGET;
                if (i < lim)
                    goto target;
                break;
            }
            while (i < lim) {
                c = (unsigned char)buf[i];
                if (!((c >= 'A' && c <= 'Z') || c == '-'))
                    break;
                if (h->idx >= METHOD_LONGEST)
                    REFUSE();
                h->tok[h->idx++] = (char)c;
                i++;
            }
            if (i == lim)
                break;
            if (buf[i] != ' ' || h->idx == 0 || !method_end(h))
                REFUSE();
            i++;
            h->idx = 0;
            h->kind = T_FIRST;
            h->st = ST_TARGET;
            if (i == lim)
                break;
            __attribute__((fallthrough));
        case ST_TARGET:
        target : {
            size_t s = i;
            if (h->kind == T_FIRST && buf[i] == '/' && h->cur_method != SW_HTTP_M_CONNECT) {
                h->kind = T_OK; /* origin-form, as target_form() says */
                i++;
            }
            if (h->kind != T_OK) { /* the target's first bytes: its form (see target_form) */
                while (i < lim && h->kind != T_OK && (cls[(unsigned char)buf[i]] & C_TARGET))
                    if (!target_form(h, (unsigned char)buf[i++]))
                        REFUSE();
            }
            if (h->cur_method == SW_HTTP_M_CONNECT) {
                while (i < lim && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f)
                    i++;
            } else {
                i = run_end(buf, i, lim, RUN_TARGET);
            }
            if (i > s) {
                h->idx = 1;
                if (h->req)
                    target_append(h->req, buf + s, i - s);
            }
            if (i == lim)
                break;
            if (buf[i] != ' ' || h->idx == 0 || h->kind != T_OK)
                REFUSE();
            i++;
            h->idx = 0;
            h->st = ST_VER;
            if (i == lim)
                break;
        }
            __attribute__((fallthrough));
        case ST_VER:
        case ST_RVER:
        ver:
            if (h->idx == 0 && lim - i >= 8) { /* the whole "HTTP/d.d" at hand */
                const unsigned char *v = (const unsigned char *)buf + i;
                if (ld64(buf + i) == ld64("HTTP/1.1")) { /* the usual one, one compare */
                    h->major = 1;
                    h->minor = 1;
                } else {
                    if (ld32(buf + i) != ld32("HTTP") || v[4] != '/' || (unsigned)v[5] - '0' > 9u ||
                        v[6] != '.' || (unsigned)v[7] - '0' > 9u)
                        REFUSE();
                    h->major = (uint8_t)(v[5] - '0');
                    h->minor = (uint8_t)(v[7] - '0');
                }
                h->idx = 8;
                i += 8;
                if (i == lim)
                    break;
                /* What the byte-at-a-time branches below do for the usual next bytes. */
                if (h->st == ST_RVER && v[8] == ' ') {
                    h->st = ST_STATUS;
                    h->idx = 0;
                    if (++i < lim)
                        goto status;
                    break;
                }
                if (h->st == ST_VER && lim - i >= 2 && ld16(buf + i) == ld16("\r\n")) {
                    i += 2;
                    h->st = ST_LINE;
                    if (i < lim)
                        goto line;
                    break;
                }
            }
            c = (unsigned char)buf[i];
            if (h->idx < 5) {
                if (c != (unsigned char)"HTTP/"[h->idx])
                    REFUSE();
            } else if (h->idx == 5 || h->idx == 7) {
                if (c < '0' || c > '9')
                    REFUSE();
                if (h->idx == 5)
                    h->major = (uint8_t)(c - '0');
                else
                    h->minor = (uint8_t)(c - '0');
            } else if (h->idx == 6) {
                if (c != '.')
                    REFUSE();
            } else if (h->st == ST_RVER) {
                if (c != ' ')
                    REFUSE();
                h->st = ST_STATUS;
                h->idx = 0;
                i++;
                if (i < lim)
                    goto status;
                break;
            } else if (c == '\r') {
                i++;
                if (i < lim && buf[i] == '\n') {
                    i++;
                    h->st = ST_LINE;
                    if (i < lim)
                        goto line;
                    break;
                }
                h->st = ST_CR;
                h->kind = K_START;
                break;
            } else if (c == '\n') {
                h->st = ST_LINE;
                i++;
                break;
            } else {
                REFUSE();
            }
            h->idx++;
            i++;
            break;
        case ST_STATUS:
        status:
            if (h->idx == 0 && lim - i >= 3) { /* the three digits at hand */
                const unsigned char *v = (const unsigned char *)buf + i;
                if ((unsigned)v[0] - '0' > 9u || (unsigned)v[1] - '0' > 9u ||
                    (unsigned)v[2] - '0' > 9u)
                    REFUSE();
                h->status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
                h->idx = 3;
                i += 3;
                if (i == lim)
                    break;
            }
            c = (unsigned char)buf[i];
            if (h->idx < 3) {
                if (c < '0' || c > '9')
                    REFUSE();
                h->status = h->status * 10 + (c - '0');
                h->idx++;
            } else if (c == ' ') {
                h->st = ST_REASON;
                if (++i < lim)
                    goto reason;
                break;
            } else if (c == '\r') {
                h->st = ST_CR;
                h->kind = K_START;
            } else if (c == '\n') {
                h->st = ST_LINE;
            } else {
                REFUSE();
            }
            i++;
            break;
        case ST_REASON:
        reason:
            i = run_end(buf, i, lim, RUN_VALUE);
            if (i == lim)
                break;
            c = (unsigned char)buf[i++];
            if (c == '\r') {
                if (i < lim && buf[i] == '\n') {
                    i++;
                    h->st = ST_LINE;
                    if (i < lim)
                        goto line;
                    break;
                }
                h->st = ST_CR;
                h->kind = K_START;
            } else if (c == '\n') {
                h->st = ST_LINE;
            } else {
                REFUSE();
            }
            break;
        case ST_LINE:
        line:
            /*
             * Header lines complete in buf[i..lim) are done here in one go: the line is
             * checked whole first (name, ':', value, line end), then handled exactly as the
             * states below would handle it. Anything else (the blank line, a line not
             * complete here, a byte the states refuse) is left to them, from the line start.
             */
            while (i < lim && (cls[(unsigned char)buf[i]] & C_TCHAR) && head) {
                size_t e = run_end(buf, i, lim, RUN_NAME), v, ve, next;
                unsigned direct = SLOT_NONE;
                if (e == lim || buf[e] != ':')
                    break;
                /* OWS is value bytes too: the value's run, then (when needed) its start. */
                ve = run_end(buf, e + 1, lim, RUN_VALUE);
                if (ve + 1 < lim && ld16(buf + ve) == ld16("\r\n"))
                    next = ve + 2;
                else if (ve < lim && buf[ve] == '\n')
                    next = ve + 1;
                else
                    break;
                if (!name_end(h, buf + i, e - i, true, &direct))
                    REFUSE();
                if (direct != SLOT_NONE) {
                    slot_value(h->req, direct, buf + e + 1, ve - e - 1);
                } else if (!plain_header(h)) {
                    for (v = e + 1; v < ve && (buf[v] == ' ' || buf[v] == '\t');)
                        v++;
                    if (h->hdr == H_CL && !(h->req && h->req->slot != SLOT_NONE)) {
                        if (!cl_value(h, buf + v, ve - v))
                            REFUSE();
                    } else if ((h->hdr == H_CONN || h->hdr == H_TE) &&
                               token_value(h, buf + v, ve - v))
                        ;
                    else if ((ve > v && !value_bytes(h, buf + v, ve - v)) || !value_done(h))
                        REFUSE();
                }
                i = next;
            }
            if (i == lim)
                break;
            c = (unsigned char)buf[i];
            if (c == '\r') {
                i++;
                if (i < lim && buf[i] == '\n') { /* the usual CRLF, without a trip round */
                    lf = i++;
                    goto blank;
                }
                h->st = ST_CR;
                h->kind = K_BLANK;
                break;
            }
            if (c == '\n') {
                lf = i++;
                goto blank;
            }
            if (!(cls[c] & C_TCHAR))
                REFUSE(); /* includes SP/HT: obsolete line folding */
            h->idx = 0;
            h->st = ST_NAME;
            __attribute__((fallthrough));
        case ST_NAME: {
            size_t s = i;
            i = run_end(buf, i, lim, RUN_NAME);
            if (h->idx == 0 && i < lim) { /* the whole name at hand: match it in place */
                if (buf[i] != ':' || !name_end(h, buf + s, i - s, false, NULL))
                    REFUSE();
            } else { /* split: keep the bytes that fit (longer names match nothing) */
                bool cap_req = h->req && h->phase == PH_HEAD;
                char *nb = cap_req ? h->req->name : h->tok;
                size_t cap = cap_req ? sizeof(h->req->name) : sizeof(h->tok);
                size_t k = h->idx, n = i - s;
                if (k < cap)
                    memcpy(nb + k, buf + s, n < cap - k ? n : cap - k);
                k += n;
                h->idx = (uint8_t)(k < 0xff ? k : 0xff);
                if (i == lim)
                    break;
                if (buf[i] != ':' || !name_end(h, nb, h->idx, false, NULL))
                    REFUSE();
            }
            i++;
            h->st = ST_VWS;
        }
            __attribute__((fallthrough));
        case ST_VWS:
            while (i < lim && (buf[i] == ' ' || buf[i] == '\t'))
                i++;
            if (i == lim)
                break;
            h->st = ST_VAL;
            __attribute__((fallthrough));
        case ST_VAL: {
            size_t s = i;
            i = run_end(buf, i, lim, RUN_VALUE);
            if (i > s && !plain_header(h) && !value_bytes(h, buf + s, i - s))
                REFUSE();
            if (i == lim)
                break;
            c = (unsigned char)buf[i++];
            if (c == '\r') {
                if (i == lim || buf[i] != '\n') {
                    h->st = ST_CR;
                    h->kind = K_HDR;
                    break;
                }
                i++; /* CRLF */
            } else if (c != '\n') {
                REFUSE();
            }
            if (!plain_header(h) && !value_done(h))
                REFUSE();
            h->st = ST_LINE;
            if (i < lim)
                goto line;
            break;
        }
        case ST_CR:
            if (buf[i] != '\n')
                REFUSE(); /* a bare CR */
            lf = i++;
            if (h->kind == K_LEAD) {
                h->st = ST_IDLE;
            } else if (h->kind == K_START) {
                h->st = ST_LINE;
            } else if (h->kind == K_HDR) {
                if (!value_done(h))
                    REFUSE();
                h->st = ST_LINE;
            } else {
                goto blank;
            }
            break;
        case ST_CL:
        case ST_CDATA: {
            size_t take = lim - i;
            if (take > h->remaining)
                take = (size_t)h->remaining;
            i += take;
            h->remaining -= take;
            if (h->remaining == 0) {
                if (h->st == ST_CL)
                    return msg_done(h, buf, i, ev);
                h->st = ST_CDATA_CR;
            }
            break;
        }
        case ST_CSIZE0:
        case ST_CSIZE: {
            int v;
            c = (unsigned char)buf[i];
            v = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
            if (v >= 0) {
                if (h->remaining >> 59)
                    REFUSE();
                h->remaining = h->remaining * 16 + (unsigned)v;
                h->st = ST_CSIZE;
            } else if (h->st == ST_CSIZE0) {
                REFUSE();
            } else if (c == ';' || c == ' ' || c == '\t') {
                h->st = ST_CEXT;
            } else if (c == '\r') {
                h->st = ST_CSIZE_LF;
            } else {
                REFUSE();
            }
            i++;
            break;
        }
        case ST_CEXT:
            i = run_end(buf, i, lim, RUN_VALUE);
            if (i == lim)
                break;
            if (buf[i++] != '\r')
                REFUSE();
            h->st = ST_CSIZE_LF;
            break;
        case ST_CSIZE_LF:
            if (buf[i++] != '\n')
                REFUSE();
            h->st = h->remaining == 0 ? ST_LINE : ST_CDATA;
            break;
        case ST_CDATA_CR:
            if (buf[i++] != '\r')
                REFUSE();
            h->st = ST_CDATA_LF;
            break;
        case ST_CDATA_LF:
            if (buf[i++] != '\n')
                REFUSE();
            h->st = ST_CSIZE0;
            break;
        case ST_EOF:
            i = lim;
            break;
        default:
            REFUSE();
        }
        continue;

    blank:
        if (h->phase == PH_BODY) /* the blank line after the trailers */
            return msg_done(h, buf, i, ev);
        switch (head_done(h, buf, lf, ev)) {
        case 1:
            return i;
        case 0:
            break;
        case -2:
            return stop(h, ev, h->seen_head ? SW_HTTP_EV_ERROR : SW_HTTP_EV_NOT_HTTP,
                        SW_HTTP_ERR_VERSION, len);
        default:
            REFUSE();
        }
    }

    /* No event: all `lim` bytes consumed. */
    if (counting) {
        /* A CR last among the bytes examined: judge it by the next byte when there is one. */
        if (h->st == ST_CR && lim < len && buf[lim] != '\n')
            REFUSE();
        if (h->st == ST_METHOD && !method_prefix_ok(h))
            REFUSE();
        if (capped)
            return stop(h, ev, SW_HTTP_EV_ERROR, SW_HTTP_ERR_TOO_LARGE, len);
        h->head_bytes += (uint32_t)lim;
    }
    if (lim > 0)
        h->last_byte = (uint8_t)buf[lim - 1];
    if (h->phase == PH_HEAD) {
        const char *p = memrchr(buf, '\n', lim);
        if (p)
            ev->line_end = (size_t)(p - buf) + 1;
    }
    return lim;
}

/* ---- whole-head fast path ------------------------------------------------------------ */

#ifdef SW_TESTING
unsigned long sw_http_test_fast_hits;
bool sw_http_test_fast_off;
#define FAST_OFF() sw_http_test_fast_off
#define FAST_HIT() (sw_http_test_fast_hits++)
#else
#define FAST_OFF() false
#define FAST_HIT() ((void)0)
#endif

/*
 * The index of the lowest set bit of a non-zero mask, as a size_t. On x86_64 one tzcnt (bsf on
 * CPUs without BMI1, the same for a non-zero operand): GCC 12 follows __builtin_ctz() with a
 * sign extension of its int result before it is used in address arithmetic.
 */
static inline size_t ctz64(uint64_t m)
{
#if defined(__x86_64__) && defined(__GNUC__)
    size_t r;
    __asm__("tzcnt %1, %0" : "=r"(r) : "rm"(m) : "cc");
    return r;
#else
    return (size_t)__builtin_ctzll(m);
#endif
}
#define CTZ(m) ctz64((uint64_t)(m))
#define CTZ32(m) ctz64((uint64_t)(unsigned)(m))

#ifdef HAVE_SIMD
static inline __m128i ld128(const char *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/*
 * Bit k set: v[k] <= top (top < 0x40) or v[k] is DEL, in three operations: x ^ 0x40 maps
 * 0x00..top to 0x40..0x40 + top and DEL to 0x3f, one range, which + 0x41 moves to the lowest
 * signed values (0x80..0x81 + top).
 */
static inline unsigned le16v(__m128i v, unsigned char top)
{
    __m128i x = _mm_add_epi8(_mm_xor_si128(v, _mm_set1_epi8(0x40)), _mm_set1_epi8(0x41));
    return (unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(_mm_set1_epi8((char)(0x82 + top)), x));
}
#endif

/*
 * Bit k set: p[k] <= top or p[k] is DEL. top 0x1f: the control bytes (HT, CR and LF among
 * them), which end a header value; top 0x20: also SP, which ends a request-target.
 */
static inline unsigned le16(const char *p, unsigned char top)
{
#ifdef HAVE_SIMD
    return le16v(ld128(p), top);
#else
    unsigned m = 0;

    for (unsigned k = 0; k < 16; k++)
        if ((unsigned char)p[k] <= top || p[k] == 0x7f)
            m |= 1u << k;
    return m;
#endif
}

#if defined(HAVE_SIMD) && defined(__GNUC__) && !defined(__clang__)
/*
 * The classes of fast_lines() as GCC-only asm: GCC 12 turns _mm_cmpgt_epi8(x, constant) into
 * the constant's compare with x and a negation, copies registers it need not copy, and keeps
 * every constant in a register loaded before the loop (a head has a few lines: the loads cost
 * more than they save). Here each class is its few operations, the constants memory operands.
 */
#define FAST_ASM 1
/* The constants of the asm blocks: 16 copies of a byte each, memory operands (KM). */
enum {
    K_X40, /* value16(), target16(): x ^ 0x40 + 0x41, ... */
    K_X41,
    K_VK,  /* ... > 0x81 + 0x1f, signed: not a control byte nor DEL */
    K_TK,  /* ... > 0x81 + 0x20: not that, nor SP */
    K_C20, /* nonletter16(): (x | 0x20) + (0x80 - 'a') > -0x80 + 25: not a letter */
    K_BIAS,
    K_LK,
    K_DASH,
    K_QM, /* target16(): '?', '#', '.', '/' */
    K_HS,
    K_DT,
    K_SL,
};
static _Alignas(16) const char fast_k[][16] = {
    [K_X40] = {[0 ... 15] = 0x40},
    [K_X41] = {[0 ... 15] = 0x41},
    [K_VK] = {[0 ... 15] = (char)(0x81 + 0x1f)},
    [K_TK] = {[0 ... 15] = (char)(0x81 + 0x20)},
    [K_C20] = {[0 ... 15] = 0x20},
    [K_BIAS] = {[0 ... 15] = (char)(0x80 - 'a')},
    [K_LK] = {[0 ... 15] = -0x80 + 25},
    [K_DASH] = {[0 ... 15] = '-'},
    [K_QM] = {[0 ... 15] = '?'},
    [K_HS] = {[0 ... 15] = '#'},
    [K_DT] = {[0 ... 15] = '.'},
    [K_SL] = {[0 ... 15] = '/'},
};
#define KM(k) "m"(*(const __m128i *)(const void *)fast_k[k])
#define M16(p) "m"(*(const struct { char b[16]; } *)(const void *)(p))
#endif

/* Bit k set: p[k] is not a control byte nor DEL (le16(p, 0x1f) inverted). */
static inline unsigned value16(const char *p)
{
#ifdef FAST_ASM
    __m128i x;
    unsigned m;
    __asm__("movdqu %[p], %[x]\n\t"
            "pxor %[x40], %[x]\n\t"
            "paddb %[x41], %[x]\n\t"
            "pcmpgtb %[vk], %[x]\n\t"
            "pmovmskb %[x], %[m]"
            : [x] "=&x"(x), [m] "=r"(m)
            : [p] M16(p), [x40] KM(K_X40), [x41] KM(K_X41), [vk] KM(K_VK));
    return m;
#elif defined(HAVE_SIMD)
    __m128i x = _mm_add_epi8(_mm_xor_si128(ld128(p), _mm_set1_epi8(0x40)), _mm_set1_epi8(0x41));
    return (unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(x, _mm_set1_epi8((char)(0x81 + 0x1f))));
#else
    return le16(p, 0x1f) ^ 0xffffu;
#endif
}

/* Bit k set: p[k] is not a letter or '-' (most header names are made of these). */
static inline unsigned nonletter16(const char *p)
{
    /* (x | 0x20) + (0x80 - 'a') > -0x80 + 25, signed: x is not a letter. */
#ifdef FAST_ASM
    __m128i v, l;
    unsigned m;
    __asm__("movdqu %[p], %[v]\n\t"
            "movdqa %[v], %[l]\n\t"
            "por %[c20], %[l]\n\t"
            "paddb %[bias], %[l]\n\t"
            "pcmpgtb %[lk], %[l]\n\t"
            "pcmpeqb %[dash], %[v]\n\t"
            "pandn %[l], %[v]\n\t"
            "pmovmskb %[v], %[m]"
            : [v] "=&x"(v), [l] "=&x"(l), [m] "=r"(m)
            : [p] M16(p), [c20] KM(K_C20), [bias] KM(K_BIAS), [lk] KM(K_LK), [dash] KM(K_DASH));
    return m;
#elif defined(HAVE_SIMD)
    __m128i v = ld128(p);
    __m128i l =
        _mm_add_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8((char)(0x80 - 'a')));
    return (unsigned)_mm_movemask_epi8(_mm_andnot_si128(
        _mm_cmpeq_epi8(v, _mm_set1_epi8('-')), _mm_cmpgt_epi8(l, _mm_set1_epi8(-0x80 + 25))));
#else
    unsigned m = 0;

    for (unsigned k = 0; k < 16; k++) {
        unsigned char c = (unsigned char)p[k];
        if (!(((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '-'))
            m |= 1u << k;
    }
    return m;
#endif
}

/* Bit k set: p[k] is not a letter, a digit or '-' (the bytes of the names matched). */
static inline unsigned name16(const char *p)
{
#ifdef HAVE_SIMD
    return stop16(p, RUN_NAME);
#else
    unsigned m = 0;

    for (unsigned k = 0; k < 16; k++) {
        unsigned char c = (unsigned char)p[k];
        if (!((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '-'))
            m |= 1u << k;
    }
    return m;
#endif
}

/*
 * The first byte of buf[q..len) that is <= top or DEL (see le16), or len (len >= 16). The last
 * block is the 16 bytes ending at len, those before q shifted out.
 */
static inline __attribute__((always_inline)) size_t find_le(const char *buf, size_t q, size_t len,
                                                            unsigned char top)
{
    unsigned m;

    for (; len - q >= 16; q += 16)
        if ((m = le16(buf + q, top)) != 0)
            return q + CTZ(m);
    if (q >= len)
        return len;
    m = le16(buf + len - 16, top) >> (16 - (len - q));
    return m ? q + CTZ(m) : len;
}

/*
 * The first byte of buf[s..len) that is not a letter, a digit or '-', or len (len >= 16), 16
 * bytes at a time; the last block is the 16 bytes ending at len.
 */
static inline __attribute__((always_inline)) size_t name_run(const char *buf, size_t s, size_t len)
{
    unsigned m;

    for (; len - s >= 16; s += 16)
        if ((m = name16(buf + s)) != 0)
            return s + CTZ(m);
    if (s >= len)
        return len;
    m = name16(buf + len - 16) >> (16 - (len - s));
    return m ? s + CTZ(m) : len;
}

/*
 * The stops of a request-target's block: bit k of *stop set when p[k] ends the path (<= 0x20,
 * DEL, '?', '#'), of *dm / *sm when p[k] is '.' / '/'.
 */
static inline __attribute__((always_inline)) void target16(const char *p, unsigned *stop,
                                                           unsigned *dm, unsigned *sm)
{
#ifdef FAST_ASM
    __m128i v, x, y;
    unsigned ok;
    /* ok: > 0x20 and not DEL (value16()'s classes with 0x20 as a control byte), not '?' or
       '#'. */
    __asm__(
        "movdqu %[p], %[v]\n\t"
        "movdqa %[v], %[x]\n\t"
        "pxor %[x40], %[x]\n\t"
        "paddb %[x41], %[x]\n\t"
        "pcmpgtb %[tk], %[x]\n\t"
        "movdqa %[v], %[y]\n\t"
        "pcmpeqb %[qm], %[y]\n\t"
        "pandn %[x], %[y]\n\t"
        "movdqa %[v], %[x]\n\t"
        "pcmpeqb %[hs], %[x]\n\t"
        "pandn %[y], %[x]\n\t"
        "pmovmskb %[x], %[ok]\n\t"
        "movdqa %[v], %[x]\n\t"
        "pcmpeqb %[dt], %[x]\n\t"
        "pmovmskb %[x], %[dm]\n\t"
        "pcmpeqb %[sl], %[v]\n\t"
        "pmovmskb %[v], %[sm]"
        : [v] "=&x"(v), [x] "=&x"(x), [y] "=&x"(y), [ok] "=r"(ok), [dm] "=r"(*dm), [sm] "=r"(*sm)
        : [p] M16(p), [x40] KM(K_X40), [x41] KM(K_X41), [tk] KM(K_TK), [qm] KM(K_QM), [hs] KM(K_HS),
          [dt] KM(K_DT), [sl] KM(K_SL));
    *stop = ok ^ 0xffffu;
#elif defined(HAVE_SIMD)
    __m128i v = ld128(p);
    __m128i qh =
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('?')), _mm_cmpeq_epi8(v, _mm_set1_epi8('#')));
    *stop = le16v(v, 0x20) | (unsigned)_mm_movemask_epi8(qh);
    *dm = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('.')));
    *sm = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('/')));
#else
    *stop = *dm = *sm = 0;
    for (unsigned k = 0; k < 16; k++) {
        unsigned char c = (unsigned char)p[k];
        *stop |= (c <= 0x20 || c == 0x7f || c == '?' || c == '#') ? 1u << k : 0;
        *dm |= c == '.' ? 1u << k : 0;
        *sm |= c == '/' ? 1u << k : 0;
    }
#endif
}

/*
 * The request-target at buf[s] (a '/' there, checked by the caller), 16 bytes at a time (the
 * last block the 16 bytes ending at len, len >= 16): the index of the SP that ends it, or 0 to
 * give up (another byte <= 0x20 or DEL ends it, or it does not end in buf[..len)). Its path
 * information, while the bytes are at hand, as offsets in the target: *pe is the offset of the
 * first '?' or '#' (else of the SP), *dot 1 + the offset of the path's last '.' when no '/'
 * follows it in the path (else 0). The '.' and '/' of the path in a block are in masks dm / sm: the
 * last '.' has no '/' after it exactly when its bit is above every bit of sm, i.e. when dm > sm.
 */
static inline __attribute__((always_inline)) size_t fast_target(const char *buf, size_t s,
                                                                size_t len, size_t *pe, size_t *dot)
{
    size_t p = s, x = 0, i;
    unsigned stop, dm, sm;

    if (SW_LIKELY(len - s >= 16)) { /* the first block, where most targets end */
        target16(buf + s, &stop, &dm, &sm);
        if (SW_LIKELY(stop != 0)) {
            dm &= stop ^ (stop - 1); /* the bits below the first stop (no '.' is a stop) */
            if (dm > (sm & (stop ^ (stop - 1))))
                x = 32 - (size_t)__builtin_clz(dm);
            goto found;
        }
        if (dm > sm)
            x = 32 - (size_t)__builtin_clz(dm);
        p += 16;
    }
    for (;;) {
        size_t q = len - p >= 16 ? p : len - 16;
        unsigned sh = (unsigned)(p - q);
        if (p >= len)
            return 0; /* no end in the bytes */
        target16(buf + q, &stop, &dm, &sm);
        stop >>= sh;
        dm >>= sh;
        sm >>= sh;
        if (stop) {
            dm &= stop ^ (stop - 1);
            sm &= stop ^ (stop - 1);
        }
        if (dm > sm)
            x = p - s + 32 - (size_t)__builtin_clz(dm);
        else if (sm)
            x = 0;
        if (stop)
            break;
        if (sh != 0)
            return 0;
        p += 16;
    }
found:
    i = p + CTZ32(stop);
    *pe = i - s;
    *dot = x;
    if (SW_LIKELY(buf[i] == ' '))
        return i;
    if (buf[i] != '?' && buf[i] != '#')
        return 0;
    i = find_le(buf, i + 1, len, 0x20); /* the query and fragment */
    return i < len && buf[i] == ' ' ? i : 0;
}

/* For each header name length, the first letter (OR 0x20) of the name name_kind() knows. */
static const unsigned char kind_first[32] = {
    [0] = ':', /* an empty name: fast_value() refuses it */
    [3] = 's',  [4] = 'h',  [5] = 's',  [6] = 'e',  [7] = 'u',
    [10] = 'c', [14] = 'c', [15] = 's', [16] = 'p', [17] = 't',
};

/* Copies a captured value (n < the destination's size) and puts its NUL. */
static inline __attribute__((always_inline)) void copy_cap(char *dst, const char *src, size_t n)
{
    if (n >= 8 && n <= 16) { /* two overlapping words: no call for the usual short values */
        uint64_t a = ld64(src), b = ld64(src + n - 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a = ld32(src), b = ld32(src + n - 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n != 0) {
        memcpy(dst, src, n);
    }
    dst[n] = '\0';
}

/*
 * A Connection / Proxy-Connection / Transfer-Encoding value p[0..n) (OWS trimmed on both sides)
 * that is one token: the message flags f after it, as value_bytes() + value_done() leave them
 * (Transfer-Encoding: F_CHUNKED was cleared by its name). -1: not one token.
 */
static inline int fast_token(unsigned f, bool te, const char *p, size_t n)
{
    if (te) {
        if (n == 7 && EQ32(p, "chun") && EQ32(p + 3, "nked"))
            return (int)(f | F_CHUNKED);
    } else if (n == 10 && EQ64(p, "keep-ali") && EQ16(p + 8, "ve")) {
        return (int)(f | F_KA);
    } else if (n == 5 && EQ32(p, "clos") && EQ8(p + 4, "e")) {
        return (int)(f | F_CLOSE);
    } else if (n == 7 && EQ32(p, "upgr") && EQ32(p + 3, "rade")) {
        return (int)(f | F_CUP);
    }
    for (size_t k = 0; k < n; k++)
        if (p[k] == ',' || p[k] == ' ' || p[k] == '\t')
            return -1;
    return (int)f; /* a token nothing looks at (or none) */
}

/* Captures the fast path found, bits of struct fast_hdrs.f above the message flags (index
   k - NK_HOST in cap_i/cap_n). */
#define SEEN_CAP(k) (0x10000u << ((k)-NK_HOST))
#define SEEN_EXPECT 0x100000u /* Expect: 100-continue */

/* What the fast path gathers from a head: its start line, and from its header lines. */
struct fast_hdrs {
    unsigned f;            /* message flags (F_*, 16 bits) and SEEN_* */
    uint64_t cl;           /* the Content-Length value */
    enum sw_http_method m; /* request: the method, ... */
    unsigned mlen;         /* ... its length, */
    unsigned minor;        /* request or response: the HTTP minor version */
    unsigned status;       /* response: the status */
    size_t ts, te;         /* request: where the target begins and its SP, */
    size_t pe, dot;        /* its path's end and 1 + its last '.', offsets in the target (see
                              fast_target()) */
    size_t cap_i[4];       /* where the Host, sw8, sw8-correlation, sw8-x values are (when
                              seen; index in the call's bytes) ... */
    size_t cap_n[4];       /* ... and their lengths as stored (0: too long, see slot_value();
                              Host: 0 until a Host value that is not empty, set to 0 first) */
    uintptr_t off;         /* a byte read at address a (in the call's bytes, or in a copy of
                              their end) is the call's byte a - off (see fast_lines()) */
};

/*
 * A header line whose name nm[0..n) passed the kind_first filter, its value v[0..ve - v) (OWS
 * included; *ve is the CR or LF that ends it): what name_end() and the value calls do with it,
 * into o. False: give up. `req`: captures wanted. Host and Content-Length, the usual ones, are
 * matched first without name_kind()'s switch.
 */
static inline __attribute__((always_inline)) bool
fast_value(struct fast_hdrs *o, const char *nm, size_t n, const char *v, const char *ve, bool req)
{
    static const uint16_t cap_size[4] = {SW_HTTP_HOST_MAX, SW_HTTP_SW8_MAX, SW_HTTP_CORR_MAX,
                                         SW_HTTP_SW8X_MAX};
    enum name_kind k;

    /* OWS: usually one SP (*ve is not OWS, so no bound is needed for the first two). */
    v += *v == ' ';
    if (SW_UNLIKELY(*v == ' ' || *v == '\t'))
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
    if (n == 4) {
        if (!EQ32(nm, "host"))
            return true;
        k = NK_HOST;
    } else if (n == 14) {
        if (!(EQ64(nm, "content-") && EQ64(nm + 6, "t-length")))
            return true;
        k = NK_CL;
    } else {
        if (n == 0)
            return false; /* an empty name (see kind_first[0]) */
        if ((k = name_kind(nm, n)) == NK_OTHER)
            return true;
    }
    n = (size_t)(ve - v);
    switch (k) {
    case NK_HOST:
    case NK_SW8:
    case NK_CORR:
    case NK_SW8X: {
        /* slot_value(): the first Host that is not empty counts, the last of the others; a
           value too long for its slot leaves it empty. */
        unsigned i = (unsigned)(k - NK_HOST);
        if (!req || (k == NK_HOST && (o->f & SEEN_CAP(NK_HOST))))
            return true;
        o->cap_i[i] = (size_t)((uintptr_t)v - o->off);
        o->cap_n[i] = n >= cap_size[i] ? 0 : trim_len(v, n);
        if (o->cap_n[i] != 0 || k != NK_HOST)
            o->f |= SEEN_CAP(NK_HOST) << i;
        return true;
    }
    case NK_EXPECT: /* header_value_append() keeps up to 31 bytes, lower-cased */
        if (req && n < SW_HTTP_HDR_NAME_MAX && trim_len(v, n) == 12 && EQ64(v, "100-cont") &&
            EQ32(v + 8, "inue"))
            o->f |= SEEN_EXPECT;
        return true;
    case NK_UPGRADE:
        o->f |= F_UPG;
        return true;
    case NK_CL: { /* name_end() + cl_value(); more than 19 digits: maybe too big, given up */
        const char *d = v;
        uint64_t x = 0;
        unsigned c;
        if (o->f & F_CL)
            return false;
        for (; (c = (unsigned)(unsigned char)*d - '0') <= 9u; d++) /* *ve is no digit */
            x = x * 10 + c; /* wraps only past 19 digits, given up below */
        if (d == v || d - v > 19)
            return false;
        o->f |= F_CL | F_CLDIG;
        for (; d < ve; d++) {
            if (*d != ' ' && *d != '\t')
                return false;
            o->f |= F_CLWS;
        }
        o->cl = x;
        return true;
    }
    default: { /* NK_CONN, NK_TE: name_end() + token_value() */
        int nf;
        if (k == NK_TE)
            o->f = (o->f | F_TE) & ~F_CHUNKED;
        if ((nf = fast_token(o->f, k == NK_TE, v, trim_len(v, n))) < 0)
            return false;
        o->f = (unsigned)nf;
        return true;
    }
    }
}

/* fast_line_slow()'s return for the blank line: FAST_BLANK + the index of its LF (0: give up). */
#define FAST_BLANK ((size_t)1 << 62)

/* The name buf[s..e) may be one name_kind() knows (c0: buf[s]). */
static inline __attribute__((always_inline)) bool kind_maybe(size_t s, size_t e, unsigned char c0)
{
    return e - s < sizeof(kind_first) && kind_first[e - s] == (unsigned char)(c0 | 0x20);
}

/*
 * The general form of a line of fast_lines(), with checked runs: a name with digits near the end of
 * the bytes, with other token characters or of 16 bytes or more, HT, a bare LF, the blank line
 * ending in a bare LF, or refused.
 */
__attribute__((noinline)) static size_t fast_line_slow(const char *buf, size_t s, size_t len,
                                                       bool req, struct fast_hdrs *o)
{
    unsigned char c0 = (unsigned char)buf[s];
    size_t e, p;

    if (c0 == '\r' || c0 == '\n') { /* the blank line */
        if (c0 == '\n')
            return FAST_BLANK + s;
        return s + 1 < len && buf[s + 1] == '\n' ? FAST_BLANK + s + 1 : FAST_BLANK;
    }
    e = name_run(buf, s, len);
    if (e < len && buf[e] != ':') /* a rare token character (name_kind() matches none) */
        while (e < len && (cls[(unsigned char)buf[e]] & C_TCHAR))
            e++;
    if (e >= len || buf[e] != ':' || e == s)
        return FAST_BLANK;
    for (p = find_le(buf, e + 1, len, 0x1f);; p = find_le(buf, p + 1, len, 0x1f)) {
        size_t next;
        if (p + 1 < len && ld16(buf + p) == ld16("\r\n"))
            next = p + 2;
        else if (p < len && buf[p] == '\n')
            next = p + 1;
        else if (p < len && buf[p] == '\t')
            continue;
        else
            return FAST_BLANK; /* a bare CR, another control byte, DEL, or no line end */
        if (kind_maybe(s, e, c0) && !fast_value(o, buf + s, e - s, buf + e + 1, buf + p, req))
            return FAST_BLANK;
        return next;
    }
}

/* The fewest bytes from a line's start for the unchecked loads of fast_lines() (see there). */
#define FAST_ROOM 35
/* The last bytes of a call copied for its last lines, and the zeros after them. */
#define FAST_PAD 48
#define FAST_PAD_ZEROS 16

static size_t fast_lines_cold(const char *buf, size_t s, size_t len, bool req, struct fast_hdrs *o);

/*
 * The header lines from buf[s] (s <= len, len >= 16) up to the blank line: the index of the
 * blank line's LF, or 0 to give up. `req`: a request parser with captures. Each line is
 * checked where it is: the usual one has letters and '-' (digits too, a second class) up to
 * ':' in its first 16 bytes, then a value whose first control byte is the CR of its CRLF; its
 * value is looked at when kind_first says the name may matter (Host and Content-Length here,
 * the others in fast_value()). The loads are unchecked: while FAST_ROOM bytes or more are left
 * from a line's start l, the 16 bytes at l and the 16 after the ':' (at most at l + 16) can be
 * read, and the two bytes at the value's first control byte among those or just after them (at
 * most l + 33 and l + 34). For the lines after that, the last FAST_PAD bytes of the call (all
 * of them when fewer) are copied to `pad`, followed by zeros, and the same loop goes on there:
 * a zero is a control byte and no name byte, so every run stops at the first zero (a line
 * begins at it or before, so no read passes the 16 bytes after it), and a line that runs into
 * the zeros is given up on like one that does not end in the call. A byte read at address a is the
 * call's byte a - o->off. Other lines go through fast_line_slow(): at the first one the rest of the
 * head goes to fast_lines_cold().
 */
static inline __attribute__((always_inline)) size_t
fast_lines(const char *buf, size_t s, size_t len, bool req, struct fast_hdrs *o)
{
    _Alignas(16) char pad[FAST_PAD + FAST_PAD_ZEROS];
    const char *l = buf + s, *lim, *cend = buf + len, *q, *v, *ve, *cr;
    size_t n, p;
    unsigned m;
    unsigned char c0;

    o->off = (uintptr_t)buf;
    lim = len >= FAST_ROOM ? cend - FAST_ROOM : buf; /* buf: the copy from the first line */
    for (;;) {
        if (SW_UNLIKELY(l > lim)) {
            /* The last FAST_PAD bytes (all of them when fewer; len >= 16), then zeros. In the
               copy a line begins at its end or before (the line before ended in a CRLF of the
               call's bytes), so this is done once: lim is its end. */
            const char *b = len >= FAST_PAD ? cend - FAST_PAD : buf;
#ifdef HAVE_SIMD
            _Static_assert(FAST_PAD == 48 && FAST_PAD_ZEROS == 16, "the stores below");
            _mm_store_si128((__m128i *)(void *)(pad + 48), _mm_setzero_si128());
            if (SW_LIKELY(b != buf)) {
                _mm_store_si128((__m128i *)(void *)pad, ld128(b));
                _mm_store_si128((__m128i *)(void *)(pad + 16), ld128(b + 16));
                _mm_store_si128((__m128i *)(void *)(pad + 32), ld128(b + 32));
            } else { /* fewer than FAST_PAD bytes: zeros after them too */
                _mm_store_si128((__m128i *)(void *)(pad + 16), _mm_setzero_si128());
                _mm_store_si128((__m128i *)(void *)(pad + 32), _mm_setzero_si128());
                _mm_store_si128((__m128i *)(void *)pad, ld128(buf));
                _mm_storeu_si128((__m128i *)(void *)(pad + len - 16), ld128(cend - 16));
                if (len > 32)
                    _mm_store_si128((__m128i *)(void *)(pad + 16), ld128(buf + 16));
            }
#else
            memset(pad, 0, sizeof(pad));
            memcpy(pad, b, (size_t)(cend - b));
#endif
            l = pad + (l - b);
            o->off = (uintptr_t)pad - (uintptr_t)(b - buf);
            lim = pad + FAST_PAD;
            cend = pad + sizeof(pad);
            continue;
        }
        c0 = (unsigned char)*l;
        if (SW_UNLIKELY(c0 == '\r')) { /* the blank line (l[1] is at hand, see above) */
            if (l[1] != '\n')
                return 0;
            p = (size_t)((uintptr_t)l + 1 - o->off);
            if (p == 0)
                __builtin_unreachable(); /* (lets the callers' test for 0 go) */
            return p;
        }
        n = CTZ32(nonletter16(l) | 0x10000u); /* l[n] is ':' when the name is letters, '-' */
        if (SW_UNLIKELY(l[n] != ':')) {
            /* A digit (sw8): the name again with the wider class, else the general form. */
            if ((unsigned)(unsigned char)l[n] - '0' > 9u)
                goto other;
            n = CTZ32(name16(l) | 0x10000u);
            if (l[n] != ':')
                goto other;
        }
        /* The value's first control byte in its first 16 bytes, or its 17th byte: the bits
           below the lowest clear bit of a value16() mask go, and that bit is set. */
        v = l + n + 1;
        cr = v + CTZ32(value16(v) + 1); /* cr + 1 < l + FAST_ROOM */
        if (SW_UNLIKELY(ld16(cr) != ld16("\r\n"))) {
            if (cr != v + 16)
                goto other; /* HT, a bare LF, the zeros after a copy, or refused */
            /* A value of 16 bytes or more whose 17th byte does not begin a CRLF. */
            for (q = cr;; q += 16) {
                if (cend - q < 16) {
                    if (q >= cend || (m = le16(cend - 16, 0x1f) >> (16 - (cend - q))) == 0)
                        goto other;
                    cr = q + CTZ32(m);
                    break;
                }
                if ((m = value16(q) + 1) != 0x10000u) {
                    cr = q + CTZ32(m);
                    break;
                }
            }
            if (cr + 1 >= cend || ld16(cr) != ld16("\r\n"))
                goto other;
        }
        if (SW_UNLIKELY(kind_first[n] == (unsigned char)(c0 | 0x20))) {
            /* The value v[0..cr - v) has no control byte (no HT either) and ends at a CR: its
               OWS is SPs, and no scan of it passes cr. */
            v += *v == ' '; /* usually one SP */
            if (SW_UNLIKELY(*v == ' '))
                while (*v == ' ')
                    v++;
            ve = cr;
            if (n == 4 && EQ32(l, "host")) { /* fast_value()'s NK_HOST */
                if (req && !(o->f & SEEN_CAP(NK_HOST))) {
                    while (ve > v && ve[-1] == ' ')
                        ve--;
                    o->cap_i[0] = (size_t)((uintptr_t)v - o->off);
                    o->cap_n[0] = cr - v >= SW_HTTP_HOST_MAX ? 0 : (size_t)(ve - v);
                    if (o->cap_n[0] != 0)
                        o->f |= SEEN_CAP(NK_HOST);
                }
            } else if (n == 14 && EQ64(l, "content-") && EQ64(l + 6, "t-length")) {
                /* fast_value()'s NK_CL; *ve is no digit */
                uint64_t x = 0;
                const char *d = v;
                unsigned c, fl = F_CL | F_CLDIG;
                if (o->f & F_CL)
                    return 0;
                for (; (c = (unsigned)(unsigned char)*d - '0') <= 9u; d++)
                    x = x * 10 + c;         /* wraps only past 19 digits, given up below */
                if (SW_UNLIKELY(d != ve)) { /* SPs after the digits, or refused */
                    for (q = d; *q == ' ';)
                        q++;
                    if (q != ve)
                        return 0;
                    fl |= F_CLWS;
                }
                if ((size_t)(d - v) - 1 >= 19)
                    return 0; /* no digit, or more than 19 */
                o->f |= fl;
                o->cl = x;
            } else if (n == 10 && EQ64(l, "connecti") && EQ16(l + 8, "on") &&
                       ((ve - v == 10 && EQ64(v, "keep-ali") && EQ16(v + 8, "ve")) ||
                        (ve - v == 5 && EQ32(v, "clos") && EQ8(v + 4, "e")))) {
                o->f |= ve - v == 10 ? F_KA : F_CLOSE; /* fast_token()'s usual two */
            } else if (!fast_value(o, l, n, v, ve, req)) {
                return 0;
            }
        }
        l = cr + 2;
    }
other:
    return fast_lines_cold(buf, (size_t)((uintptr_t)l - o->off), len, req, o);
}

/*
 * The rest of fast_lines() from the line at buf[s], one that needs fast_line_slow(): the same
 * loop on the call's bytes with checked runs.
 */
__attribute__((noinline)) static size_t fast_lines_cold(const char *buf, size_t s, size_t len,
                                                        bool req, struct fast_hdrs *o)
{
    size_t r;

    o->off = (uintptr_t)buf;
    while (s < len)
        if ((r = fast_line_slow(buf, s, len, req, o)) >= FAST_BLANK)
            return r - FAST_BLANK;
        else
            s = r;
    return 0;
}

/* Fills a HEAD event (what ev_clear() + head_done() put in it). */
static inline __attribute__((always_inline)) void fast_event(struct sw_http_event *ev,
                                                             const char *buf, size_t lf, int status,
                                                             enum sw_http_method m, bool ka,
                                                             size_t msg_end)
{
    ev->type = SW_HTTP_EV_HEAD;
    ev->err = SW_HTTP_ERR_NONE;
    ev->offset = lf + 1;
    ev->insert_at = buf[lf - 1] == '\r' ? lf - 1 : lf;
    ev->line_end = SW_HTTP_NO_OFFSET;
    ev->status = status;
    ev->method = m;
    ev->keep_alive = ka;
    ev->at_eof = false;
    ev->message = msg_end != 0;
    ev->msg_end = msg_end;
}

/* fast_event(), or for a brief event (see sw_http_feed_request()) only its type, err, status,
   method and message. */
static inline __attribute__((always_inline)) void
fast_event_of(struct sw_http_event *ev, bool brief, const char *buf, size_t lf, int status,
              enum sw_http_method m, bool ka, size_t msg_end)
{
    if (SW_LIKELY(brief)) {
        ev->type = SW_HTTP_EV_HEAD;
        ev->err = SW_HTTP_ERR_NONE;
        ev->status = status;
        ev->method = m;
        ev->message = msg_end != 0;
        return;
    }
    fast_event(ev, buf, lf, status, m, ka, msg_end);
}

static size_t feed_slow(struct sw_http *h, const char *buf, size_t len, unsigned flags,
                        struct sw_http_event *ev);

/* Stores a capture slot the fast path found (i: index in fast_hdrs.cap_i), or empties it. */
#define PUT_CAP(field, i)                                                                          \
    do {                                                                                           \
        size_t n_ = (o->f & (SEEN_CAP(NK_HOST) << (i))) ? o->cap_n[i] : 0;                         \
        if (n_ != 0)                                                                               \
            copy_cap(r->field, buf + o->cap_i[i], n_);                                             \
        r->field##_len = (uint16_t)n_;                                                             \
    } while (0)

/*
 * The request line "METHOD /target HTTP/1.x" of a method other than GET (len >= 16), into o
 * (m, mlen, ts). False: give up.
 */
__attribute__((noinline)) static bool fast_method(const char *buf, struct fast_hdrs *o)
{
    /* [A-Z-]+ SP, one of methods[] (len >= 16: buf[0..12] may be read) */
    size_t mlen;
    int mi;

    for (mlen = 0; mlen <= METHOD_LONGEST; mlen++)
        if (!((buf[mlen] >= 'A' && buf[mlen] <= 'Z') || buf[mlen] == '-'))
            break;
    if (mlen == 0 || buf[mlen] != ' ' || (mi = method_index(buf, mlen)) < 0)
        return false;
    o->m = method_enum((unsigned)mi);
    o->mlen = (unsigned)mlen;
    o->ts = mlen + 1;
    return o->m != SW_HTTP_M_CONNECT;
}

/*
 * The request captures the fast path found (r != NULL, opts without header names): what
 * req_reset() and the scanner leave. `up`, `ka`: the upgrade and keep_alive() of the message.
 */
static inline __attribute__((always_inline)) void fast_captures(struct sw_http_req *r, bool refs,
                                                                const char *buf,
                                                                const struct fast_hdrs *o, bool up,
                                                                bool ka)
{
    size_t t = o->te - o->ts, hn = o->cap_n[0];
    bool cut = t > SW_HTTP_TARGET_MAX - 1;

    r->method = o->m;
    if (SW_LIKELY(o->m == SW_HTTP_M_GET)) {
        memcpy(r->method_text, "GET", 4);
    } else { /* buf has 16 bytes or more */
        _Static_assert(sizeof(r->method_text) == 16, "one 16-byte copy");
        memcpy(r->method_text, buf, 16);
        r->method_text[o->mlen] = '\0';
    }
    r->method_len = (uint8_t)o->mlen;
    r->http_minor = (uint8_t)o->minor;
    r->target_truncated = false;
    r->expect_continue = (o->f & SEEN_EXPECT) != 0;
    r->upgrade = up;
    r->keep_alive = ka;
    r->headers_truncated = false;
    r->path_valid = true;
    if (SW_UNLIKELY(cut)) {
        t = SW_HTTP_TARGET_MAX - 1;
        r->target_truncated = true;
        r->path_valid = false;
    }
    r->target_len = (uint16_t)t;
    r->host_len = (uint16_t)hn;
    r->path_len = (uint16_t)o->pe;
    r->path_suffix = (uint16_t)o->dot;
    if (refs) {
        r->target_ref = buf + o->ts;
        r->host_ref = hn ? buf + o->cap_i[0] : NULL;
    } else {
        copy_cap(r->target, buf + o->ts, t);
        if (hn)
            copy_cap(r->host, buf + o->cap_i[0], hn);
        r->target_ref = r->host_ref = NULL;
    }
    /* sw8_len, corr_len, sw8x_len and headers_len 0 in one store (GCC 12 makes three). */
    _Static_assert(
        offsetof(struct sw_http_req, corr_len) == offsetof(struct sw_http_req, sw8_len) + 2 &&
            offsetof(struct sw_http_req, sw8x_len) == offsetof(struct sw_http_req, sw8_len) + 4 &&
            offsetof(struct sw_http_req, headers_len) == offsetof(struct sw_http_req, sw8_len) + 6,
        "four lengths in a row");
    memset(&r->sw8_len, 0, 4 * sizeof(uint16_t));
    if (SW_UNLIKELY(o->f & (SEEN_CAP(NK_SW8) | SEEN_CAP(NK_CORR) | SEEN_CAP(NK_SW8X)))) {
        PUT_CAP(sw8, 1);
        PUT_CAP(corr, 2);
        PUT_CAP(sw8x, 3);
    }
}

/*
 * The general end of fast_request() (a body, an upgrade, Transfer-Encoding, sw8 captures, no
 * fold_message, no captures): what head_done() does, the captures, the event; or give up.
 */
__attribute__((noinline)) static size_t fast_request_rest(struct sw_http *h, const char *buf,
                                                          size_t len, struct sw_http_event *ev,
                                                          const struct fast_hdrs *o, size_t lf)
{
    unsigned f = o->f;
    bool up, ka, fold;

    if (SW_UNLIKELY(f & F_TE) && ((f & F_CL) || !(f & F_CHUNKED)))
        return feed_slow(h, buf, len, h->fflags, ev); /* head_done() refuses it */
    if (SW_UNLIKELY(lf >= max_head_of(h)))
        return feed_slow(h, buf, len, h->fflags, ev); /* the head does not end within the limit */
    /* (o->cl is 0 without a Content-Length.) */
    up = (f & (F_UPG | F_CUP)) == (F_UPG | F_CUP);             /* CONNECT was given up on */
    ka = !up && (o->minor ? !(f & F_CLOSE) : (f & F_KA) != 0); /* keep_alive() */
    fold = !((f & F_CHUNKED) || o->cl != 0 || up || !fold_of(h));
    h->seen_head = true;
    if (!fold) {
        /* An event of this message comes later: what ev_fill_msg() reads. */
        h->mflags = (uint16_t)(f | (ka ? F_KEEP : 0));
        h->cur_method = (uint8_t)o->m;
        h->upgrade_after = up;
        if ((f & F_CHUNKED) || o->cl != 0) { /* a body */
            h->remaining = o->cl;            /* chunked: no Content-Length, 0 */
            h->st = (f & F_CHUNKED) ? ST_CSIZE0 : ST_CL;
            h->phase = PH_BODY;
        } else { /* phase and st stay PH_IDLE and ST_IDLE */
            h->pending = up ? PEND_UPGRADE : PEND_MESSAGE;
        }
    }
    if (h->req)
        fast_captures(h->req, (h->fopts & FO_REFS) != 0, buf, o, up, ka);
    FAST_HIT();
    fast_event(ev, buf, lf, 0, o->m, ka, fold ? lf + 1 : 0);
    return lf + 1;
}

/*
 * The whole-head fast path for a request parser, for a call that begins between messages (see
 * the banner): when the head at buf[0] ends in the call and within the head size limit, checks
 * it in one pass and gives what scan() gives for it (the HEAD event, the captures, the framing
 * state, the return value); else gives up with nothing changed and feed_slow() takes the call.
 * A "\r" that SW_HTTP_FEED_HOLD would hold back does not matter: a head ending in the call ends
 * before it (its last byte is a LF). Here the usual head (a message without body, captures,
 * fold_message); fast_request_rest() does the others.
 */
SW_HOT_PATH __attribute__((noinline)) size_t sw_http_fast_request(struct sw_http *h,
                                                                  const char *buf, size_t len,
                                                                  struct sw_http_event *ev,
                                                                  bool brief)
{
    struct sw_http_req *r = h->req;
    struct fast_hdrs o;
    size_t hs, lf;
    uint64_t ver;
    bool ka;

    if (FAST_OFF()) /* the test switch (sw_http_feed_request() calls here directly) */
        goto slow;
    o.m = SW_HTTP_M_GET;
    o.mlen = 3;
    o.ts = 4;
    if (SW_UNLIKELY(ld32(buf) != ld32("GET ")) && !fast_method(buf, &o))
        goto slow;
    if (buf[o.ts] != '/' || (o.te = fast_target(buf, o.ts, len, &o.pe, &o.dot)) == 0 ||
        len - o.te < 11)
        goto slow;
    /* " HTTP/1.0" or " HTTP/1.1" (they differ in the last byte), then CRLF or LF. */
    ver = ld64(buf + o.te + 1) ^ ld64("HTTP/1.0");
    if (ver & ~(1ull << 56))
        goto slow;
    o.minor = (unsigned)(ver >> 56);
    if (ld16(buf + o.te + 9) == ld16("\r\n"))
        hs = o.te + 11;
    else if (buf[o.te + 9] == '\n')
        hs = o.te + 10;
    else
        goto slow;
    o.f = 0;
    o.cap_n[0] = 0;
    o.cl = 0;
    if ((lf = fast_lines(buf, hs, len, r != NULL, &o)) == 0)
        goto slow;
    if (SW_UNLIKELY((o.f & (F_TE | F_CHUNKED | F_UPG | SEEN_CAP(NK_SW8) | SEEN_CAP(NK_CORR) |
                            SEEN_CAP(NK_SW8X))) != 0 ||
                    o.cl != 0 || lf >= h->fast_max))
        return fast_request_rest(h, buf, len, ev, &o, lf); /* or beyond the limit, or no fold */

    /* Accepted, a message without body: what head_done() does, the captures, the event. */
    ka = o.minor ? !(o.f & F_CLOSE) : (o.f & F_KA) != 0; /* keep_alive() */
    h->seen_head = true;
    fast_captures(r, (h->fopts & FO_REFS) != 0, buf, &o, false, ka);
    FAST_HIT();
    fast_event_of(ev, brief, buf, lf, 0, o.m, ka, lf + 1);
    return lf + 1;
slow:
    return feed_slow(h, buf, len, h->fflags, ev);
}

/*
 * The general end of fast_response(): what head_done() does, and the fold of feed_slow(); or
 * give up.
 */
__attribute__((noinline)) static size_t fast_response_rest(struct sw_http *h, const char *buf,
                                                           size_t len, struct sw_http_event *ev,
                                                           const struct fast_hdrs *o, size_t lf)
{
    unsigned f = o->f, status = o->status;
    uint64_t cl = o->cl;
    enum sw_http_method m = SW_HTTP_M_GET;
    size_t end = lf + 1;
    bool up, ka, skip;

    if (SW_UNLIKELY((f & F_TE) && (f & F_CL)))
        return feed_slow(h, buf, len, h->fflags, ev); /* head_done() refuses it */
    if (SW_UNLIKELY(lf >= max_head_of(h)))
        return feed_slow(h, buf, len, h->fflags, ev); /* the head does not end within the limit */
    if (h->q_len) {                                   /* queue_pop() */
        m = (enum sw_http_method)h->queue[h->q_head];
        h->q_head = (uint8_t)((h->q_head + 1) % SW_HTTP_PENDING_MAX);
        h->q_len--;
    }
    up = status == 101 || (m == SW_HTTP_M_CONNECT && status - 200u < 100u);
    skip = up || m == SW_HTTP_M_HEAD || status == 204 || status == 304;
    /* keep_alive(): without a framed body, the body needs EOF */
    ka = !up && (o->minor ? !(f & F_CLOSE) : (f & F_KA) != 0) &&
         (skip || (f & (F_CHUNKED | F_CL)) != 0);
    h->seen_head = true;
    FAST_HIT();
    if (!up && fold_of(h) && (skip || ((f & (F_CHUNKED | F_CL)) == F_CL && len - end >= cl))) {
        /* The message is complete: no body, or its Content-Length body is in the call (phase
           and st stay idle). */
        fast_event(ev, buf, lf, (int)status, m, ka, end + (skip ? 0 : (size_t)cl));
        return end + (skip ? 0 : (size_t)cl);
    }
    /* An event of this message comes later: what ev_fill_msg() reads. */
    h->cur_method = (uint8_t)m;
    h->mflags = (uint16_t)(f | (skip ? F_SKIP : 0) | (ka ? F_KEEP : 0));
    h->status = (int)status;
    if (skip || ((f & (F_CHUNKED | F_CL)) == F_CL && cl == 0)) {
        h->pending = up ? PEND_UPGRADE : PEND_MESSAGE; /* phase and st stay idle */
    } else {
        h->remaining = (f & F_CHUNKED) ? 0 : cl;
        h->st = (f & F_CHUNKED) ? ST_CSIZE0 : (f & F_CL) ? ST_CL : ST_EOF;
        h->phase = PH_BODY;
    }
    fast_event(ev, buf, lf, (int)status, m, ka, 0);
    return end;
}

/*
 * The whole-head fast path for a response parser (see fast_request()). Here the usual response:
 * its Content-Length body in the call, fold_message, not to a HEAD or CONNECT request, not 101,
 * 204 or 304; fast_response_rest() does the others.
 */
SW_HOT_PATH __attribute__((noinline)) size_t sw_http_fast_response(struct sw_http *h,
                                                                   const char *buf, size_t len,
                                                                   struct sw_http_event *ev,
                                                                   bool brief)
{
    struct fast_hdrs o;
    uint64_t ver = ld64(buf) ^ ld64("HTTP/1.0");
    /* " ddd" XOR " 000": a zero byte, then three bytes of 0..9 (0..15 and no carry out of the
       low nibble when 6 is added). */
    uint32_t sd = ld32(buf + 8) ^ 0x30303020u;
    size_t s, p, lf, end;
    unsigned status;
    enum sw_http_method m;
    bool ka;

    if (FAST_OFF() || (ver & ~(1ull << 56)) || (sd & 0xf0f0f0ffu) ||
        ((sd + 0x06060600u) & 0xf0f0f000u))
        goto slow;
    o.minor = (unsigned)(ver >> 56);
    if (SW_LIKELY(sd == 0x200u)) { /* " 200": one compare instead of the digits' arithmetic */
        o.status = status = 200;
    } else {
        o.status = status = (sd >> 8 & 0xfu) * 100u + (sd >> 16 & 0xfu) * 10u + (sd >> 24);
        if (status - 100u < 100u && status != 101)
            goto slow; /* interim: scan() goes on to the final response */
    }
    if (buf[12] == ' ') { /* the reason: value bytes */
        /* Usually its CRLF at its first control byte in 16 bytes, or at its 17th byte (see
           fast_lines()). */
        if (SW_LIKELY(len >= 31) &&
            ld16(buf + (p = 13 + CTZ32(value16(buf + 13) + 1))) == ld16("\r\n")) {
            s = p + 2;
        } else {
            p = find_le(buf, 13, len, 0x1f);
            if (p + 1 >= len)
                goto slow;
            if (ld16(buf + p) == ld16("\r\n"))
                s = p + 2;
            else if (buf[p] == '\n')
                s = p + 1;
            else
                goto slow; /* HT (the state machine takes it), or refused */
        }
    } else if (ld16(buf + 12) == ld16("\r\n")) {
        s = 14;
    } else if (buf[12] == '\n') {
        s = 13;
    } else {
        goto slow;
    }
    o.f = 0;
    o.cl = 0;
    if ((lf = fast_lines(buf, s, len, false, &o)) == 0)
        goto slow;
    end = lf + 1;
    if (SW_UNLIKELY((o.f & (F_TE | F_CHUNKED | F_CL)) != F_CL ||
                    (status != 200 && (status == 101 || status == 204 || status == 304)) ||
                    lf >= h->fast_max))
        return fast_response_rest(h, buf, len, ev, &o, lf); /* or beyond the limit, or no fold */
    m = SW_HTTP_M_GET;
    if (h->q_len) { /* queue_pop(), unless the request was HEAD or CONNECT */
        m = (enum sw_http_method)h->queue[h->q_head];
        if (SW_UNLIKELY(m == SW_HTTP_M_HEAD || m == SW_HTTP_M_CONNECT))
            return fast_response_rest(h, buf, len, ev, &o, lf);
        h->q_head = (uint8_t)((h->q_head + 1) % SW_HTTP_PENDING_MAX);
        h->q_len--;
    }

    /* Accepted, a Content-Length body: what head_done() does (queue_pop(), keep_alive()). */
    ka = o.minor ? !(o.f & F_CLOSE) : (o.f & F_KA) != 0;
    h->seen_head = true;
    FAST_HIT();
    if (SW_LIKELY(len - end >= o.cl)) {
        /* The body is in the call: the fold of feed_slow() (phase and st stay idle). */
        fast_event_of(ev, brief, buf, lf, (int)status, m, ka, end + (size_t)o.cl);
        return end + (size_t)o.cl;
    }
    /* The body comes later (o.cl > 0): what msg_done() and ev_fill_msg() read. */
    h->cur_method = (uint8_t)m;
    h->mflags = (uint16_t)(o.f | (ka ? F_KEEP : 0));
    h->status = (int)status;
    h->remaining = o.cl;
    h->st = ST_CL;
    h->phase = PH_BODY;
    fast_event_of(ev, brief, buf, lf, (int)status, m, ka, 0);
    return end;
slow:
    return feed_slow(h, buf, len, h->fflags, ev);
}

/* ---- API --------------------------------------------------------------------------------- */

void sw_http_opts_init(struct sw_http_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_head = SW_HTTP_HEAD_MAX;
    o->headers_threshold = SW_HTTP_HEADERS_MAX - 1;
}

int sw_http_opts_add_header(struct sw_http_opts *o, const char *name, size_t len)
{
    if (len == 0 || len >= SW_HTTP_HDR_NAME_MAX)
        return -EINVAL;
    if (o->header_count >= SW_HTTP_HDR_NAMES)
        return -ENOSPC;
    for (size_t i = 0; i < len; i++)
        o->header_names[o->header_count][i] = lower(name[i]);
    o->header_names[o->header_count][len] = '\0';
    o->header_count++;
    return 0;
}

void sw_http_init(struct sw_http *h, enum sw_http_dir dir, const struct sw_http_opts *opts,
                  struct sw_http_req *req)
{
    memset(h, 0, sizeof(*h));
    h->dir = (uint8_t)dir;
    h->opts = opts ? opts : &default_opts;
    h->max_head = h->opts->max_head;
    if (h->max_head == 0 || h->max_head > SW_HTTP_HEAD_MAX)
        h->max_head = SW_HTTP_HEAD_MAX;
    h->nofast = h->opts->header_count != 0;
    h->fopts =
        (uint8_t)((h->opts->fold_message ? FO_FOLD : 0u) | (h->opts->capture_refs ? FO_REFS : 0u));
    h->req = dir == SW_HTTP_REQUEST ? req : NULL;
    /* The usual end of the fast path folds the message (and, for requests, captures): with
       fast_max 0 every head takes the general end (fast_request_rest, fast_response_rest). */
    if (h->opts->fold_message && (dir == SW_HTTP_RESPONSE || h->req))
        h->fast_max = h->max_head;
    h->st = ST_IDLE;
    if (h->req)
        req_reset(h->req);
}

/*
 * Bytes of a Content-Length body (len > 0, no event held): what feed_slow() does with them,
 * ev_clear() and msg_done() in one go.
 */
static inline __attribute__((always_inline)) size_t fast_cl_body(struct sw_http *h, size_t len,
                                                                 struct sw_http_event *ev)
{
    uint64_t left = h->remaining;

    /* (last_byte is not set: a head that ends at the first byte of a call reads it, and the
       calls before that one scanned the head's first bytes.) */
    if (len < left) { /* the body goes on */
        h->remaining = left - len;
        ev_clear(ev);
        return len;
    }
    h->remaining = 0;
    ev->type = h->upgrade_after ? SW_HTTP_EV_UPGRADE : SW_HTTP_EV_MESSAGE;
    ev->err = SW_HTTP_ERR_NONE;
    ev->offset = (size_t)left;
    ev->insert_at = SW_HTTP_NO_OFFSET;
    ev->line_end = SW_HTTP_NO_OFFSET;
    ev->msg_end = 0;
    ev->status = h->status; /* what ev_fill_msg() puts: a request parser's status is 0 */
    ev->method = (enum sw_http_method)h->cur_method;
    ev->keep_alive = (h->mflags & F_KEEP) != 0;
    ev->at_eof = false;
    ev->message = false;
    if (h->upgrade_after) { /* msg_done() */
        h->phase = PH_STOPPED;
        return (size_t)left;
    }
    h->head_bytes = 0;
    h->phase = PH_IDLE;
    h->st = ST_IDLE;
    return (size_t)left;
}

/* sw_http_feed() but for the whole-head fast path. */
__attribute__((noinline)) static size_t feed_slow(struct sw_http *h, const char *buf, size_t len,
                                                  unsigned flags, struct sw_http_event *ev)
{
    bool counting, capped = false;
    size_t lim = len;

    ev_clear(ev);
    if (h->phase == PH_STOPPED)
        return len;
    if (h->pending != PEND_NONE) {
        enum pending pe = (enum pending)h->pending;

        h->pending = PEND_NONE;
        if (pe == PEND_MESSAGE) {
            ev_fill_msg(h, ev, SW_HTTP_EV_MESSAGE, 0);
            return 0;
        }
        if (pe == PEND_UPGRADE) {
            ev_fill_msg(h, ev, SW_HTTP_EV_UPGRADE, 0);
            h->phase = PH_STOPPED;
            return 0;
        }
        return stop(h, ev, SW_HTTP_EV_ERROR, SW_HTTP_ERR_SYNTAX, 0);
    }
    if (len == 0)
        return 0;
    if (h->phase == PH_BODY && h->st == ST_CL) { /* a Content-Length body: what scan() does */
        size_t take = len < h->remaining ? len : (size_t)h->remaining;
        h->remaining -= take;
        if (h->remaining == 0)
            return msg_done(h, buf, take, ev);
        h->last_byte = (uint8_t)buf[len - 1];
        return len;
    }

    counting = h->phase == PH_IDLE || h->phase == PH_HEAD;
    if (counting) {
        uint32_t maxh = max_head_of(h);

        /* A CR that ended the previous call must be followed by its LF (checked before the
           size limit, as an unsplit stream would see this CR before reaching the limit). */
        if (h->st == ST_CR && buf[0] != '\n')
            return fail(h, ev, SW_HTTP_ERR_SYNTAX, len);
        if (h->head_bytes >= maxh)
            return stop(h, ev, SW_HTTP_EV_ERROR, SW_HTTP_ERR_TOO_LARGE, len);
        if (lim > maxh - h->head_bytes) {
            lim = maxh - h->head_bytes;
            capped = true;
        }
        /* Hold back a trailing "\r": it may begin the blank line that ends the head (any CR
           is held; when it ends a header line instead, or turns out to be a bare CR, holding
           it only costs a short write). */
        if ((flags & SW_HTTP_FEED_HOLD) && !capped && buf[lim - 1] == '\r' &&
            (lim >= 2 || h->phase == PH_HEAD))
            lim--;
    }
    size_t n = scan(h, buf, lim, len, counting, capped, ev);
    /* Folding (opts->fold_message): a response head whose Content-Length body is all at hand
       completes its message in this call too, as the CL fast path above would next time. */
    if (ev->type == SW_HTTP_EV_HEAD && h->phase == PH_BODY && h->st == ST_CL &&
        h->dir == SW_HTTP_RESPONSE && !h->upgrade_after && len - n >= h->remaining && fold_of(h)) {
        n += (size_t)h->remaining;
        h->remaining = 0;
        h->last_byte = (uint8_t)buf[n - 1];
        h->head_bytes = 0;
        h->phase = PH_IDLE;
        h->st = ST_IDLE;
        ev->message = true;
        ev->msg_end = n;
    }
    return n;
}

SW_HOT size_t sw_http_feed(struct sw_http *h, const char *buf, size_t len, unsigned flags,
                           struct sw_http_event *ev)
{
    /* The usual call: a head begins at buf[0] (head_bytes, phase, st and pending all zero: no
       empty line before it was consumed) and the fast path is on (nofast zero): one load for
       the five. */
    if (sw_http_fast_ready(h, len) && !FAST_OFF()) {
        h->fflags = (uint8_t)flags; /* for feed_slow() if it gives up */
        return h->dir == SW_HTTP_REQUEST ? sw_http_fast_request(h, buf, len, ev, false)
                                         : sw_http_fast_response(h, buf, len, ev, false);
    }
    /* The next usual one: bytes of a Content-Length body (what feed_slow() does for them). */
    if (h->phase == PH_BODY && h->st == ST_CL && h->pending == PEND_NONE && len != 0 && !FAST_OFF())
        return fast_cl_body(h, len, ev);
    return feed_slow(h, buf, len, flags, ev);
}

void sw_http_eof(struct sw_http *h, struct sw_http_event *ev)
{
    ev_clear(ev);
    if (h->phase == PH_STOPPED)
        return;
    if (h->pending != PEND_NONE) {
        /* An event still owed for the last bytes: the caller should have looped; give it. */
        sw_http_feed(h, NULL, 0, 0, ev);
        if (ev->type != SW_HTTP_EV_MESSAGE)
            return;
        h->phase = PH_STOPPED;
        return;
    }
    if (h->phase == PH_BODY) {
        if (h->st == ST_EOF) {
            ev_fill_msg(h, ev, SW_HTTP_EV_MESSAGE, 0);
            ev->keep_alive = false;
            ev->at_eof = true;
        } else {
            ev->type = SW_HTTP_EV_ERROR;
            ev->err = SW_HTTP_ERR_EOF;
        }
    } else if (h->phase == PH_HEAD) {
        ev->type = SW_HTTP_EV_ERROR;
        ev->err = SW_HTTP_ERR_EOF;
    }
    h->phase = PH_STOPPED;
}

void sw_http_expect_head_response(struct sw_http *h)
{
    sw_http_push_request(h, SW_HTTP_M_HEAD);
}

int sw_http_partial_status(const struct sw_http *h)
{
    if (h->dir != SW_HTTP_RESPONSE || h->phase != PH_HEAD)
        return 0;
    /* The status digits are accumulated as the status line is read. */
    return h->status >= 100 && h->status <= 999 ? h->status : 0;
}

bool sw_http_stopped(const struct sw_http *h)
{
    return h->phase == PH_STOPPED;
}
