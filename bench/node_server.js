// node_server.js - the bench's Node.js service (bench/run.sh --node): Node's own http server
// with a one-line handler, listening on 127.0.0.1 (kernel-chosen port), the port written to the
// file named by argv[2] once listening.
'use strict';
const server = require('http').createServer((req, res) => res.end('hello world\n'));
server.listen(0, '127.0.0.1', () => {
  require('fs').writeFileSync(process.argv[2], String(server.address().port));
});
process.on('SIGTERM', () => process.exit(0));
