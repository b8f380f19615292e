/**
 * Prefix caching per (model, session), as providers do it: a request's cached tokens are the
 * tokens of the longest prefix of its prompt (tool schema, then messages) that an earlier request
 * to the same model in the same session already sent. Session = digest of the first messages.
 * Granularity is one message (real providers use blocks; this is stable and easy to predict).
 */
import { createHash } from "node:crypto";
import type { ChatMessage } from "./conversation.js";
import { messageTokens, PLAIN, type Tokenizer, toolsTokens } from "./tokens.js";

/** How many messages open a session (system prompt + task prompt, typically). */
export const SESSION_MESSAGES = 2;

function messageKey(m: ChatMessage): string {
  return JSON.stringify([m.role, m.content, m.name ?? null, m.toolCalls, m.toolCallId ?? null]);
}

export function sessionKey(messages: readonly ChatMessage[]): string {
  const h = createHash("sha256");
  for (const m of messages.slice(0, SESSION_MESSAGES)) h.update(messageKey(m)).update("\u0000");
  return h.digest("hex").slice(0, 24);
}

export class PrefixCache {
  /** prefix digest → seen; a Map so the oldest entries can be evicted first. */
  private readonly seen = new Map<string, true>();

  constructor(private readonly maxEntries = 100_000) {}

  /** Cached tokens for this prompt; then remember its prefixes for the requests that follow. */
  lookupAndRecord(
    model: string,
    messages: readonly ChatMessage[],
    tools: unknown,
    tk: Tokenizer = PLAIN,
  ): number {
    const h = createHash("sha256").update(model).update("\u0000").update(sessionKey(messages));
    h.update("\u0000").update(tools === undefined || tools === null ? "" : JSON.stringify(tools));
    let key = h.copy().digest("hex");
    const keys = [key];
    const tokens = [toolsTokens(tools, tk)];
    for (const m of messages) {
      h.update("\u0001").update(messageKey(m));
      key = h.copy().digest("hex");
      keys.push(key);
      tokens.push(tokens[tokens.length - 1]! + messageTokens(m, tk));
    }
    let cached = 0;
    for (let i = keys.length - 1; i >= 1; i--) {
      if (this.seen.has(keys[i]!)) {
        cached = tokens[i]!;
        break;
      }
    }
    for (const k of keys.slice(1)) {
      this.seen.delete(k);
      this.seen.set(k, true);
    }
    while (this.seen.size > this.maxEntries) {
      const oldest = this.seen.keys().next().value;
      if (oldest === undefined) break;
      this.seen.delete(oldest);
    }
    return cached;
  }
}
