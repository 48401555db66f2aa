/*
 * fuzz_record.c - libFuzzer target for the reporter's untrusted inputs: segment records
 * (encode.c) and ring images (ring.c consumer side).
 *
 * Input: byte 0 selects the mode.
 *   even: the rest is a segment record payload -> sw_encode_segment (and unpack on success).
 *   odd:  the rest is a ring image: u64 tail, u64 head delta, u64 release_to delta, then the
 *         bytes of the data area from the tail on (wrapping); the consumer loop of the reporter
 *         (peek, skip_stuck, release, recover) runs over it, then a producer reserve/commit.
 * Linked with replay_conf_prop.c, a main() replays corpus files and directories instead (plain
 * gcc, run by ctest), each input in an allocation of exactly its size.
 */
#include "common.h"

#include "encode.h"
#include "record.h"
#include "ring.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "language-agent/Tracing.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sw_ring *ring; /* a real ring file, re-filled for every input */
static uint8_t *image;       /* a second, raw mapping of the same file */
static size_t image_bytes;

static void fuzz_encode(const uint8_t *p, size_t n)
{
    static const struct sw_ring_meta meta = {.pid = 1, .service = "svc", .instance = "inst"};
    uint8_t *out = NULL;
    size_t out_len = 0;
    /* The framed form, appended after an entry already there, agrees with the plain one. */
    static const uint8_t prev[] = {0x0a, 0x00};
    struct sw_obuf ob = {NULL, 0, 0};
    size_t off = 0, flen = 0;
    ob.p = malloc(sizeof(prev));
    if (!ob.p)
        return;
    memcpy(ob.p, prev, sizeof(prev));
    ob.len = ob.cap = sizeof(prev);
    int frc = sw_encode_segment_framed(p, n, &meta, &ob, &off, &flen);
    int rc = sw_encode_segment(p, n, &meta, &out, &out_len);
    if (frc != rc ||
        (rc == 0 &&
         (flen != out_len || memcmp(ob.p + off, out, out_len) != 0 || ob.len != off + flen)) ||
        (rc != 0 && ob.len != sizeof(prev)))
        abort(); /* the framed and the plain encoding disagree */
    if (rc == 0) {
        Skywalking__V3__SegmentCollection *c =
            skywalking__v3__segment_collection__unpack(NULL, ob.len, ob.p);
        if (!c || c->n_segments != 2)
            abort(); /* two entries back to back are not a SegmentCollection of two */
        skywalking__v3__segment_collection__free_unpacked(c, NULL);
    }
    free(ob.p);
    if (rc == 0) {
        Skywalking__V3__SegmentObject *o =
            skywalking__v3__segment_object__unpack(NULL, out_len, out);
        if (!o)
            abort(); /* we packed something protobuf-c cannot read back */
        /* ... or something else than protobuf-c packs of it, byte for byte */
        size_t n2 = skywalking__v3__segment_object__get_packed_size(o);
        uint8_t *again = malloc(n2 ? n2 : 1);
        if (!again || skywalking__v3__segment_object__pack(o, again) != out_len ||
            memcmp(again, out, out_len) != 0)
            abort();
        free(again);
        skywalking__v3__segment_object__free_unpacked(o, NULL);
        free(out);
    }
}

static void setup_ring(void)
{
    char dir[] = "/tmp/swfuzz-ring-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    struct sw_ring_meta m;
    memset(&m, 0, sizeof(m));
    if (sw_ring_create(dir, &m, 0, &ring) != 0)
        abort();
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, sw_ring_name(ring));
    int fd = open(path, O_RDWR);
    if (fd < 0)
        abort();
    image_bytes = SW_RING_HDR_BYTES + sw_ring_capacity(ring);
    image = mmap(NULL, image_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (image == MAP_FAILED)
        abort();
    close(fd);
    /* The file is not needed by name any more. */
    unlink(path);
    rmdir(dir);
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put_u64(size_t off, uint64_t v)
{
    memcpy(image + off, &v, 8);
}

static void fuzz_ring(const uint8_t *p, size_t n)
{
    if (!ring)
        setup_ring();
    if (n < 24)
        return;
    uint64_t cap = sw_ring_capacity(ring);
    uint64_t tail = get_u64(p), hd = get_u64(p + 8), rd = get_u64(p + 16);
    p += 24;
    n -= 24;
    if (!(hd & 1))
        tail &= ~(uint64_t)7; /* mostly aligned, sometimes not */
    uint64_t head = tail + ((hd >> 1) % (cap + cap / 4));
    if (!(hd & 2))
        head &= ~(uint64_t)7;
    memset(image + SW_RING_HDR_BYTES, 0, cap);
    for (size_t i = 0; i < n && i < cap; i++)
        image[SW_RING_HDR_BYTES + ((tail + i) & (cap - 1))] = p[i];
    put_u64(sw_ring_test_off_tail(), tail);
    put_u64(sw_ring_test_off_head(), head);
    put_u64(sw_ring_test_off_release_to(), (rd & 1) ? tail + (rd >> 1) % cap : tail);

    (void)sw_ring_recover(ring);
    uint64_t cur = sw_ring_tail(ring);
    for (int i = 0; i < 4096; i++) {
        const void *pl;
        uint32_t len;
        uint16_t type;
        uint64_t next;
        int rc = sw_ring_peek(ring, cur, &pl, &len, &type, &next);
        if (rc == 1) {
            /* Positions are modular (a corrupt tail may sit near 2^64): compare differences. */
            if (len > SW_REC_MAX_LEN || next - cur == 0 || next - cur > cap)
                abort(); /* peek promised a bounded record and progress */
            (void)sw_encode_check(pl, len);
            cur = next;
            continue;
        }
        if (rc < 0 || sw_ring_skip_stuck(ring, cur, &next) != 1)
            break;
        if (next - cur == 0 || next - cur > cap)
            abort();
        cur = next;
    }
    sw_ring_release(ring, cur);
    (void)sw_ring_empty(ring);
    /* The producer over a garbage header: it may drop, never write out of bounds. */
    uint32_t want = n ? (uint32_t)(p[0] * 97u) : 0;
    void *w = sw_ring_reserve(ring, want, SW_REC_SEGMENT);
    if (w) {
        memset(w, 0xab, want);
        sw_ring_commit(ring, w);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_ring(data + 1, size - 1);
    else
        fuzz_encode(data + 1, size - 1);
    return 0;
}
