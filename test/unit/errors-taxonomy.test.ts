/** The taxonomy: every code in one list, and the errors outside the validator's own folders inside it. */
import { describe, expect, it } from "vitest";
import { FaultHeaderError, parseFaultHeader } from "../../src/engy-sim/faults.js";
import { HttpError } from "../../src/engy-sim/http.js";
import { DeadlineExceeded, deadline } from "../../src/episode/deadline.js";
import { ERROR_CODES } from "../../src/error-codes.js";
import { isAbortError, toValidatorError, ValidatorError } from "../../src/errors.js";
import { PyJsonError, parsePackBytes, pyJsonParse } from "../../src/pack/index.js";

describe("error codes", () => {
  it("are listed once each, in snake case", () => {
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    for (const c of ERROR_CODES) expect(c).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
  });
});

describe("errors of the parsers, the simulator and deadlines are ValidatorErrors", () => {
  it("a deadline aborts with an infra DeadlineExceeded, not an abort, that toValidatorError keeps", async () => {
    const d = deadline(5);
    await new Promise((r) => d.signal.addEventListener("abort", r, { once: true }));
    const reason = d.signal.reason as DeadlineExceeded;
    expect(reason).toBeInstanceOf(DeadlineExceeded);
    expect(reason).toBeInstanceOf(ValidatorError);
    expect(reason).toMatchObject({
      failureClass: "infra",
      code: "deadline_exceeded",
      retryable: true,
      ms: 5,
    });
    expect(reason.name).toBe("TimeoutError");
    expect(isAbortError(reason)).toBe(false);
    expect(toValidatorError(reason, "internal_error")).toBe(reason);
  });

  it("Python-JSON errors are input, with Python's message, and a pack that is not JSON is still rejected", () => {
    let err: unknown;
    try {
      pyJsonParse('{"a": }');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PyJsonError);
    expect(err).toMatchObject({ failureClass: "input", code: "json_invalid", retryable: false, position: 6 });
    expect((err as Error).message).toBe("Expecting value: line 1 column 7 (char 6)");
    const r = parsePackBytes(Buffer.from('{"a": }'));
    expect(r).toMatchObject({ ok: false, rejection: { code: "pack_verify_failed" } });
  });

  it("a bad fault header is input; the simulator's refusals are input, its 429/5xx upstream", () => {
    expect(() => parseFaultHeader("nonsense")).toThrow(FaultHeaderError);
    try {
      parseFaultHeader("nonsense");
    } catch (e) {
      expect(e).toMatchObject({ failureClass: "input", code: "invalid_fault_header" });
    }
    const refused = new HttpError({
      status: 404,
      type: "invalid_request_error",
      code: "model_not_found",
      message: "m",
    });
    expect(refused).toMatchObject({ failureClass: "input", code: "engy_sim_http_error", retryable: false });
    expect(refused.shape.code).toBe("model_not_found");
    const busy = new HttpError({
      status: 503,
      type: "server_error",
      code: "service_unavailable",
      message: "m",
    });
    expect(busy).toMatchObject({ failureClass: "upstream", retryable: true });
  });
});
