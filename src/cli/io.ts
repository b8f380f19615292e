/**
 * Command output. What a command answers goes to stdout; with `--json` that is the JSON alone, and
 * every line for people (progress, notes, where the report went) goes to stderr — only when stderr
 * is a terminal, unless the command was asked (`--progress`). Logs are JSON elsewhere.
 */
import { Writable } from "node:stream";
import { termLines } from "../terminal-text.js";

// Every line a command writes for a terminal passes termLines (src/terminal-text.ts): outside text
// in it (a miner's file name, a bench's scenario name) cannot drive the terminal; a JSON document
// keeps its meaning. Text that must stay on its line is escaped with termText where it is put in.

export function out(line: string): void {
  process.stdout.write(`${termLines(line)}\n`);
}

export function warn(line: string): void {
  process.stderr.write(`${termLines(line)}\n`);
}

type TextStream = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/** Where a command's lines for people go (the stream a progress view draws on, too). */
export interface HumanOutput {
  readonly stream: TextStream;
  /** False when the lines go nowhere (--json with stderr not a terminal). */
  readonly shown: boolean;
  line(text: string): void;
}

/** A stream that drops what it is given. */
function discard(): TextStream {
  return new Writable({
    write(_chunk, _enc, done) {
      done();
    },
  });
}

/**
 * Without --json: stdout (the tables are the output). With --json: stderr when it is a terminal or
 * `progress` asks for it, else nowhere — so `cmd --json | jq .` and `cmd --json 2>/dev/null` alike
 * see the JSON alone, and a log file of stderr is not filled with redraws.
 */
export function humanOutput(
  flags: { json?: boolean | undefined; progress?: boolean | undefined },
  streams: { stdout: TextStream; stderr: TextStream } = { stdout: process.stdout, stderr: process.stderr },
): HumanOutput {
  const stream = !flags.json
    ? streams.stdout
    : streams.stderr.isTTY || flags.progress
      ? streams.stderr
      : undefined;
  const s = stream ?? discard();
  return {
    stream: s,
    shown: stream !== undefined,
    line: (text) => {
      s.write(`${termLines(text)}\n`);
    },
  };
}
