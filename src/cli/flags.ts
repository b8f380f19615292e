/** Flag values parsed at the command line's boundary: one parser for a bounded number. */
import { InputError } from "../errors.js";

/** `--flag value` as a number in [min, max] (an integer when `int`); undefined when the flag is absent. */
export function numberFlag(flag: string, value: string, min: number, max: number, int?: boolean): number;
export function numberFlag(
  flag: string,
  value: string | undefined,
  min: number,
  max: number,
  int?: boolean,
): number | undefined;
export function numberFlag(
  flag: string,
  value: string | undefined,
  min: number,
  max: number,
  int = false,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < min || n > max || (int && !Number.isInteger(n)))
    throw new InputError(
      "invalid_flag",
      `--${flag} ${value}: expected ${int ? "an integer" : "a number"} in [${min}, ${max}]`,
    );
  return n;
}
