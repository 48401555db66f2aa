/*
 * fuzz_logs.c - libFuzzer target for the reporter's log records and line assembly
 * (agent/reporter/lineasm.c): the input is a max line length byte then pieces, each a u16
 * length and that many bytes, given both to sw_logrec_parse (a record) and, as text, to the
 * assembler (with a gap or not). Every line emitted must be NUL-terminated valid UTF-8 no
 * longer than the assembler's bound.
 */
#include "common.h"

#include "lineasm.h"

#include <stdlib.h>
#include <string.h>

static size_t g_max;

static bool utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
        if (c == 0 || (c >= 0x80 && c < 0xc2) || c > 0xf4 || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

static void on_line(void *arg, const struct sw_line *l)
{
    (void)arg;
    if (l->text[l->len] != '\0' || l->len > 3 * g_max + sizeof(SW_LINEASM_CUT_MARK) ||
        l->len == 0 || !utf8_ok((const uint8_t *)l->text, l->len))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    g_max = 1 + data[0] % 64;
    struct sw_lineasm a;
    if (sw_lineasm_init(&a, g_max) != 0)
        return 0;
    size_t at = 1;
    while (at + 2 <= size) {
        size_t n = (size_t)data[at] | (size_t)data[at + 1] << 8;
        at += 2;
        if (n > size - at)
            n = size - at;
        int fd;
        int64_t ms;
        bool gap;
        struct sw_lineasm_ctx c;
        const uint8_t *t;
        uint32_t tl;
        uint8_t *copy = malloc(n ? n : 1); /* exact size: reads past the end are caught */
        if (!copy)
            break;
        memcpy(copy, data + at, n);
        if (sw_logrec_parse(copy, (uint32_t)n, &fd, &ms, &gap, &c, &t, &tl) == 0) {
            if ((fd != 1 && fd != 2) || tl == 0 || t < copy || t + tl != copy + n)
                abort();
            sw_lineasm_push(&a, t, tl, ms, c.has ? &c : NULL, gap, on_line, NULL);
        } else {
            sw_lineasm_push(&a, copy, n, 0, NULL, n & 1, on_line, NULL);
        }
        free(copy);
        at += n;
    }
    sw_lineasm_flush(&a, on_line, NULL);
    sw_lineasm_free(&a);
    return 0;
}
