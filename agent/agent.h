/*
 * agent.h - start-up of libswagent.so (agent.c): called once from the constructor.
 */
#ifndef SW_AGENT_H
#define SW_AGENT_H

#include "common.h"

/*
 * Resolves the real functions, loads the configuration, opens the log, starts the trace
 * and connection modules and registers the atfork handler. Any failure leaves the agent
 * off (every wrapper then goes straight to libc) and logs one line. Never exits.
 */
void sw_agent_init(void);

/* True when the agent is tracing in this process. */
bool sw_agent_enabled(void);

#endif /* SW_AGENT_H */
