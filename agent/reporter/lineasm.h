/*
 * lineasm.h - puts lines together from the pieces a process wrote to one fd (SW_REC_LOG
 * records, record.h), for the reporter's logs (logs.c).
 *
 * Reporter side, ordinary code (allocates), single-threaded. The bytes are untrusted and may be
 * anything: text, binary, no newline ever, lines of megabytes. Rules:
 *   - a line ends at '\n' (a '\r' just before it is dropped); an empty line is not emitted;
 *   - a line keeps the time and trace context of the write that carried its first byte;
 *   - a line longer than `max` bytes is cut: its first `max` bytes are emitted at once with
 *     SW_LINEASM_CUT_MARK appended, and the rest up to its '\n' is dropped (counted);
 *   - a partial line is emitted as it is when sw_lineasm_flush is called (the writer was quiet
 *     for a while, the process ended) or when a gap (bytes not captured) comes before the next
 *     piece;
 *   - the text emitted is valid UTF-8 (protobuf strings must be): every byte that is not part
 *     of a well-formed UTF-8 sequence becomes U+FFFD; NUL becomes U+FFFD too.
 */
#ifndef SW_LINEASM_H
#define SW_LINEASM_H

#include "common.h"

#include <stddef.h>

#define SW_LINEASM_ID_MAX 96
#define SW_LINEASM_CUT_MARK " [swagent: line cut]"

/* The trace context of a line (all empty: none). */
struct sw_lineasm_ctx {
    char trace_id[SW_LINEASM_ID_MAX];
    char segment_id[SW_LINEASM_ID_MAX];
    int32_t span_id;
    bool has;
};

/* One complete line, valid UTF-8, NUL-terminated (text[len] == 0). */
struct sw_line {
    const char *text;
    size_t len;
    bool cut; /* longer than max: cut, with the mark */
    int64_t time_ms;
    const struct sw_lineasm_ctx *ctx;
};

typedef void (*sw_lineasm_emit_fn)(void *arg, const struct sw_line *line);

struct sw_lineasm {
    size_t max;      /* bytes of a line kept */
    char *buf;       /* the pending line's bytes (raw), cap max */
    size_t len;      /* pending bytes */
    bool started;    /* a line has begun (len may be 0 after "\r") */
    bool dropping;   /* the current line was cut: drop until '\n' */
    int64_t time_ms; /* of its first byte */
    struct sw_lineasm_ctx ctx;
    char *out;        /* sanitised text, cap 3 * max + mark + 1 */
    uint64_t lines;   /* lines emitted */
    uint64_t cut;     /* lines cut */
    uint64_t dropped; /* bytes dropped from cut lines */
};

/* Sets up an assembler for lines of at most `max` bytes (>= 1); its buffers (4 * max bytes)
 * are allocated with the first bytes pushed. Returns 0. */
int sw_lineasm_init(struct sw_lineasm *a, size_t max);
void sw_lineasm_free(struct sw_lineasm *a);

/*
 * Adds `n` bytes written at `time_ms` with context `ctx` (NULL: none). `gap`: bytes were lost
 * before these (the pending partial line is emitted first). Complete lines go to `emit`.
 */
void sw_lineasm_push(struct sw_lineasm *a, const void *p, size_t n, int64_t time_ms,
                     const struct sw_lineasm_ctx *ctx, bool gap, sw_lineasm_emit_fn emit,
                     void *arg);

/* Emits the pending partial line, if any. */
void sw_lineasm_flush(struct sw_lineasm *a, sw_lineasm_emit_fn emit, void *arg);

/* True when a partial line is pending. */
bool sw_lineasm_pending(const struct sw_lineasm *a);

/*
 * Writes `n` bytes at `in` to `out` as valid UTF-8 (invalid bytes and NUL as U+FFFD; `out`
 * has room for 3 * n bytes). Returns the length written.
 */
size_t sw_utf8_sanitize(char *out, const uint8_t *in, size_t n);

/*
 * Parses one SW_REC_LOG payload (record.h) as untrusted bytes: 0 and the out parameters (the
 * ids as text in *ctx, ctx->has when the record carries them; *text points into payload), or
 * -EBADMSG when it is not exactly one valid record.
 */
int sw_logrec_parse(const void *payload, uint32_t len, int *fd, int64_t *time_ms, bool *gap,
                    struct sw_lineasm_ctx *ctx, const uint8_t **text, uint32_t *text_len);

#endif /* SW_LINEASM_H */
