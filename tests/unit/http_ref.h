/*
 * http_ref.h - reference answers for the HTTP parser's tests (test_http, fuzz_http and, through
 * it, test_http_diff): simple loops the parser's results are compared with.
 */
#ifndef SW_TEST_HTTP_REF_H
#define SW_TEST_HTTP_REF_H

#include <stddef.h>

/*
 * The path of a target as the tracer finds it (bytes before the first '?' or '#') and where its
 * suffix begins (just past its last '.' when no '/' follows it; 0: none), as struct
 * sw_http_req's path_len and path_suffix (http.h).
 */
static inline void ref_path(const char *t, size_t n, size_t *plen, size_t *suf)
{
    size_t i = 0, dot = 0, slash = 0;

    for (; i < n && t[i] != '?' && t[i] != '#'; i++) {
        if (t[i] == '.')
            dot = i + 1;
        else if (t[i] == '/')
            slash = i + 1;
    }
    *plen = i;
    *suf = dot > slash ? dot : 0;
}

#endif
