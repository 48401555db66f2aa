/*
 * tree.h - `collector-stub tree FILE`: renders the traces of a segments JSON-lines file (one
 * SegmentObject per line, proto3 JSON mapping) as indented trees, the way the SkyWalking UI's
 * trace view nests spans across segments and services.
 *
 * Rules: offline tool code; it reads untrusted input, never trusts a field's presence or type,
 * and escapes control bytes before they reach the terminal.
 */
#ifndef SW_STUB_TREE_H
#define SW_STUB_TREE_H

#include <stdio.h>

/* Output flags for sw_stub_tree_render(). */
#define SW_TREE_ASCII 0x1 /* ASCII connectors instead of box-drawing characters */

/*
 * Reads segments (JSON lines) from `in`, writes one tree per trace id to `out` and one message
 * per malformed line (with its line number) to `err`. Returns the number of segments parsed,
 * or a negative errno if reading failed.
 */
long sw_stub_tree_render(FILE *in, FILE *out, FILE *err, unsigned flags);

/*
 * Entry point of `collector-stub tree [--ascii] FILE|-` (argv[0] is "tree"). Returns the exit
 * status: 0 when at least one segment was parsed, 1 when none was, 2 on a usage error.
 */
int sw_stub_tree_main(int argc, char **argv);

#endif /* SW_STUB_TREE_H */
