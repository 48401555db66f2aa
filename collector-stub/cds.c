/*
 * cds.c - the stub's ConfigurationDiscoveryService answers (--cds FILE), with OAP's rules
 * (shared/reference/profiling-cds-meters.md §3): the configuration of the service is the
 * file's `key=value` lines (read again at every call, so a test edits it while the stub runs;
 * `#` comments and blank lines skipped); its UUID is the SHA-512 hex of the concatenated
 * `key:value` texts, or of "EMPTY" when there is none. A call with that UUID is answered with
 * no command (the agent is up to date); any other gets one ConfigurationDiscoveryCommand:
 * SerialNumber, UUID, then each key and value. A line `!garbage` makes the answer bytes that
 * do not parse as Commands, for a client's bad-input tests.
 */
#include "cds.h"

#include "common/Command.pb-c.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CDS_MAX_KEYS 64
#define CDS_LINE_MAX 65536

static void sha512_hex(const char *text, size_t n, char out[129])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[SHA512_DIGEST_LENGTH];
    SHA512((const unsigned char *)text, n, md);
    for (int i = 0; i < SHA512_DIGEST_LENGTH; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[128] = '\0';
}

int stub_cds_answer(const char *file, const char *uuid, uint8_t **out, size_t *len)
{
    static unsigned long serial;
    char *keys[CDS_MAX_KEYS], *vals[CDS_MAX_KEYS];
    size_t n = 0;
    bool garbage = false;
    char *line = malloc(CDS_LINE_MAX);
    char *digest_text = NULL;
    size_t dlen = 0;
    int rc = -1;

    *out = NULL;
    *len = 0;
    if (!line)
        return -1;
    FILE *f = file ? fopen(file, "r") : NULL;
    while (f && n < CDS_MAX_KEYS && fgets(line, CDS_LINE_MAX, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (strcmp(line, "!garbage") == 0) {
            garbage = true;
            continue;
        }
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        keys[n] = strdup(line);
        vals[n] = strdup(eq + 1);
        size_t add = strlen(keys[n]) + 1 + strlen(vals[n]);
        char *d = realloc(digest_text, dlen + add + 1);
        if (d) {
            digest_text = d;
            dlen += (size_t)sprintf(digest_text + dlen, "%s:%s", keys[n], vals[n]);
        }
        n++;
    }
    if (f)
        fclose(f);
    free(line);
    if (garbage) {
        static const uint8_t junk[] = {0x0f, 0xff, 0xff, 'g', 'a', 'r', 'b', 'a', 'g', 'e'};
        *out = malloc(sizeof(junk));
        if (*out) {
            memcpy(*out, junk, sizeof(junk));
            *len = sizeof(junk);
            rc = 0;
        }
        goto done;
    }
    char sum[129];
    if (n == 0)
        sha512_hex("EMPTY", 5, sum);
    else
        sha512_hex(digest_text ? digest_text : "", dlen, sum);
    Skywalking__V3__Commands cmds = SKYWALKING__V3__COMMANDS__INIT;
    Skywalking__V3__Command cmd = SKYWALKING__V3__COMMAND__INIT;
    Skywalking__V3__Command *cmdp = &cmd;
    Skywalking__V3__KeyStringValuePair kv[CDS_MAX_KEYS + 2];
    Skywalking__V3__KeyStringValuePair *kvp[CDS_MAX_KEYS + 2];
    char sn[32];
    if (!uuid || strcmp(uuid, sum) != 0) {
        snprintf(sn, sizeof(sn), "stub-%lu", ++serial);
        cmd.command = "ConfigurationDiscoveryCommand";
        size_t a = 0;
        skywalking__v3__key_string_value_pair__init(&kv[a]);
        kv[a].key = "SerialNumber";
        kv[a].value = sn;
        a++;
        skywalking__v3__key_string_value_pair__init(&kv[a]);
        kv[a].key = "UUID";
        kv[a].value = sum;
        a++;
        for (size_t i = 0; i < n; i++, a++) {
            skywalking__v3__key_string_value_pair__init(&kv[a]);
            kv[a].key = keys[i];
            kv[a].value = vals[i];
        }
        for (size_t i = 0; i < a; i++)
            kvp[i] = &kv[i];
        cmd.n_args = a;
        cmd.args = kvp;
        cmds.n_commands = 1;
        cmds.commands = &cmdp;
    }
    *len = skywalking__v3__commands__get_packed_size(&cmds);
    *out = malloc(*len ? *len : 1);
    if (*out) {
        skywalking__v3__commands__pack(&cmds, *out);
        rc = 0;
    }
done:
    for (size_t i = 0; i < n; i++) {
        free(keys[i]);
        free(vals[i]);
    }
    free(digest_text);
    return rc;
}
