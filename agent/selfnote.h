/*
 * selfnote.h - the ELF note that marks the swagent-reporter executable.
 *
 * libswagent.so must never trace the reporter (it would trace its own gRPC and, on a commit,
 * try to start itself). The constructor used to read /proc/self/exe and compare the base name:
 * one system call of ~18 us on every start of every process (procfs builds an inode for it),
 * and a renamed or symlinked copy was missed. Instead the reporter carries this note in a
 * PT_NOTE segment and the agent looks for it in the main program's program headers
 * (getauxval(AT_PHDR)): memory reads only, and the name of the file does not matter.
 *
 * SW_SELFNOTE_ASM is a top-level asm statement for exactly one file of the reporter.
 */
#ifndef SW_SELFNOTE_H
#define SW_SELFNOTE_H

#define SW_SELFNOTE_NAME "swagent" /* 7 bytes + NUL: namesz 8, no padding */
#define SW_SELFNOTE_TYPE 0x53575250u /* "SWRP" */
#define SW_SELFNOTE_DESC 0x72657074u /* 4 bytes of payload: "rept" */

/* "aR": allocated (so it is in a PT_NOTE segment) and retained under --gc-sections. */
#define SW_SELFNOTE_ASM                                                                       \
    __asm__(".pushsection .note.swagent.reporter,\"aR\",@note\n"                              \
            ".balign 4\n"                                                                     \
            ".long 8\n"          /* namesz */                                                 \
            ".long 4\n"          /* descsz */                                                 \
            ".long 0x53575250\n" /* type: SW_SELFNOTE_TYPE */                                 \
            ".asciz \"swagent\"\n"                                                            \
            ".long 0x72657074\n" /* desc: SW_SELFNOTE_DESC */                                 \
            ".popsection\n")

#endif
