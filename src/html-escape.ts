/** HTML escaping for the pages we render (the status page, the `eval` report): one function, one table. */
const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Escape for both text and quoted attribute values (null and undefined are empty). */
export function esc(v: unknown): string {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}
