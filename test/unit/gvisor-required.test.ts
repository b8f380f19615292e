/**
 * The `gvisor` test project's precondition (test/setup-gvisor.ts): on an engine without `runsc`
 * its files fail with the set-up command that registers it, rather than skip or run under runc.
 */
import { describe, expect, it } from "vitest";
import { gvisorMissing } from "../helpers/gvisor.js";

describe("the gvisor test project's precondition", () => {
  it("an engine with runsc registered: nothing to say", () => {
    expect(gvisorMissing(["io.containerd.runc.v2", "runc", "runsc", "runsc-kvm"])).toBeUndefined();
  });

  it("an engine without it: names what it has and the command that fixes it", () => {
    const why = gvisorMissing(["runc", "runsc-kvm"]);
    expect(why).toContain('needs the engine\'s "runsc" runtime');
    expect(why).toContain("this engine has runc, runsc-kvm");
    expect(why).toContain("bash scripts/setup.sh");
    expect(why).toContain("bash scripts/runsc-up.sh --print");
    expect(gvisorMissing([])).toContain("this engine has none listed");
  });
});
