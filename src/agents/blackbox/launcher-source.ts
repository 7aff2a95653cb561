// The program that starts a black-box command inside the sandbox (plain JS for /usr/bin/node):
// it listens on 127.0.0.1:<port> in the sandbox's own network namespace, pipes every connection
// to the gateway proxy's Unix socket, runs the command with the OpenAI/Anthropic variables
// pointing at that port, and reports how the command ended on a marked last line of stderr.

/** Marks the launcher's report line on stderr. */
export const LAUNCHER_MARK = "@@arbor-launcher ";

/**
 * Bytes of the command's stderr passed on; the rest is counted and dropped. Below both the
 * sandbox's output cap and the hygiene trace's stderr cap, so the report line always comes back.
 */
export const LAUNCHER_STDERR_BYTES = 128 * 1024;

/** The launcher's source. argv: <port> <socket> -- <command...>; env ARBOR_PROGRAM_ID, ARBOR_PROGRAM_KEY. */
export const LAUNCHER_SOURCE = `// Arbor black-box launcher (generated; see src/agents/blackbox/launcher-source.ts).
import net from "node:net";
import { spawn } from "node:child_process";

const [port, socketPath, sep, ...command] = process.argv.slice(2);
const report = (r) => process.stderr.write("\\n${LAUNCHER_MARK}" + JSON.stringify(r) + "\\n");
if (sep !== "--" || command.length === 0) {
  report({ error: "usage: launch.mjs <port> <socket> -- <command...>" });
  process.exit(64);
}
const id = process.env.ARBOR_PROGRAM_ID ?? "";
const key = process.env.ARBOR_PROGRAM_KEY ?? "";
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
});
server.on("error", (e) => {
  report({ error: "forwarder: " + e.message });
  process.exit(70);
});
server.listen(Number(port), "127.0.0.1", () => {
  const origin = "http://127.0.0.1:" + port + "/p/" + encodeURIComponent(id);
  const env = { ...process.env, OPENAI_BASE_URL: origin + "/v1", OPENAI_API_KEY: key, ANTHROPIC_BASE_URL: origin, ANTHROPIC_AUTH_TOKEN: key };
  delete env.ARBOR_PROGRAM_KEY;
  const child = spawn(command[0], command.slice(1), { stdio: ["inherit", "inherit", "pipe"], env });
  let kept = 0;
  let dropped = 0;
  child.stderr.on("data", (chunk) => {
    const room = Math.max(0, ${LAUNCHER_STDERR_BYTES} - kept);
    if (room > 0) process.stderr.write(chunk.subarray(0, room));
    kept += Math.min(room, chunk.length);
    dropped += Math.max(0, chunk.length - room);
  });
  let exited;
  let ended = false;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    if (dropped > 0) process.stderr.write("\\n[arbor: " + dropped + " more bytes of stderr dropped]\\n");
    report(exited);
    server.close();
    process.exit(exited.code ?? 128);
  };
  child.stderr.on("end", () => {
    ended = true;
    if (exited) finish();
  });
  child.on("error", (e) => {
    report({ spawnError: e.message });
    process.exit(127);
  });
  child.on("exit", (code, signal) => {
    exited = { code, signal };
    // A process the command left behind may hold its stderr open: report anyway, shortly.
    if (ended) finish();
    else setTimeout(finish, 500);
  });
});
`;
