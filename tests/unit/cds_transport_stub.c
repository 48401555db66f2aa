/*
 * cds_transport_stub.c - the transport calls agent/reporter/cds.c makes, for test_cds and
 * fuzz_cds, which call sw_cds_apply directly and never poll (no gRPC in those programs).
 */
#include "common.h"

#include "transport.h"

#include <stdlib.h>

bool sw_transport_mgmt_backing_off(const struct sw_transport *t)
{
    (void)t;
    return true;
}

int sw_transport_fetch_config(struct sw_transport *t, const char *service, const char *uuid,
                              uint8_t **answer, size_t *len)
{
    (void)t, (void)service, (void)uuid;
    *answer = NULL;
    *len = 0;
    return -ENOSYS;
}

int sw_transport_last_status(const struct sw_transport *t, const char **message)
{
    (void)t;
    *message = "";
    return 0;
}
