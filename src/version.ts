import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./repo.js";
import { UPSTREAM_RELEASE } from "./subnet.js";

/** The package version, read once from package.json next to src/ or dist/. */
export const VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      version: string;
    };
    return pkg.version;
  } catch {
    return "0.0.0";
  }
})();

export const HARNESS_NAME = "trajrl-validator-ts";

/**
 * How this implementation names itself where the protocol leaves room: the `User-Agent` of every
 * platform request. The wire's `version` is the upstream release it votes as (subnet.ts
 * UPSTREAM_RELEASE); this says which implementation and build sent it.
 */
export const USER_AGENT = `${HARNESS_NAME}/${VERSION} (trajectoryrl/${UPSTREAM_RELEASE})`;

/** One line for people (status page, `status`, `check`): this build and what it votes as. */
export const IDENTITY = `${HARNESS_NAME} ${VERSION}, votes as trajectoryRL ${UPSTREAM_RELEASE} (the upstream release whose rules it implements)`;
