/**
 * A loopback OpenAI-compatible `/v1/completions` server for the rollout-throughput row, run in
 * its own process (forked by the pipeline suite) so that serving does not compete with the
 * client for its event loop. Every request is answered after a fixed delay with the same body,
 * serialised once; request bodies are drained, not parsed.
 *
 * Argument: the delay in milliseconds. Sends `{ port }` to the parent once listening on
 * 127.0.0.1; exits when the parent goes away.
 */
import { createServer } from "node:http";
import process from "node:process";
import { completionBody } from "./completion.js";

const delayMs = Number(process.argv[2]);
const body = completionBody();
const headers = { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };

const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => setTimeout(() => res.writeHead(200, headers).end(body), delayMs));
});
// Both clients keep their connections between measurement rounds.
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.send!({ port: typeof address === "object" && address ? address.port : 0 });
});
process.on("disconnect", () => process.exit(0));
