/*
 * cds.h - the stub's ConfigurationDiscoveryService answers (--cds FILE); see cds.c.
 */
#ifndef SW_STUB_CDS_H
#define SW_STUB_CDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The packed Commands answering fetchConfigurations with `uuid` from the configuration in
 * `file` (missing or NULL: none). *out is malloc'd (the caller frees). 0, or -1 out of memory.
 */
int stub_cds_answer(const char *file, const char *uuid, uint8_t **out, size_t *len);

#endif /* SW_STUB_CDS_H */
