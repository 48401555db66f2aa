/*
 * proto_list.c - the protocol modules of the connection layer (proto.h), in the order their
 * claim() and sniff() are asked. The last one is the default: a TCP connection no module
 * claims is its. Add a module with one line above the default.
 */
#include "common.h"

#include "proto.h"
#include "proto_http1.h"

const struct sw_proto *const sw_protos[] = {
    &sw_proto_http1, /* the default: keep it last */
};
const unsigned sw_protos_n = SW_ARRAY_LEN(sw_protos);
