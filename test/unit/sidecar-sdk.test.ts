/**
 * The SDK as one file: the committed sidecar/sdk/trajrl_policy.py is exactly what the bundler makes of
 * sidecar/trajrl_policy/ now, and the bundler refuses sections that would not join into one namespace.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  buildSdkSingleFile,
  bundleSdk,
  readSdkSources,
  SDK_FILE,
  SDK_PYTHONPATH,
  SDK_SECTIONS,
  SDK_SIDECAR_PATH,
  type SdkSource,
  sdkSingleFile,
} from "../../src/policy/index.js";

function sources(over: Record<string, string>): SdkSource[] {
  const base: Record<string, string> = { __init__: '"""doc"""\n' };
  for (const s of SDK_SECTIONS)
    base[s] = `"""${s}"""\n\nfrom __future__ import annotations\n\n${s.toUpperCase()} = 1\n`;
  return Object.entries({ ...base, ...over }).map(([name, text]) => ({ name, text }));
}

describe("the SDK single file", () => {
  it("is the bundle of the package as it is (run `npm run sdk:bundle` after editing sidecar/trajrl_policy/)", () => {
    expect(readFileSync(SDK_FILE, "utf8")).toBe(buildSdkSingleFile());
    expect(sdkSingleFile()).toEqual({ name: "trajrl_policy.py", content: readFileSync(SDK_FILE, "utf8") });
    expect(SDK_SIDECAR_PATH).toBe("/policy/sdk/trajrl_policy.py");
    expect(SDK_PYTHONPATH).toBe("/policy/sdk:/policy");
  });

  it("is deterministic, keeps every section in order and ends with the script entry point", () => {
    const src = readSdkSources();
    const a = bundleSdk(src);
    expect(bundleSdk([...src].reverse())).toBe(a);
    const at = SDK_SECTIONS.map((s) => a.indexOf(`\n# ${s}\n`));
    expect(at.every((i) => i > 0)).toBe(true);
    expect([...at].sort((x, y) => x - y)).toEqual(at);
    expect(a.startsWith("#!/usr/bin/env python3\n")).toBe(true);
    expect(a.trimEnd().endsWith('if __name__ == "__main__":\n    main()')).toBe(true);
    // One namespace: no relative import survives, `from __future__` comes once, before the code.
    expect(a).not.toMatch(/^from \./m);
    expect(a.match(/^from __future__ import annotations$/gm)).toHaveLength(1);
  });

  it("merges the sections' imports into one sorted block", () => {
    const out = bundleSdk(
      sources({
        settings: '"""s"""\nimport os\nfrom typing import Any\n\nA = 1\n',
        transcript:
          '"""t"""\nimport json, os\nfrom typing import (\n    Optional,\n    Any,\n)\nfrom .settings import A\n\nB = A\n',
      }),
    );
    expect(out).toContain("import json\nimport os\nfrom typing import Any, Optional\n");
    expect(out).toContain("\nB = A\n");
  });

  it("refuses a name defined by two sections, or shadowing an import", () => {
    expect(() => bundleSdk(sources({ render: '"""r"""\nSETTINGS = 2\n' }))).toThrow(
      /SETTINGS is defined by both settings.py and render.py/,
    );
    expect(() => bundleSdk(sources({ render: '"""r"""\nimport json\n\ndef json():\n    pass\n' }))).toThrow(
      /json is defined by both/,
    );
  });

  it("refuses an import from a later section, a name the section does not define, or an import mid-module", () => {
    expect(() => bundleSdk(sources({ settings: '"""s"""\nfrom .server import SERVER\n' }))).toThrow(
      /not an earlier section/,
    );
    expect(() => bundleSdk(sources({ server: '"""s"""\nfrom .settings import NOPE\n' }))).toThrow(
      /does not define it/,
    );
    expect(() => bundleSdk(sources({ server: '"""s"""\nX = 1\nimport os\n' }))).toThrow(
      /after the first statement/,
    );
    expect(() => bundleSdk(sources({ server: "X = 1\n" }))).toThrow(/must start with a """docstring"""/);
  });
});
