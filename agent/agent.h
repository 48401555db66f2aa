/*
 * agent.h - start-up of libswagent.so (agent.c): called once from the constructor.
 */
#ifndef SW_AGENT_H
#define SW_AGENT_H

#include "common.h"

/*
 * The constructor's part: resolves the real functions, decides whether to run and loads the
 * configuration; the agent is then armed (sw_agent_armed). Any failure leaves the agent off
 * (every wrapper then goes straight to libc) and logs one line. Never exits.
 */
void sw_agent_init(void);

/*
 * Activation, once, when the process first needs the agent (agent.c): the default instance
 * name, the log's setup, the trace and connection modules, the atfork handler. Does nothing
 * unless armed or with the guard held; while another thread is activating, waits for it
 * (yielding, at most 100 ms). errno kept.
 */
void sw_agent_activate(void);

/* True while loaded and not yet activated, or activating (a cheap relaxed load). */
bool sw_agent_armed(void);

/* True when the agent is tracing in this process. */
bool sw_agent_enabled(void);

#endif /* SW_AGENT_H */
