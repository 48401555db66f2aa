// node_server.js - an HTTP server traced by SkyWalking's own Node.js agent
// (skywalking-backend-js, from npm; NOT under LD_PRELOAD). Each request is forwarded with
// http.request to http://127.0.0.1:$BACKEND_PORT<same path> and the backend's status and body
// are relayed. Prints "PORT n" once listening on 127.0.0.1 (kernel-chosen port).
// Environment: SW_AGENT_NAME, SW_AGENT_INSTANCE, SW_AGENT_COLLECTOR_BACKEND_SERVICES (read by
// the agent itself), BACKEND_PORT.
'use strict';
const agent = require('skywalking-backend-js').default;

agent.start({
  serviceName: process.env.SW_AGENT_NAME,
  serviceInstance: process.env.SW_AGENT_INSTANCE,
  collectorAddress: process.env.SW_AGENT_COLLECTOR_BACKEND_SERVICES,
});

const http = require('http');
const backend = Number(process.env.BACKEND_PORT);

const server = http.createServer((req, res) => {
  // http.request (not http.get, which the agent's plugin does not see) to the backend.
  const out = http.request('http://127.0.0.1:' + backend + req.url, { method: 'GET' }, (up) => {
    const chunks = [];
    up.on('data', (c) => chunks.push(c));
    up.on('end', () => {
      res.writeHead(up.statusCode, { 'Content-Type': 'text/plain' });
      res.end(Buffer.concat(chunks));
    });
  });
  out.on('error', (e) => {
    res.writeHead(502);
    res.end(String(e));
  });
  out.end();
});
server.listen(0, '127.0.0.1', () => {
  console.log('PORT ' + server.address().port);
});
process.on('SIGTERM', () => {
  // Deliver what is buffered, then leave.
  Promise.resolve(agent.flush()).finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
});
