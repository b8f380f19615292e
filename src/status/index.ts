/** The live status of this process (loops, alarms, the running evaluation) that the web layer shows. */
export * from "./live.js";
