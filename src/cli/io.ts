/** Command output goes to stdout as plain lines; logs are JSON elsewhere. */
export function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

export function warn(line: string): void {
  process.stderr.write(`${line}\n`);
}
