import type { Command } from "commander";
import { InputError, PolicyError } from "../errors.js";
import { termLines } from "../terminal-text.js";
import { out, warn } from "./io.js";

interface ServeOptions {
  upstream: string;
  port: string;
  host: string;
  tokenEnv: string;
  defaultModel?: string;
}

function parsePort(raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    throw new InputError("bad_port", `--port: not a TCP port: ${raw}`);
  return n;
}

function parseUpstream(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new InputError("bad_upstream", `--upstream: not a URL: ${raw}`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new InputError("bad_upstream", `--upstream: must be http(s), got ${u.protocol}`);
  return raw.replace(/\/+$/, "");
}

export function registerPolicy(program: Command): void {
  const policy = program
    .command("policy")
    .description("run fusion policies locally (the miner's inner loop)");

  policy
    .command("serve")
    .description(
      'serve a policy directory as an OpenAI-compatible endpoint (model "auto") against any upstream, ' +
        "without Docker; one JSON line per turn on stdout",
    )
    .argument("<dir>", "policy directory: policy.py or policy.json (neither: pin on the default model)")
    .requiredOption(
      "--upstream <url>",
      "OpenAI-compatible base URL: the meter or the simulator (http://127.0.0.1:PORT/v1), or https://api.engy.ai/v1",
    )
    .option("--port <port>", "port to serve on", "8800")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--token-env <name>", "environment variable holding the upstream's bearer token", "EPISODE_TOKEN")
    .option(
      "--default-model <model>",
      'model for "auto" and for a directory without a policy file (default: DEFAULT_MODEL)',
    )
    .action(async (dir: string, opts: ServeOptions) => {
      const port = parsePort(opts.port);
      const upstream = parseUpstream(opts.upstream);
      const [{ loadConfig, namedEnv }, { startPolicyServer }] = await Promise.all([
        import("../config.js"),
        import("../policy/index.js"),
      ]);
      const cfg = loadConfig();
      const token = namedEnv(opts.tokenEnv);
      if (!token)
        warn(`note: $${opts.tokenEnv} is empty; calling the upstream without an Authorization header`);
      const ac = new AbortController();
      const server = await startPolicyServer({
        policyDir: dir,
        upstreamUrl: upstream,
        token,
        port,
        host: opts.host,
        defaultModel: opts.defaultModel ?? cfg.llm.defaultModel,
        python: cfg.policy.python,
        signal: ac.signal,
        // The policy is a miner's code: what it prints cannot drive the terminal either.
        onStdoutLine: (line) => out(line),
        onStderr: (chunk) => process.stderr.write(termLines(chunk)),
      });
      warn(`policy ${dir} serving on ${server.url} (model "auto"); Ctrl-C stops`);
      let stopping = false;
      const stop = () => {
        stopping = true;
        void server.stop();
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      const exit = await server.exited;
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      if (!stopping)
        throw new PolicyError(
          "policy_exited",
          `the policy exited (${exit.signal ? `signal ${exit.signal}` : `status ${exit.code}`})`,
        );
    });
}
