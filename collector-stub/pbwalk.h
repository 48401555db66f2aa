/*
 * pbwalk.h - count the SegmentObjects of a SegmentCollection one segment at a time.
 *
 * Rules: sw_pbwalk_segments() accepts exactly the messages that protobuf-c 1.4's
 * skywalking__v3__segment_collection__unpack() accepts and counts the same segments, but holds
 * at most one unpacked SegmentObject at a time (collector-stub --discard: see pbwalk.c).
 */
#ifndef SW_STUB_PBWALK_H
#define SW_STUB_PBWALK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Walk the SegmentCollection in data[0..len). Returns 0 and sets *nseg to its number of
 * segments, or -1 (*nseg untouched) when protobuf-c would refuse the message.
 */
int sw_pbwalk_segments(const uint8_t *data, size_t len, size_t *nseg);

#endif /* SW_STUB_PBWALK_H */
