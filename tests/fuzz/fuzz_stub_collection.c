/*
 * fuzz_stub_collection.c - libFuzzer differential target: collector-stub/pbwalk.c (the
 * --discard SegmentCollection walker) against protobuf-c's unpack of the whole collection.
 * Any input: both must accept or both refuse, and count the same segments; else abort.
 * Seeds: tests/fuzz/corpus/stub_collection (written by test_stub_pbwalk --seeds DIR).
 * Linked with tests/fuzz/replay_conf_prop.c, a main() replays the corpus instead (plain gcc).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pbwalk.h"

#include "language-agent/Tracing.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Skywalking__V3__SegmentCollection *m =
        skywalking__v3__segment_collection__unpack(NULL, size, data);
    size_t nseg = 0;
    int rc = sw_pbwalk_segments(data, size, &nseg);
    if ((m != NULL) != (rc == 0) || (m && m->n_segments != nseg)) {
        fprintf(stderr, "fuzz_stub_collection: protobuf-c %s (%zu segments), pbwalk %s (%zu)\n",
                m ? "accepts" : "refuses", m ? m->n_segments : 0, rc == 0 ? "accepts" : "refuses",
                nseg);
        abort();
    }
    if (m)
        skywalking__v3__segment_collection__free_unpacked(m, NULL);
    return 0;
}
